import Foundation
import HeraldTestSupport
import Testing

/// The operator's page (`GET /`) and its JSON (`GET /v1/status`) against a running
/// `herald serve`: the figures are /metrics' (as prometheus_client reads them), the
/// history fills, failures are listed with their tokens redacted, and the page
/// asks nothing of another host.
@Suite(
    "herald serve's operator page and /v1/status: the figures /metrics has, a history, redacted failures, nothing from another host",
    .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct OperatorPageTests {
    static let token = "an-operator-token-0123456789"
    static let dead = String(repeating: "de", count: 32)

    static func request(_ method: String, _ path: String, body: String? = nil, auth: Bool = true) -> String {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if auth { head += "Authorization: Bearer \(token)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return head + "\r\n" + (body ?? "")
    }

    static func status(_ port: Int) async throws -> [String: Any] {
        let r = try await rawHTTP(port: port, request("GET", "/v1/status"))
        #expect(r.status == 200, "\(r.text.prefix(300))")
        return try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any] ?? [:]
    }

    @Test("20 accepted and 3 rejected (status 8): /v1/status has /metrics' counts, 3 dead tokens, the reason, 3 failures with redacted tokens, a history; / is the page, with a policy that forbids other hosts; /v1/status wants the token")
    func statusAndPage() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try (Self.token + "\n").write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        chmod(dir + "/api-tokens", 0o600)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens","statusSeconds":1},"transport":{"type":"simulator","invalidTokens":["\#(Self.dead)"]}}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "error"])
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int

        #expect(try await rawHTTP(port: port, Self.request("GET", "/v1/status", auth: false)).status == 401)
        let lines = (0..<20).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n\#($0)"}"# }
            + (20..<23).map { #"{"id":\#($0),"token":"\#(Self.dead)","alert":"gone"}"# }
        let posted = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: "[" + lines.joined(separator: ",") + "]"))
        #expect(posted.status == 202, "\(posted.text.prefix(300))")

        var status: [String: Any] = [:]
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            status = try await Self.status(port)
            let outcomes = status["outcomes"] as? [String: Int] ?? [:]
            let samples = (status["history"] as? [String: Any])?["samples"] as? [[String: Any]] ?? []
            if outcomes.values.reduce(0, +) == 23, (samples.last?["outcomes"] as? [String: Int])?.values.reduce(0, +) == 23 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let outcomes = status["outcomes"] as? [String: Int] ?? [:]
        #expect(outcomes["accepted"] == 20 && outcomes["rejected"] == 3, "\(status)")
        #expect(status["requests"] as? Int == 23 && status["deadTokens"] as? Int == 3)
        #expect((status["health"] as? [String: Any])?["ready"] as? Bool == true)
        let reasons = status["reasons"] as? [[String: Any]] ?? []
        #expect(reasons.contains { $0["outcome"] as? String == "rejected" && $0["reason"] as? String == "8 invalid token" && $0["count"] as? Int == 3 }, "\(reasons)")
        let failures = status["recentFailures"] as? [[String: Any]] ?? []
        #expect(failures.count == 3 && failures.allSatisfy { $0["outcome"] as? String == "rejected" }, "\(failures)")
        #expect(Set(failures.compactMap { $0["id"] as? Int }) == [20, 21, 22], "the service's ids of the three: \(failures)")
        for f in failures {
            let shown = f["token"] as? String ?? ""
            #expect(!shown.isEmpty && !shown.contains(Self.dead), "a failure's token is shown redacted: \(shown)")
        }
        let history = status["history"] as? [String: Any] ?? [:]
        #expect(history["intervalSeconds"] as? Int == 1)
        #expect((history["samples"] as? [[String: Any]] ?? []).count >= 2, "\(history)")
        #expect(((status["transport"] as? [String: Int]) ?? [:]).keys.contains("connections"), "\(status["transport"] ?? "")")

        // The same figures on /metrics, as prometheus_client reads them.
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/metrics_families.py").path
        let scraped = try JSONSerialization.jsonObject(
            with: Data(try await runCommand(try await interopPython(), [script, "--port", String(port), "--token-file", dir + "/api-tokens"]).utf8))
            as? [String: Any] ?? [:]
        let values = scraped["values"] as? [String: Double] ?? [:]
        for (kind, n) in outcomes {
            #expect(values["herald_outcomes_total{outcome=\(kind)}"].map(Int.init) == n, "\(kind): /v1/status \(n), /metrics \(values["herald_outcomes_total{outcome=\(kind)}"] ?? -1)")
        }
        #expect(values["herald_requests_total"].map(Int.init) == status["requests"] as? Int)
        #expect(values["herald_outcome_reasons_total{outcome=rejected,reason=8 invalid token}"].map(Int.init) == 3)

        // The page: HTML, everything in it, nothing fetched from another host.
        let page = try await rawHTTP(port: port, Self.request("GET", "/", auth: false))
        #expect(page.status == 200)
        let head = page.text.components(separatedBy: "\r\n\r\n").first?.lowercased() ?? ""
        #expect(head.contains("content-type: text/html"))
        #expect(head.contains("content-security-policy: default-src 'none'") && head.contains("connect-src 'self'"), "\(head)")
        let html = page.body
        #expect(html.contains("<title>Herald</title>") && html.contains("fetch(\"/v1/status\""))
        #expect(!html.contains("src=") && !html.contains("<link") && !html.contains("@import"), "the page loads nothing")
        let hosts = html.matches(of: /https?:\/\/[^"' )]+/).map { String($0.output) }
        #expect(hosts.allSatisfy { $0 == "http://www.w3.org/2000/svg" }, "only the SVG namespace names a host: \(hosts)")
    }
}
