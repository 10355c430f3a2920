import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import Testing

/// ALPN against an implementation that shares no code with ours:
/// `Tests/Interop/alpn_peer.py`, Python's `ssl` (`SSLContext.set_alpn_protocols`).
@Suite("ALPN against Python's ssl", .enabled(if: ExternalServer.which("python3") != nil, "needs python3"))
struct ALPNInteropTests {
    static let script = repositoryRoot().appendingPathComponent("Tests/Interop/alpn_peer.py").path

    /// The Python server, offering `protocols`, requiring a client certificate from the shared CA.
    static func pythonServer(_ protocols: [String]) async throws -> ExternalServer {
        let certs = sharedCertificates
        return try await ExternalServer.start(ExternalServer.which("python3")!, [
            script, "server", "--cert", certs.serverCertificate, "--key", certs.serverKey, "--ca", certs.caCertificate,
            "--alpn", protocols.joined(separator: ","), "--max-seconds", "120",
        ])
    }

    /// Runs the Python client against `port` offering `protocols`; its one-line JSON result.
    static func pythonClient(port: Int, _ protocols: [String]) async throws -> [String: Any] {
        let certs = sharedCertificates
        let output = try await runCommand(ExternalServer.which("python3")!, [
            script, "client", "--port", String(port), "--ca", certs.caCertificate,
            "--cert", certs.clientCertificate, "--key", certs.clientKey, "--alpn", protocols.joined(separator: ","),
        ])
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        return try #require(object, "the Python client printed \(output.debugDescription)")
    }

    /// What the Python server recorded per connection.
    static func connections(_ report: [String: Any]) -> [[String: Any]] {
        report["connections"] as? [[String: Any]] ?? []
    }

    @Test("our client and a Python server agree on h2")
    func ourClientPythonServer() async throws {
        let python = try await Self.pythonServer(["h2", "http/1.1"])
        let got = try await exchange([5, 6], port: python.ready["port"] as! Int, context: try ALPNContexts.client(["h2"]),
                                     serverName: "localhost")
        let report = await python.stop()
        #expect(got.bytes == [5, 6])
        #expect(got.event?.applicationProtocol == "h2")
        // The server's one session with a protocol is ours, and it chose h2. Sessions that offered
        // no protocol are not ours (our client offers h2, checked above): in the parallel suite,
        // twelve such sessions reached this server once, another test's client (one without
        // ALPN, trusting the same test CA) on a port it had used before.
        #expect(Self.connections(report).compactMap { $0["alpn"] as? String } == ["h2"], "\(report)")
    }

    @Test("our client requiring h2 and a Python server speaking only http/1.1: the clear error")
    func pythonServerWithoutH2() async throws {
        let python = try await Self.pythonServer(["http/1.1"])
        let error = await expectTLSFailure(.noApplicationProtocol) {
            _ = try await echo([1], port: python.ready["port"] as! Int, context: try ALPNContexts.client(["h2"]), serverName: "localhost")
        }
        let report = await python.stop()
        #expect(error?.message.contains("did not agree to h2 (ALPN)") == true, "\(String(describing: error))")
        // Python's server ignores an offer it shares nothing with, so the handshake itself went through there.
        #expect(Self.connections(report).map { $0["alpn"] is NSNull } == [true], "\(report)")
    }

    @Test("a Python client and our server agree on h2; one offering none is accepted without a protocol")
    func pythonClientOurServer() async throws {
        let server = try await EchoServer.start(try ALPNContexts.server(["h2"]))
        defer { Task { await server.stop() } }
        let withH2 = try await Self.pythonClient(port: server.port, ["http/1.1", "h2"])
        #expect(withH2["alpn"] as? String == "h2" && withH2["echo"] as? Bool == true, "\(withH2)")
        let without = try await Self.pythonClient(port: server.port, [])
        #expect(without["alpn"] is NSNull && without["echo"] as? Bool == true, "\(without)")
        try await waitUntil { server.events.completed.withLock { $0.count == 2 } }
        #expect(server.events.completed.withLock { $0 }.map(\.applicationProtocol) == ["h2", nil])
    }

    @Test("a Python client offering only http/1.1 is refused by our h2 server with no_application_protocol")
    func pythonClientWithoutH2() async throws {
        let server = try await EchoServer.start(try ALPNContexts.server(["h2"]))
        defer { Task { await server.stop() } }
        let result = try await Self.pythonClient(port: server.port, ["http/1.1"])
        let message = (result["error"] as? String ?? "").lowercased()
        #expect(message.contains("no application protocol") || message.contains("no_application_protocol"), "\(result)")
        try await waitUntil { server.events.errors.withLock { !$0.isEmpty } }
        #expect(server.events.errors.withLock { $0 }.contains { $0.code == .noApplicationProtocol })
    }
}
