import Foundation
import HeraldTestSupport
import Testing

/// A wrong port fails loudly and fast (issue 34, item 2): the first refusal is logged at the default
/// level naming host, port and cause; a run that never connects ends within its documented budget
/// (`firstConnectAttempts`), every request `failed` with that reason.
@Suite("herald send to a closed port: loud, fast, every request failed naming the refusal", .serialized)
struct ConnectFailureTests {
    static func run(transport: String, port: Int, dir: String) async throws -> (status: Int32, stdout: String, stderr: String, seconds: Double) {
        try #"{"transport":\#(transport)}"#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        let input = try temporaryFile((1...20).map { #"{"id":\#($0),"token":"\#(goodToken)","topic":"com.example.app","alert":"hi"}"# }.joined(separator: "\n") + "\n")
        let start = Date()
        let r = try await runHerald(["send", "--config", dir + "/herald.json", input], timeout: 120)
        return (r.status, r.stdout, r.stderr, Date().timeIntervalSince(start))
    }

    static func check(_ r: (status: Int32, stdout: String, stderr: String, seconds: Double), port: Int) throws {
        #expect(r.status == 3, "exit 3: some requests ended failed (\(r.stderr))")
        // A few seconds alone; 35 s once in the parallel run on 2 cores (a debug build starting under load): still far from 300 s.
        #expect(r.seconds < 100, "took \(r.seconds) s: the budget is firstConnectAttempts (5) with backoff, not maxOutage (300 s)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 20)
        for line in lines {
            #expect(line.contains(#""outcome":"failed""#) && line.contains("127.0.0.1:\(port)") && line.contains("connection refused"), "\(line)")
            #expect(!line.contains("SingleConnectionFailure") && !line.contains("errno"), "\(line)")
        }
        // At the default log level, at once: one line naming the endpoint and the cause.
        #expect(r.stderr.contains("127.0.0.1:\(port)") && r.stderr.contains("connection refused") && r.stderr.contains("gives up after 5 attempts"), "\(r.stderr)")
    }

    @Test("the binary gateway transport")
    func gateway() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = try freePort()
        let certs = sharedCertificates
        let r = try await Self.run(transport: """
            {"type":"gateway","host":"127.0.0.1","port":\(port),"serverName":"localhost","certificate":"\(certs.clientCertificate)",
             "key":"\(certs.clientKey)","caFile":"\(certs.caCertificate)"}
            """, port: port, dir: dir)
        try Self.check(r, port: port)
    }

    @Test("the HTTP/2 transport")
    func http2() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = try freePort()
        let certs = sharedCertificates
        _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/AuthKey.p8"])
        let r = try await Self.run(transport: """
            {"type":"http2","host":"127.0.0.1","port":\(port),"serverName":"localhost","caFile":"\(certs.caCertificate)",
             "providerToken":{"keyFile":"AuthKey.p8","keyID":"KEY1234567","teamID":"TEAM123456"}}
            """, port: port, dir: dir)
        try Self.check(r, port: port)
    }
}
