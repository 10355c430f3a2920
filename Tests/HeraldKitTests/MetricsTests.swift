import Foundation
import HeraldTestSupport
import Testing

/// `/metrics` against its documented list (docs/service.md's table of
/// series), through `prometheus_client`'s parser (PyPI): every row marked
/// *yes* is on a fresh service's first scrape, and nothing is there that the
/// table does not name. The Grafana dashboard (docs/grafana-dashboard.json)
/// queries only documented series.
@Suite(
    "/metrics against docs/service.md: every documented series from the first scrape, nothing undocumented; the Grafana dashboard queries only documented series",
    .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct MetricsTests {
    struct Row {
        let series: String
        let type: String
        /// The table's last column: "yes", "yes: <condition>" or "no: …".
        let firstScrape: String
    }

    /// The rows of the table of series in docs/service.md.
    static func documented() throws -> [Row] {
        let text = try String(contentsOf: repositoryRoot().appendingPathComponent("docs/service.md"), encoding: .utf8)
        var rows: [Row] = []
        for line in text.split(separator: "\n") where line.hasPrefix("| `herald_") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 6 else { continue }
            rows.append(Row(series: cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`")), type: cells[2], firstScrape: cells[4]))
        }
        return rows
    }

    /// One scrape of a fresh `herald serve` with `config`, parsed by prometheus_client.
    static func firstScrape(_ config: String) async throws -> (families: [String: String], samples: Set<String>) {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (file, secret) in [("api-tokens", "a-test-token-0123456789abcdef"), ("webhook-token", "a-webhook-token-0123456789")] {
            try (secret + "\n").write(toFile: dir + "/" + file, atomically: true, encoding: .utf8)
            chmod(dir + "/" + file, 0o600)
        }
        try config.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "error"])
        let port = server.ready["port"] as! Int
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/metrics_families.py").path
        let output: Result<String, any Error>
        do {
            output = .success(try await runCommand(try await interopPython(), [script, "--port", String(port), "--token-file", dir + "/api-tokens"]))
        } catch {
            output = .failure(error)
        }
        await server.stop(interrupt: true)
        let object = try JSONSerialization.jsonObject(with: Data(try output.get().utf8)) as? [String: Any] ?? [:]
        #expect(object["status"] as? Int == 200)
        return (object["families"] as? [String: String] ?? [:], Set(object["samples"] as? [String] ?? []))
    }

    /// Whether the scrape has `row`'s series: a counter's family without `_total`
    /// (prometheus_client's naming), any other family by its name.
    static func has(_ row: Row, _ scrape: (families: [String: String], samples: Set<String>)) -> Bool {
        let family = row.type == "counter" && row.series.hasSuffix("_total") ? String(row.series.dropLast("_total".count)) : row.series
        return scrape.families[family] == row.type
    }

    /// Checks one configuration's first scrape against the rows `applies` selects.
    static func check(_ config: String, _ applies: (String) -> Bool) async throws {
        let rows = try documented()
        #expect(rows.count >= 25, "the table of series in docs/service.md: \(rows.count) rows")
        let scrape = try await firstScrape(config)
        for row in rows where applies(row.firstScrape) {
            #expect(has(row, scrape), "\(row.series) (\(row.type), \"\(row.firstScrape)\") is not on the first scrape: \(scrape.families.keys.sorted())")
        }
        let names = Set(rows.flatMap { [$0.series, String($0.series.dropLast("_total".count))] })
        for family in scrape.families.keys {
            #expect(names.contains(family), "\(family) is on /metrics but not in docs/service.md's table")
        }
    }

    static let always: Set<String> = [
        "yes", "yes: each route's success at 0, other statuses from their first answer",
        "yes: `410 Unregistered`, `400 BadDeviceToken` and `8 invalid token` (rejected), `invalid-request` and `payload-too-large` (dropped), `gateway-unreachable` (failed) at 0; any other reason from its first request",
    ]

    @Test("the binary-interface simulator with an outcome webhook: the rows for every transport, the binary interface and the webhook")
    func binarySimulatorAndWebhook() async throws {
        try await Self.check(
            #"""
            {"serve":{"apiTokensFile":"api-tokens"},"transport":{"type":"simulator"},
             "outcomes":{"path":"outcomes.jsonl","webhook":{"url":"http://127.0.0.1:1/hook","tokenFile":"webhook-token"}}}
            """#
        ) { c in
            Self.always.contains(c) || c == "yes: binary interface and simulator" || c == "yes: with an outcome webhook"
                || c == "yes: every transport but the in-memory HTTP/2 simulator"
        }
    }

    @Test("two apps on the HTTP/2 simulator: the rows for every transport, HTTP/2 and apps")
    func http2Apps() async throws {
        try await Self.check(
            #"""
            {"serve":{"apiTokensFile":"api-tokens"},"apps":[
              {"name":"chat","topics":["com.a.chat"],"transport":{"type":"http2-simulator","bundleID":"com.a.chat"}},
              {"name":"news","topics":["com.b.news"],"transport":{"type":"http2-simulator","bundleID":"com.b.news"}}]}
            """#
        ) { c in Self.always.contains(c) || c == "yes: HTTP/2" || c == "yes: with apps" }
    }

    /// Every metric name in the dashboard's queries is a documented series
    /// (a histogram's through its `_bucket`, `_sum` or `_count`).
    @Test("docs/grafana-dashboard.json: valid JSON, panels with queries, each naming only documented series")
    func dashboard() throws {
        let data = try Data(contentsOf: repositoryRoot().appendingPathComponent("docs/grafana-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        #expect(panels.count >= 8, "\(panels.count) panels")
        let rows = try Self.documented()
        var names = Set(rows.map(\.series))
        for row in rows where row.type == "histogram" { names.formUnion(["_bucket", "_sum", "_count"].map { row.series + $0 }) }
        var expressions = 0
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                guard let expr = target["expr"] as? String else { continue }
                expressions += 1
                let used = expr.matches(of: /herald_[a-z_]+/).map { String($0.output) }
                #expect(!used.isEmpty, "\(panel["title"] ?? "?"): \(expr) names no series")
                for name in used { #expect(names.contains(name), "\(panel["title"] ?? "?"): \(name) is not a documented series") }
            }
        }
        #expect(expressions >= panels.count)
    }
}
