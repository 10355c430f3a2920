import Crypto
import Foundation
import HeraldCore
import HeraldJSON

/// The key behind APNs token authentication: a P-256 key from Apple's `.p8`
/// file, its 10-character key identifier and the team's.
public struct ProviderTokenKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The private scalar (swift-crypto's key type is not `Sendable` on Linux;
    /// the key is rebuilt from it for each signature, about once per 40 minutes).
    /// Never printed.
    let rawKey: [UInt8]
    public let keyID: String
    public let teamID: String

    /// Loads the key from a `.p8` file (PEM, PKCS #8). Errors name the file.
    public init(p8File path: String, keyID: String, teamID: String) throws(ProviderTokenError) {
        let text: String
        do { text = String(decoding: try readSmallFile(path, limit: 64 << 10), as: UTF8.self) } catch {
            throw ProviderTokenError("\(path): cannot read the .p8 key: \(error)")
        }
        try self.init(pem: text, keyID: keyID, teamID: teamID, source: path)
    }

    /// Loads the key from PEM text (`-----BEGIN PRIVATE KEY-----`); `source`
    /// names where it came from in errors.
    public init(pem: String, keyID: String, teamID: String, source: String = "the key") throws(ProviderTokenError) {
        for (name, value) in [("key id", keyID), ("team id", teamID)] where !Self.isIdentifier(value) {
            throw ProviderTokenError("the \(name) must be 10 letters or digits, as Apple's developer account shows it (got \(value.count) characters)")
        }
        do { rawKey = Array(try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation) } catch {
            throw ProviderTokenError("\(source): not a P-256 private key in PEM (PKCS #8, as Apple's .p8 files are)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The public half, for verifying what this key signs (the simulator's side).
    public var publicKeyPEM: String { (try? P256.Signing.PrivateKey(rawRepresentation: rawKey))?.publicKey.pemRepresentation ?? "" }

    /// Names the key; never shows it.
    public var description: String { "provider token key \(keyID) of team \(teamID)" }
    public var debugDescription: String { description }

    /// Whether `s` can be a key or team id: 10 ASCII letters or digits.
    public static func isIdentifier(_ s: String) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
    }

    /// A signed JWT: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` and the
    /// ECDSA P-256 signature over both, each part base64url without padding.
    public func sign(issuedAt: Int64) throws(ProviderTokenError) -> String {
        var header = JSONWriter()
        header.raw("{\"alg\":\"ES256\",\"kid\":")
        header.string(keyID)
        header.byte(UInt8(ascii: "}"))
        var claims = JSONWriter()
        claims.raw("{\"iss\":")
        claims.string(teamID)
        claims.raw(",\"iat\":")
        claims.int(Int(issuedAt))
        claims.byte(UInt8(ascii: "}"))
        let signingInput = Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
        do {
            let key = try P256.Signing.PrivateKey(rawRepresentation: rawKey)
            let signature = try key.signature(for: Array(signingInput.utf8))
            return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
        } catch {
            throw ProviderTokenError("signing the provider token failed: \(error)")
        }
    }
}

/// A provider token problem: the key, its identifiers, or signing.
public struct ProviderTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// base64url without padding (RFC 7515's encoding for JWTs): what Herald
/// signs and what its simulator verifies.
package enum Base64URL {
    package static func encode(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        while s.hasSuffix("=") { s.removeLast() }
        return String(s.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var s = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while s.utf8.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map { Array($0) }
    }
}
