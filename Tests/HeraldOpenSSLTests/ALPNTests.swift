import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import Testing

/// TLS contexts on the shared certificates, negotiating `protocols` with ALPN.
enum ALPNContexts {
    static func server(_ protocols: [String], require: Bool = true) throws -> TLSContext {
        let certs = sharedCertificates
        var configuration = TLSConfiguration.server(
            identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: .caFile(certs.caCertificate))
        configuration.applicationProtocols = protocols
        configuration.requireApplicationProtocol = require
        return try TLSContext(configuration)
    }

    static func client(_ protocols: [String], require: Bool = true, maximumVersion: TLSVersion = .tls13) throws -> TLSContext {
        let certs = sharedCertificates
        var configuration = TLSConfiguration.client(
            identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), trust: .caFile(certs.caCertificate))
        configuration.applicationProtocols = protocols
        configuration.requireApplicationProtocol = require
        configuration.maximumVersion = maximumVersion
        return try TLSContext(configuration)
    }
}

/// Expects `body` to fail with a TLS error of `code` and returns it.
func expectTLSFailure(_ code: TLSError.Code, _ body: () async throws -> Void) async -> TLSError? {
    do {
        try await body()
        Issue.record("expected a TLS error \(code), but it worked")
    } catch let error as TLSError {
        #expect(error.code == code, "\(error)")
        return error
    } catch {
        Issue.record("expected a TLS error \(code), got \(error)")
    }
    return nil
}

@Suite("ALPN between our client and our server")
struct ALPNTests {
    @Test("h2 is negotiated and seen on both sides, on full and resumed handshakes, TLS 1.2 and 1.3")
    func negotiatesH2() async throws {
        for version in [TLSVersion.tls12, .tls13] {
            let server = try await EchoServer.start(try ALPNContexts.server(["h2"]))
            defer { Task { await server.stop() } }
            let client = try ALPNContexts.client(["h2"], maximumVersion: version)
            var resumed: [Bool] = []
            for _ in 0..<2 {
                let got = try await exchange([1, 2, 3], port: server.port, context: client, serverName: "localhost")
                #expect(got.bytes == [1, 2, 3])
                #expect(got.event?.applicationProtocol == "h2", "TLS \(version): \(String(describing: got.event))")
                if case .handshakeCompleted(_, _, _, let r, _) = got.event { resumed.append(r) }
            }
            #expect(resumed == [false, true], "TLS \(version): the second connection resumes, and still negotiates h2")
            try await waitUntil { server.events.completed.withLock { $0.count == 2 } }
            #expect(server.events.completed.withLock { $0 }.map(\.applicationProtocol) == ["h2", "h2"])
        }
    }

    @Test("the server's preference decides among the protocols the client offers")
    func serverPreference() async throws {
        let server = try await EchoServer.start(try ALPNContexts.server(["h2", "http/1.1"]))
        defer { Task { await server.stop() } }
        let cases: [([String], String)] = [(["http/1.1", "h2"], "h2"), (["spdy/3", "http/1.1"], "http/1.1"), (["h2"], "h2")]
        for (offer, expected) in cases {
            let got = try await exchange([7], port: server.port, context: try ALPNContexts.client(offer), serverName: "localhost")
            #expect(got.event?.applicationProtocol == expected, "client offering \(offer)")
        }
    }

    @Test("without ALPN on either side nothing changes; a server with ALPN accepts a client offering none")
    func withoutALPN() async throws {
        for serverProtocols in [[], ["h2"]] {
            let server = try await EchoServer.start(try ALPNContexts.server(serverProtocols))
            defer { Task { await server.stop() } }
            let got = try await exchange([9, 9], port: server.port, context: try ALPNContexts.client([]), serverName: "localhost")
            #expect(got.bytes == [9, 9])
            #expect(got.event != nil && got.event?.applicationProtocol == nil)
            try await waitUntil { server.events.completed.withLock { !$0.isEmpty } }
            #expect(server.events.completed.withLock { $0 }.map(\.applicationProtocol) == [nil], "server with \(serverProtocols)")
            #expect(server.events.errors.withLock { $0 }.isEmpty)
        }
    }

    @Test("protocol names that cannot go on the wire are a configuration error")
    func badNames() throws {
        for names in [[""], ["h2", String(repeating: "x", count: 256)]] {
            for role in [TLSConfiguration.Role.client, .server] {
                #expect(throws: TLSError.self, "\(role) with \(names.map(\.count))") {
                    _ = try role == .client ? ALPNContexts.client(names) : ALPNContexts.server(names)
                }
            }
        }
    }
}

@Suite("ALPN without a common protocol")
struct ALPNRefusalTests {
    @Test("our client requiring h2 and our server speaking only http/1.1: both say so, the server with no_application_protocol")
    func serverRefuses() async throws {
        let server = try await EchoServer.start(try ALPNContexts.server(["http/1.1"]))
        defer { Task { await server.stop() } }
        let error = await expectTLSFailure(.noApplicationProtocol) {
            _ = try await echo([1], port: server.port, context: try ALPNContexts.client(["h2"]), serverName: "localhost")
        }
        #expect(error?.message.contains("did not agree to h2 (ALPN)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("no_application_protocol") == true)
        try await waitUntil { server.events.errors.withLock { !$0.isEmpty } }
        let serverErrors = server.events.errors.withLock { $0 }
        #expect(serverErrors.contains { $0.code == .noApplicationProtocol && $0.message.contains("http/1.1") }, "\(serverErrors)")
        #expect(server.events.completed.withLock { $0 }.isEmpty)
    }

    @Test("our client requiring h2 and a server without ALPN: the handshake fails, naming h2")
    func serverIgnoresALPN() async throws {
        let server = try await EchoServer.start(try ALPNContexts.server([]))
        defer { Task { await server.stop() } }
        let client = try ALPNContexts.client(["h2", "http/1.1"])
        let error = await expectTLSFailure(.noApplicationProtocol) {
            _ = try await echo([1], port: server.port, context: client, serverName: "localhost")
        }
        #expect(error?.message == "the server localhost did not agree to h2 or http/1.1 (ALPN): it selected no application protocol")
    }

    @Test("with requireApplicationProtocol off, both sides go on without a protocol")
    func notRequired() async throws {
        let plain = try await EchoServer.start(try ALPNContexts.server([]))
        defer { Task { await plain.stop() } }
        var got = try await exchange([3], port: plain.port, context: try ALPNContexts.client(["h2"], require: false), serverName: "localhost")
        #expect(got.bytes == [3] && got.event != nil && got.event?.applicationProtocol == nil)

        let lenient = try await EchoServer.start(try ALPNContexts.server(["h2"], require: false))
        defer { Task { await lenient.stop() } }
        got = try await exchange([4], port: lenient.port, context: try ALPNContexts.client(["http/1.1"], require: false), serverName: "localhost")
        #expect(got.bytes == [4] && got.event != nil && got.event?.applicationProtocol == nil)
        #expect(lenient.events.completed.withLock { $0 }.map(\.applicationProtocol) == [nil])
    }
}
