import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import Logging
import Synchronization
import Testing

@Suite("TLS on OpenSSL: identities, verification, plain-words errors")
struct TLSHandshakeTests {
    let certs = sharedCertificates

    func serverContext(_ certs: ThrowawayCertificates, requireClient: Bool = true) throws -> TLSContext {
        try TLSContext(.server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey),
                               clientCA: requireClient ? .caFile(certs.caCertificate) : nil))
    }

    func clientContext(_ identity: TLSIdentity?, ca: String) throws -> TLSContext {
        try TLSContext(.client(identity: identity, trust: .caFile(ca)))
    }

    func expectTLSError(_ code: TLSError.Code, _ body: () async throws -> Void) async throws -> TLSError {
        do {
            try await body()
        } catch let e as TLSError {
            #expect(e.code == code, "\(e)")
            if ProcessInfo.processInfo.environment["HERALD_SHOW_ERRORS"] != nil { print("TLS error:", e) }
            return e
        }
        Issue.record("expected a TLS error \(code)")
        return TLSError(.configuration, "none")
    }

    @Test("PEM identity, verified server, SNI host name: data flows both ways")
    func pemWorks() async throws {
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let client = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKey), ca: certs.caCertificate)
        let message = Array((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        for name in ["localhost", "127.0.0.1"] {
            let got = try await echo(message, port: server.port, context: client, serverName: name)
            #expect(got == message)
        }
        // The server saw SNI for the host name (not for the IP address, as RFC 6066 says), over TLS 1.3.
        let events = server.events.completed.withLock { $0 }
        #expect(events.count == 2)
        #expect(events.contains { if case .handshakeCompleted("TLSv1.3", _, "localhost", _, nil) = $0 { true } else { false } })
        #expect(events.contains { if case .handshakeCompleted("TLSv1.3", _, nil, _, nil) = $0 { true } else { false } })
        // The first handshake was full; the next one resumed the session (no certificates exchanged).
        #expect(events.map { if case .handshakeCompleted(_, _, _, let r, _) = $0 { r } else { false } } == [false, true])
    }

    @Test("encrypted PEM key with the passphrase from a file or the environment")
    func encryptedKeyWorks() async throws {
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let secret = try String(contentsOfFile: certs.passphraseFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        setenv("HERALD_TEST_PASSPHRASE", secret, 1)
        for source in [SecretSource.file(certs.passphraseFile), .environment("HERALD_TEST_PASSPHRASE")] {
            let client = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKeyEncrypted, passphrase: source),
                                           ca: certs.caCertificate)
            #expect(try await echo([1, 2, 3], port: server.port, context: client, serverName: "localhost") == [1, 2, 3])
        }
    }

    @Test("PKCS#12 bundle with its password works")
    func p12Works() async throws {
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let client = try clientContext(.pkcs12(certs.clientP12, password: .file(certs.passphraseFile)), ca: certs.caCertificate)
        #expect(try await echo([9, 8, 7], port: server.port, context: client, serverName: "localhost") == [9, 8, 7])
    }

    @Test("wrong passphrase, missing passphrase, wrong .p12 password: named in plain words")
    func wrongPasswords() async throws {
        let dir = temporaryDirectory()
        let wrong = dir + "/wrong.txt"
        try "not the passphrase\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        var e = try await expectTLSError(.wrongPassword) {
            _ = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKeyEncrypted, passphrase: .file(wrong)),
                                  ca: certs.caCertificate)
        }
        #expect(e.message.contains(certs.clientKeyEncrypted) && e.message.contains("wrong passphrase"))
        #expect(!e.description.contains("not the passphrase"))
        e = try await expectTLSError(.missingPassword) {
            _ = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKeyEncrypted), ca: certs.caCertificate)
        }
        #expect(e.message.contains(certs.clientKeyEncrypted))
        e = try await expectTLSError(.wrongPassword) {
            _ = try clientContext(.pkcs12(certs.clientP12, password: .file(wrong)), ca: certs.caCertificate)
        }
        #expect(e.message.contains(certs.clientP12) && e.message.contains("wrong password"))
        e = try await expectTLSError(.missingPassword) {
            _ = try clientContext(.pkcs12(certs.clientP12, password: .environment("HERALD_TEST_UNSET_VARIABLE")), ca: certs.caCertificate)
        }
        #expect(e.message.contains("HERALD_TEST_UNSET_VARIABLE"))
    }

    @Test("key not matching the certificate, missing file, not PEM: named")
    func badFiles() async throws {
        var e = try await expectTLSError(.keyMismatch) {
            _ = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.serverKey), ca: certs.caCertificate)
        }
        #expect(e.message.contains(certs.serverKey) && e.message.contains(certs.clientCertificate))
        e = try await expectTLSError(.unreadableFile) {
            _ = try clientContext(.pem(certificate: "/nonexistent/cert.pem", key: certs.clientKey), ca: certs.caCertificate)
        }
        #expect(e.message.contains("/nonexistent/cert.pem"))
        e = try await expectTLSError(.badFile) {
            _ = try clientContext(.pem(certificate: certs.passphraseFile, key: certs.clientKey), ca: certs.caCertificate)
        }
        #expect(e.message.contains(certs.passphraseFile))
        e = try await expectTLSError(.badFile) {
            _ = try clientContext(.pkcs12(certs.clientCertificate, password: nil), ca: certs.caCertificate)
        }
        #expect(e.message.contains("not a PKCS#12"))
    }

    @Test("an expired certificate is refused when loaded, naming the file")
    func expiredIdentity() async throws {
        let dir = temporaryDirectory()
        let ca = try IssuedCertificate.certificateAuthority(commonName: "Test CA")
        let old = try IssuedCertificate.issue(commonName: "old", purpose: .client, by: ca, notBefore: -86_400 * 400, notAfter: -86_400)
        try old.writeCertificate(to: dir + "/old.pem")
        try old.writeKey(to: dir + "/old-key.pem")
        let e = try await expectTLSError(.expiredCertificate) {
            _ = try clientContext(.pem(certificate: dir + "/old.pem", key: dir + "/old-key.pem"), ca: certs.caCertificate)
        }
        #expect(e.message.contains(dir + "/old.pem") && e.message.contains("expired"))
    }

    @Test("a server signed by another CA is refused: unknown CA")
    func wrongCA() async throws {
        let other = try ThrowawayCertificates.make(in: temporaryDirectory())
        let server = try await EchoServer.start(try serverContext(other, requireClient: false))
        defer { Task { await server.stop() } }
        let client = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKey), ca: certs.caCertificate)
        let e = try await expectTLSError(.unknownCA) {
            _ = try await echo([1], port: server.port, context: client, serverName: "localhost")
        }
        #expect(e.message.contains("unknown CA") && e.message.contains(certs.caCertificate))
    }

    @Test("a server certificate for another host name is refused")
    func wrongHostName() async throws {
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let client = try clientContext(.pem(certificate: certs.clientCertificate, key: certs.clientKey), ca: certs.caCertificate)
        let e = try await expectTLSError(.hostNameMismatch) {
            _ = try await echo([1], port: server.port, context: client, serverName: "gateway.push.apple.com")
        }
        #expect(e.message.contains("gateway.push.apple.com"))
        // With verification off (loudly), the same connection goes through.
        let warnings = WarningCollector()
        let unverified = try TLSContext(
            TLSConfiguration(role: .client, identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), verifyPeer: false),
            logger: warnings.logger)
        #expect(warnings.all.contains { $0.contains("VERIFICATION IS OFF") })
        #expect(try await echo([5], port: server.port, context: unverified, serverName: "gateway.push.apple.com") == [5])
    }

    @Test("a client without a certificate is refused by the server")
    func missingClientCertificate() async throws {
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let client = try clientContext(nil, ca: certs.caCertificate)
        await #expect(throws: (any Error).self) {
            _ = try await echo([1, 2], port: server.port, context: client, serverName: "localhost")
        }
        // The server saw it and said why.
        try await waitUntil { server.events.errors.withLock { !$0.isEmpty } }
        let errors = server.events.errors.withLock { $0 }
        #expect(errors.contains { $0.code == .missingPeerCertificate }, "\(errors)")
        if ProcessInfo.processInfo.environment["HERALD_SHOW_ERRORS"] != nil { print("server:", errors) }
    }

    @Test("a client certificate from another CA is refused by the server")
    func clientFromOtherCA() async throws {
        let other = try ThrowawayCertificates.make(in: temporaryDirectory())
        let server = try await EchoServer.start(try serverContext(certs))
        defer { Task { await server.stop() } }
        let client = try clientContext(.pem(certificate: other.clientCertificate, key: other.clientKey), ca: certs.caCertificate)
        await #expect(throws: (any Error).self) {
            _ = try await echo([1, 2], port: server.port, context: client, serverName: "localhost")
        }
        try await waitUntil { server.events.errors.withLock { !$0.isEmpty } }
        #expect(server.events.errors.withLock { $0 }.contains { $0.code == .unknownCA })
    }
}

/// A swift-log handler that keeps the warnings (and worse) logged through it.
final class WarningCollector: Sendable {
    let messages = Mutex<[String]>([])
    func add(_ m: String) { messages.withLock { $0.append(m) } }
    var all: [String] { messages.withLock { $0 } }

    var logger: Logger { Logger(label: "test") { _ in Handler(collector: self) } }

    struct Handler: LogHandler {
        let collector: WarningCollector
        var logLevel: Logger.Level = .warning
        // Only messages are kept: metadata is dropped.
        var metadata: Logger.Metadata { get { [:] } set {} }
        subscript(metadataKey key: String) -> Logger.Metadata.Value? { get { nil } set {} }
        func log(event: LogEvent) { collector.add(event.message.description) }
    }
}


/// Runs the `openssl` command-line tool; nil when it is not installed.
func runOpenSSL(_ arguments: [String]) throws -> Int32? {
    let candidates = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
    guard let tool = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: tool)
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try startProcess { try p.run() }
    p.waitUntilExit()
    return p.terminationStatus
}

@Suite("Identities as users bring them")
struct IdentityFormatTests {
    let certs = sharedCertificates

    @Test("the seeds' recipe: `openssl pkcs12 -in X.p12 -out X.pem -nodes` gives one PEM file Herald takes as certificate and key")
    func convertedPEM() async throws {
        let out = temporaryDirectory() + "/converted.pem"
        guard let status = try runOpenSSL(["pkcs12", "-in", certs.clientP12, "-out", out, "-nodes", "-passin", "file:\(certs.passphraseFile)"])
        else { return }  // no openssl tool on this machine; .ci/run installs it
        #expect(status == 0)
        let server = try await EchoServer.start(try TLSContext(.server(
            identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: .caFile(certs.caCertificate))))
        defer { Task { await server.stop() } }
        let client = try TLSContext(.client(identity: .pem(certificate: out, key: out), trust: .caFile(certs.caCertificate)))
        #expect(try await echo([4, 2], port: server.port, context: client, serverName: "localhost") == [4, 2])
    }

    @Test("a legacy .p12 (RC2-40 and 3DES, as older Keychain Access exports) loads through OpenSSL's legacy provider")
    func legacyP12() async throws {
        let out = temporaryDirectory() + "/legacy.p12"
        guard let status = try runOpenSSL([
            "pkcs12", "-export", "-legacy", "-in", certs.clientCertificate, "-inkey", certs.clientKey, "-out", out,
            "-passout", "file:\(certs.passphraseFile)",
        ]) else { return }
        #expect(status == 0)
        let server = try await EchoServer.start(try TLSContext(.server(
            identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: .caFile(certs.caCertificate))))
        defer { Task { await server.stop() } }
        let client = try TLSContext(.client(identity: .pkcs12(out, password: .file(certs.passphraseFile)), trust: .caFile(certs.caCertificate)))
        #expect(try await echo([1], port: server.port, context: client, serverName: "localhost") == [1])
    }
}
