import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

private func startServe(in dir: String, queue: Int = 20_000) async throws -> ExternalServer {
    try "a-test-token-0123456789abcdef\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
    try #"""
    {"serve":{"apiTokensFile":"api-tokens","queue":\#(queue)},"transport":{"type":"simulator"},"outcomes":"outcomes.jsonl",
     "pipeline":{"batchSize":256}}
    """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
    return try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
}

private func runClient(port: Int, dir: String, _ extra: [String]) async throws -> [String: Any] {
    try await runServeClient(port: port, tokenFile: dir + "/api-tokens", extra)
}

/// Outcome lines by the caller's `id`.
private func outcomesByCallerID(_ path: String) throws -> [Int: [String]] {
    var byID: [Int: [String]] = [:]
    for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
        guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let id = o["id"] as? Int else { continue }
        byID[id, default: []].append(o["outcome"] as? String ?? "?")
    }
    return byID
}

@Suite(
    "herald serve: the HTTP API against a client written outside the project (Python http.client, prometheus_client)",
    .serialized, .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct ServeTests {
    @Test("probes, authentication, bad bodies (malformed, bad lines, 10 MB) answered 4xx and the service stays healthy; 20,000 notifications each get an id and one outcome; /metrics parses, its counters equal the outcomes and its HTTP series count the POSTs")
    func api() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await startServe(in: dir)
        let port = server.ready["port"] as! Int
        let r = try await runClient(port: port, dir: dir, ["--count", "20000", "--batch", "500"])
        let checks = r["checks"] as? [String: Any] ?? [:]
        #expect(checks["healthz"] as? Int == 200 && checks["readyz"] as? Int == 200 && checks["healthz_after"] as? Int == 200)
        #expect(checks["no_token"] as? Int == 401 && checks["wrong_token"] as? Int == 401 && checks["www_authenticate"] as? String == "Bearer")
        #expect((checks["malformed"] as? [Any])?.first as? Int == 400 && (checks["bad_lines"] as? [Any])?.first as? Int == 400)
        #expect(checks["too_large"] as? Int == 413)
        #expect((checks["get_first"] as? [Any])?.last as? String == "decided" && checks["get_unknown"] as? Int == 404)
        #expect(r["accepted"] as? Int == 20_000)
        let metrics = r["metrics"] as? [String: Double] ?? [:]
        let summary = await server.stop(interrupt: true)
        let fields = summary["summary"] as? [String: Any] ?? [:]
        #expect(fields["entered"] as? Int == 20_000 && fields["balanced"] as? Bool == true, "\(summary)")
        let byID = try outcomesByCallerID(dir + "/outcomes.jsonl")
        #expect(byID.count == 20_000 && byID.values.allSatisfy { $0.count == 1 })
        #expect((metrics["herald_transport_connections_total"] ?? 0) >= 1 && metrics["herald_requests_total"] == 20_000, "\(metrics.keys.sorted())")
        // The pipeline's own metrics: each stage saw every request, and each outcome's latency was timed.
        for stage in ["ingest", "payload", "transport"] {
            #expect(metrics["herald_stage_requests_total{stage=\(stage)}"] == 20_000, "\(stage): \(metrics.keys.filter { $0.contains("stage") }.sorted())")
            #expect((metrics["herald_stage_duration_seconds_count{stage=\(stage)}"] ?? 0) >= 20_000 / 256)
        }
        #expect(metrics["herald_notification_latency_seconds_count"] == 20_000)
        #expect((metrics["herald_transport_payload_bytes_total"] ?? 0) > 20_000 * 20 && (metrics["herald_transport_frame_bytes_total"] ?? 0) > 0)
        #expect((metrics["herald_notification_latency_seconds_sum"] ?? 0) > 0)
        // HTTP metrics: every POST the client counted as 202, by route, method and status, each timed;
        // the 401s of the authentication checks counted too.
        let accepted202 = (r["statuses"] as? [String: Int])?["202"] ?? -1
        let postKey = "{method=POST}{route=/v1/notifications}{status=202}"
        #expect(metrics["herald_http_requests_total" + postKey].map(Int.init) == accepted202, "\(metrics.keys.filter { $0.hasPrefix("herald_http") }.sorted())")
        #expect(metrics["herald_http_request_duration_seconds_count" + postKey].map(Int.init) == accepted202)
        #expect(metrics.keys.contains { $0.hasPrefix("herald_http_requests_total{") && $0.hasSuffix("{status=401}") })
        for kind in ["accepted", "rejected", "dropped", "suppressed", "failed"] {
            let counted = Int(metrics["herald_outcomes_total{outcome=\(kind)}"] ?? -1)
            #expect(counted == byID.values.filter { $0 == [kind] }.count, "herald_outcomes_total{outcome=\(kind)} = \(counted)")
        }
    }

    @Test("SIGTERM in the middle of 1,000,000 notifications: intake stops (503), the queue drains, every request that got an id has exactly one outcome, every other one was refused with a status; exit 0")
    func sigtermUnderLoad() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await startServe(in: dir, queue: 50_000)
        let port = server.ready["port"] as! Int
        let r = try await runClient(port: port, dir: dir, [
            "--count", "1000000", "--batch", "1000", "--signal-pid", String(server.processIdentifier), "--signal-after", "200",
        ])
        let summary = await server.stop()
        let ids = r["ids"] as? [String: Int] ?? [:]
        let accepted = r["accepted"] as? Int ?? -1, refused = r["refused"] as? Int ?? -1
        #expect(accepted >= 200_000 && refused > 0 && accepted + refused == 1_000_000, "accepted \(accepted), refused \(refused)")
        #expect((r["statuses"] as? [String: Int])?["503"] == 1, "the first batch after the signal is refused with 503: \(r["statuses"] ?? "")")
        #expect((summary["summary"] as? [String: Any])?["balanced"] as? Bool == true, "\(summary)")
        let byID = try outcomesByCallerID(dir + "/outcomes.jsonl")
        #expect(Set(byID.keys) == Set(ids.keys.compactMap { Int($0) }), "outcomes for exactly the requests that got an id")
        #expect(byID.values.allSatisfy { $0.count == 1 }, "one outcome each")
        #expect(Set(ids.values).count == ids.count, "ids are distinct")
    }

    @Test("schemathesis (PyPI) against the served OpenAPI document, every check (schema-valid accepted, schema-violating refused, statuses, content types, headers, auth, undeclared methods, the link to a created notification): no failures; the served document is the committed one; the service stays healthy")
    func openAPI() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await startServe(in: dir)
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int
        let committed = try Data(contentsOf: repositoryRoot().appendingPathComponent("Sources/HeraldService/openapi.yaml"))
        let python = try await interopPython()
        func get(_ path: String) async throws -> String {
            try await runCommand(python, ["-c", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())", "http://127.0.0.1:\(port)" + path])
        }
        let served = try await get("/openapi.yaml")
        #expect(Data(served.utf8) == committed, "GET /openapi.yaml serves Sources/HeraldService/openapi.yaml")
        let st = URL(fileURLWithPath: python).deletingLastPathComponent().appendingPathComponent("st").path
        // Schema-valid data may also be answered 422 here: schemathesis sends a handful of Idempotency-Keys
        // ("0", "00"…) with many different bodies, and a key reused with another body is 422 by design.
        try """
            [checks.positive_data_acceptance]
            expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
            """.write(toFile: dir + "/schemathesis.toml", atomically: true, encoding: .utf8)
        // Every check but use_after_free: a cancelled notification is still there (DELETE ends it
        // with the outcome `cancelled`, which GET answers: every notification ends in one recorded
        // outcome), so "deleted, then still found" is this API's design, not a fault.
        let command = "cd \"$0\" && \"$1\" --config-file schemathesis.toml run http://127.0.0.1:\(port)/openapi.yaml -H 'Authorization: Bearer a-test-token-0123456789abcdef' --checks all --exclude-checks use_after_free -n 50 --generation-deterministic --no-color"
        let (status, out, err) = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", command, dir, st])
        #expect(status == 0, "schemathesis: \(out.suffix(3000)) \(err.suffix(1000))")
        #expect(out.contains("No issues found"), "\(out.suffix(2000))")
        await #expect(try get("/healthz").contains("ok"))
    }

    @Test("/readyz follows the transport: 200 while the gateway has not failed, 503 naming the endpoint once every connection attempt fails, and the request still ends with one outcome")
    func readinessFollowsTheTransport() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = try freePort()
        let certs = sharedCertificates
        try "a-test-token-0123456789abcdef\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try """
        {"serve":{"apiTokensFile":"api-tokens"},"outcomes":"outcomes.jsonl",
         "transport":{"type":"gateway","host":"127.0.0.1","port":\(port),"serverName":"localhost","certificate":"\(certs.clientCertificate)",
                      "key":"\(certs.clientKey)","caFile":"\(certs.caCertificate)","maxOutageSeconds":4,"backoffInitialMilliseconds":50,"backoffMaxMilliseconds":200}}
        """.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "error"])
        let script = """
            import json, sys, time, urllib.request, urllib.error
            base = "http://127.0.0.1:%s" % sys.argv[1]
            def get(path):
                try:
                    with urllib.request.urlopen(base + path) as r: return r.status, json.loads(r.read())
                except urllib.error.HTTPError as e: return e.code, json.loads(e.read())
            first = get("/readyz")
            body = json.dumps({"id": 1, "token": "ab" * 32, "alert": "hi"}).encode()
            req = urllib.request.Request(base + "/v1/notifications", data=body, headers={"Authorization": "Bearer a-test-token-0123456789abcdef"})
            posted = urllib.request.urlopen(req).status
            later = get("/readyz")
            deadline = time.time() + 15
            while later[0] == 200 and time.time() < deadline:
                time.sleep(0.1)
                later = get("/readyz")
            print(json.dumps({"first": first[0], "posted": posted, "later": later[0], "reason": later[1].get("reason", "")}))
            """
        let out = try await runCommand(try await interopPython(), ["-c", script, String(server.ready["port"] as! Int)])
        let r = try #require(try JSONSerialization.jsonObject(with: Data((out.split(separator: "\n").last ?? "").utf8)) as? [String: Any])
        let summary = (await server.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        #expect(r["first"] as? Int == 200 && r["posted"] as? Int == 202, "\(r)")
        #expect(r["later"] as? Int == 503 && (r["reason"] as? String ?? "").contains("127.0.0.1:\(port)"), "\(r)")
        #expect(summary["entered"] as? Int == 1 && summary["failed"] as? Int == 1 && summary["balanced"] as? Bool == true, "\(summary)")
    }
}
