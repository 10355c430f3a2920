import Crypto
import Foundation
import HeraldJSON
import HeraldTestSupport
import PropertyBased
import Testing

@testable import HeraldHTTP2

/// A `.p8` key made by the `openssl` command line, as Apple's are: PKCS #8 PEM, P-256.
func opensslP8(in dir: String) async throws -> String {
    let path = dir + "/AuthKey_KEY1234567.p8"
    _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
    return path
}

func testKey() throws -> ProviderTokenKey {
    try ProviderTokenKey(pem: P256.Signing.PrivateKey().pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
}

@Suite("Provider tokens: ES256 JWTs, signed once per team")
struct ProviderTokenTests {
    @Test("a token is header.claims.signature, base64url, and the openssl command line verifies the signature")
    func signAndVerifyWithOpenSSL() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try await ProviderTokenKey(p8File: try opensslP8(in: dir), keyID: "KEY1234567", teamID: "TEAM123456")
        let token = try key.sign(issuedAt: 1_700_000_000)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
        #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == #"{"iss":"TEAM123456","iat":1700000000}"#)
        let raw = try #require(Base64URL.decode(parts[2]))
        #expect(raw.count == 64)

        // Verified by OpenSSL, not by the code that signed: the public key from the .p8, the signature in DER.
        let der = try P256.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation
        try Data(der).write(to: URL(fileURLWithPath: dir + "/sig.der"))
        try Data("\(parts[0]).\(parts[1])".utf8).write(to: URL(fileURLWithPath: dir + "/input"))
        _ = try await runCommand("/usr/bin/openssl", ["pkey", "-in", dir + "/AuthKey_KEY1234567.p8", "-pubout", "-out", dir + "/pub.pem"])
        let verified = try await runCommand("/usr/bin/openssl", ["dgst", "-sha256", "-verify", dir + "/pub.pem", "-signature", dir + "/sig.der", dir + "/input"])
        #expect(verified.contains("Verified OK"))
        // A token altered after signing does not verify.
        try Data("\(parts[0]).\(parts[1])x".utf8).write(to: URL(fileURLWithPath: dir + "/input"))
        await #expect(throws: (any Error).self) {
            _ = try await runCommand("/usr/bin/openssl", ["dgst", "-sha256", "-verify", dir + "/pub.pem", "-signature", dir + "/sig.der", dir + "/input"])
        }
    }

    @Test("bad keys and identifiers are errors naming the file or the field")
    func badKeys() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = dir + "/missing.p8"
        #expect(throws: ProviderTokenError.self) { try ProviderTokenKey(p8File: missing, keyID: "KEY1234567", teamID: "TEAM123456") }
        do { _ = try ProviderTokenKey(p8File: missing, keyID: "KEY1234567", teamID: "TEAM123456") } catch { #expect(error.description.contains(missing)) }
        let rsa = dir + "/rsa.p8"
        _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", rsa])
        do {
            _ = try ProviderTokenKey(p8File: rsa, keyID: "KEY1234567", teamID: "TEAM123456")
            Issue.record("an RSA key was taken")
        } catch { #expect(error.description.contains(rsa) && error.description.contains("P-256")) }
        let pem = P256.Signing.PrivateKey().pemRepresentation
        for (kid, team) in [("KEY123456", "TEAM123456"), ("KEY1234567", "TEAM12345!"), ("", "TEAM123456")] {
            #expect(throws: ProviderTokenError.self) { try ProviderTokenKey(pem: pem, keyID: kid, teamID: team) }
        }
    }

    @Test("descriptions never show the key or a token")
    func redacted() throws {
        var tokens = ProviderTokens(key: try testKey())
        let t = try tokens.token(now: 5)
        for text in ["\(tokens)", String(reflecting: tokens), "\(tokens.key)", String(reflecting: tokens.key)] {
            #expect(!text.contains(t) && !text.contains(String(t.split(separator: ".")[2])))
            #expect(!text.contains("\(tokens.key.rawKey)"))
        }
    }

    @Test("one token for every request until refreshAfter, then one new token")
    func sharedUntilRefresh() throws {
        var tokens = ProviderTokens(key: try testKey())
        let t0 = try tokens.token(now: 1000)
        for s in stride(from: Int64(1000), to: 1000 + 40 * 60, by: 7) { #expect(try tokens.token(now: s) == t0) }
        let t1 = try tokens.token(now: 1000 + 40 * 60)
        #expect(t1 != t0 && tokens.signed == 2)
    }

    @Test("ExpiredProviderToken: re-signed once per token; a stale answer resends without signing; a fresh token called expired fails")
    func expired() throws {
        var tokens = ProviderTokens(key: try testKey())
        let t0 = try tokens.token(now: 0)
        #expect(try tokens.expired(t0, now: 100) == .resend)
        #expect(tokens.signed == 2)
        let t1 = try tokens.token(now: 101)
        #expect(t1 != t0)
        #expect(try tokens.expired(t0, now: 102) == .resend)  // another request's answer about the old token
        #expect(tokens.signed == 2)
        guard case .fail(let why) = try tokens.expired(t1, now: 103) else { Issue.record("a fresh token called expired was signed again"); return }
        #expect(why.contains("clock") && tokens.signed == 2)
    }

    @Test("TooManyProviderTokenUpdates: nothing is signed until the hold ends, past refreshAfter too")
    func tooManyUpdates() throws {
        var tokens = ProviderTokens(key: try testKey())
        let t0 = try tokens.token(now: 0)
        tokens.tooManyUpdates(now: 38 * 60)
        #expect(try tokens.token(now: 40 * 60 + 5) == t0)  // past refreshAfter, but held
        #expect(try tokens.expired(t0, now: 50 * 60) == .resendAt(58 * 60))
        #expect(tokens.signed == 1)
        #expect(try tokens.token(now: 58 * 60) != t0)  // the hold is over
        #expect(tokens.signed == 2)
    }

    @Test("property: over hours of traffic, every token sent is younger than an hour and tokens are at least 20 minutes apart")
    func invariants() async throws {
        let key = try testKey()
        await propertyCheck(count: 40, input: Gen.int(in: 1...300).array(of: 1...400)) { gaps in
            var tokens = ProviderTokens(key: key)
            var now: Int64 = 1_700_000_000
            var issued: [String: Int64] = [:]
            var lastSigned: Int64?
            for gap in gaps {
                now += Int64(gap) * 10
                let before = tokens.signed
                guard let t = try? tokens.token(now: now) else { Issue.record("signing failed"); return }
                if tokens.signed > before {
                    if let lastSigned { #expect(now - lastSigned >= 20 * 60) }
                    lastSigned = now
                    issued[t] = now
                }
                #expect(issued[t].map { now - $0 < 60 * 60 } ?? false, "a token that was never signed, or too old")
            }
        }
    }
}
