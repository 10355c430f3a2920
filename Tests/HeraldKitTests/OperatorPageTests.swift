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

    /// A `herald serve` on the simulator (status 8 for `dead`), its history every second.
    static func startServe(_ dir: String) async throws -> ExternalServer {
        try (Self.token + "\n").write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        chmod(dir + "/api-tokens", 0o600)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens","statusSeconds":1},"transport":{"type":"simulator","invalidTokens":["\#(Self.dead)"]}}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        return try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "error"])
    }

    /// Posts 20 notifications to good tokens and 3 to `dead`; returns /v1/status once all 23
    /// are decided and the history's last sample has them.
    static func postAndWait(_ port: Int) async throws -> [String: Any] {
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
        return status
    }

    /// /metrics as prometheus_client reads it: "name{label=value,…}" → value.
    static func scrape(_ port: Int, tokenFile: String) async throws -> [String: Double] {
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/metrics_families.py").path
        let scraped = try JSONSerialization.jsonObject(
            with: Data(try await runCommand(try await interopPython(), [script, "--port", String(port), "--token-file", tokenFile]).utf8))
            as? [String: Any] ?? [:]
        return scraped["values"] as? [String: Double] ?? [:]
    }

    @Test("20 accepted and 3 rejected (status 8): /v1/status has /metrics' counts, 3 dead tokens, the reason, 3 failures with redacted tokens, a history; / is the page, with a policy that forbids other hosts; /v1/status wants the token")
    func statusAndPage() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await Self.startServe(dir)
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int

        #expect(try await rawHTTP(port: port, Self.request("GET", "/v1/status", auth: false)).status == 401)
        let status = try await Self.postAndWait(port)
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
        let values = try await Self.scrape(port, tokenFile: dir + "/api-tokens")
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

    static let chromium = ExternalServer.which("chromium") ?? ExternalServer.which("chromium-browser")

    /// Headless Chromium (Debian's package) on `url`: the DOM after `seconds` of the page's
    /// time, with its network log written to `netlog`; or a screenshot to `screenshot`.
    /// The page's console goes to standard error (a request its Content-Security-Policy blocked is said there).
    static func chromium(_ url: String, profile: String, netlog: String? = nil, screenshot: String? = nil, seconds: Int = 5) async throws
        -> (dom: String, console: String)
    {
        var arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps", "--user-data-dir=\(profile)",
            "--window-size=1400,1100", "--virtual-time-budget=\(seconds * 1000)", "--enable-logging=stderr", "--v=0",
        ]
        if let netlog { arguments.append("--log-net-log=\(netlog)") }
        if let screenshot { arguments.append("--screenshot=\(screenshot)") } else { arguments.append("--dump-dom") }
        let r = try await runProcess(URL(fileURLWithPath: chromium!), arguments + [url])
        #expect(r.status == 0, "chromium: \(r.stderr.suffix(500))")
        return (r.stdout, r.stderr)
    }

    @Test(
        "headless Chromium loads the page with the token in its fragment: its figures are /metrics', every request the page makes goes to this service, and a screenshot is kept (.build/test-artifacts/operator-page.png)",
        .enabled(if: chromium != nil, "needs Debian's chromium (.ci/run installs it)"))
    func inChromium() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await Self.startServe(dir)
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int
        _ = try await Self.postAndWait(port)
        let origin = "http://127.0.0.1:\(port)"

        let netlog = dir + "/netlog.json"
        let (dom, console) = try await Self.chromium(origin + "/#token=" + Self.token, profile: dir + "/profile", netlog: netlog)
        #expect(!console.contains("Content Security Policy"), "the page tried what its policy forbids: \(console.split(separator: "\n").filter { $0.contains("Security") })")
        #expect(dom.contains(#"data-loaded="true""#), "the page did not load its figures: \(dom.suffix(800))")
        var shown: [String: Int] = [:]
        for m in dom.matches(of: /id="outcome-([a-z]+)">(\d+)</) { shown[String(m.output.1)] = Int(m.output.2) }
        let values = try await Self.scrape(port, tokenFile: dir + "/api-tokens")
        #expect(shown.count == 6, "\(shown)")
        for (kind, n) in shown {
            #expect(values["herald_outcomes_total{outcome=\(kind)}"].map(Int.init) == n, "\(kind): the page \(n), /metrics \(values["herald_outcomes_total{outcome=\(kind)}"] ?? -1)")
        }
        let requests = dom.firstMatch(of: /id="requests">(\d+)</).map { Int($0.output.1) } ?? nil
        #expect(requests == values["herald_requests_total"].map(Int.init))
        #expect(dom.contains("8 invalid token") && !dom.contains(Self.dead), "the reason shown, the dead token redacted")

        // Every request the page started (Chromium's own, for updates and the like, say "not an origin");
        // one to another host would also have been refused by the policy, and said so above.
        let log = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: netlog))) as? [String: Any] ?? [:]
        var fromPage: [String] = []
        for event in log["events"] as? [[String: Any]] ?? [] {
            guard let params = event["params"] as? [String: Any], let url = params["url"] as? String,
                let initiator = params["initiator"] as? String, initiator.hasPrefix("http")
            else { continue }
            fromPage.append(url)
        }
        #expect(fromPage.contains(origin + "/v1/status"), "\(fromPage)")
        #expect(fromPage.allSatisfy { $0.hasPrefix(origin + "/") }, "the page asked another host: \(fromPage)")

        let artifacts = repositoryRoot().appendingPathComponent(".build/test-artifacts").path
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        _ = try await Self.chromium(origin + "/#token=" + Self.token, profile: dir + "/profile-shot", screenshot: artifacts + "/operator-page.png")
        let png = try Data(contentsOf: URL(fileURLWithPath: artifacts + "/operator-page.png"))
        #expect(png.count > 10_000 && png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG of \(png.count) bytes")
    }
}
