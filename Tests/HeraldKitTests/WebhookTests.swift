import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The device token serve_client.py sends for caller id `k`.
private func clientToken(_ k: Int) -> String {
    let n = (UInt64(k) * 2_654_435_761 + 1)
    let hex = String(n, radix: 16)
    return String(repeating: "0", count: 64 - hex.count) + hex
}

private let webhookToken = "webhook-secret-0123456789"

/// `herald serve` on the simulator with `invalid` tokens and a webhook to `url`.
private func startServe(in dir: String, url: String, invalid: [Int], webhook extra: String) async throws -> ExternalServer {
    try "a-test-token-0123456789abcdef\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
    try "\(webhookToken)\n".write(toFile: dir + "/webhook-token", atomically: true, encoding: .utf8)
    let tokens = invalid.map { "\"\(clientToken($0))\"" }.joined(separator: ",")
    try """
    {"serve":{"apiTokensFile":"api-tokens"},"transport":{"type":"simulator","invalidTokens":[\(tokens)]},
     "outcomes":{"path":"outcomes.jsonl","webhook":{"url":"\(url)","tokenFile":"webhook-token","batch":16,"flushMilliseconds":100\(extra)}}}
    """.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
    return try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "error"])
}

/// Posts `count` requests with serve_client.py; the service's metrics once every outcome is decided.
@discardableResult
private func post(port: Int, dir: String, count: Int) async throws -> [String: Double] {
    let report = try await runServeClient(port: port, tokenFile: dir + "/api-tokens", ["--count", String(count), "--batch", "500"])
    return report["metrics"] as? [String: Double] ?? [:]
}

private func jsonLines(_ path: String) throws -> [[String: Any]] {
    try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map {
        try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
    }
}

@Suite(
    "herald serve's outcome webhook against a receiver written outside the project (Python http.server)",
    .serialized, .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct WebhookTests {
    @Test("dead tokens reach the receiver in batches with the bearer token; a 503, a lost answer and a 500 are retried; each batch is taken once (Idempotency-Key), every rejected outcome arrives, nothing else; the summary counts them")
    func retriesUntilDelivered() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let python = try await interopPython()
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/webhook_receiver.py").path
        let receiver = try await ExternalServer.start(python, [script, "--token", webhookToken, "--out", dir + "/received.jsonl", "--plan", "503,drop,500"])
        let invalid = Array(stride(from: 7, to: 3000, by: 50))
        let serve = try await startServe(in: dir, url: "http://127.0.0.1:\(receiver.ready["port"] as! Int)/hooks/herald", invalid: invalid, webhook: "")
        let servePort = serve.ready["port"] as! Int
        let metrics = try await post(port: servePort, dir: dir, count: 3000)
        // The client stops once herald_outcomes_total counts every request; the per-reason counter is
        // incremented just after it, so a loaded machine can scrape between the two: read it again.
        var rejected = metrics["herald_outcome_reasons_total{outcome=rejected}{reason=8 invalid token}"]
        let clock = ContinuousClock(), by = clock.now + .seconds(5)
        while rejected != Double(invalid.count) && clock.now < by {
            try await Task.sleep(for: .milliseconds(100))
            let scrape = try await rawHTTP(
                port: servePort, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer a-test-token-0123456789abcdef\r\nConnection: close\r\n\r\n")
            let line = scrape.body.split(separator: "\n").first {
                $0.hasPrefix("herald_outcome_reasons_total{") && $0.contains(#"outcome="rejected""#) && $0.contains(#"reason="8 invalid token""#)
            }
            rejected = line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        }
        #expect(rejected == Double(invalid.count), "\(String(describing: rejected)); \(metrics.keys.filter { $0.contains("reason") })")
        let summary = (await serve.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        let counts = await receiver.stop(interrupt: true)
        #expect(counts["unauthorized"] as? Int == 0 && counts["malformed"] as? Int == 0, "\(counts)")

        let received = try jsonLines(dir + "/received.jsonl")
        #expect(received.prefix(3).map { "\($0["answer"]!)" } == ["503", "drop", "500"])
        let taken = received.filter { $0["answer"] as? Int == 200 }
        let keys = taken.compactMap { $0["key"] as? String }
        #expect(Set(keys).count == taken.count, "no batch taken twice")
        #expect(Set(received.prefix(3).compactMap { $0["key"] as? String }).isSubset(of: Set(keys)), "the refused and unanswered batches came again and were taken")
        var delivered: [Int: [String: Any]] = [:]
        for batch in taken {
            #expect(batch["batch"] as? String == batch["key"] as? String)
            for item in batch["outcomes"] as? [[String: Any]] ?? [] {
                let outcome = item["outcome"] as? [String: Any] ?? [:]
                #expect(delivered[outcome["id"] as? Int ?? -1] == nil, "outcome \(item) delivered twice")
                delivered[outcome["id"] as? Int ?? -1] = outcome
            }
        }
        #expect(Set(delivered.keys) == Set(invalid), "every rejected outcome, and only those")
        #expect(delivered.values.allSatisfy { $0["outcome"] as? String == "rejected" && $0["status"] as? Int == 8 })
        #expect(delivered[7]?["token"] as? String == clientToken(7), "the full token, for the caller's clean-up")
        let rejectedInFile = try jsonLines(dir + "/outcomes.jsonl").filter { $0["outcome"] as? String == "rejected" }.count
        #expect(rejectedInFile == invalid.count)
        let webhook = summary["webhook"] as? [String: Any] ?? [:]
        #expect(webhook["delivered"] as? Int == invalid.count && webhook["undelivered"] as? Int == 0, "\(summary)")
        #expect(summary["balanced"] as? Bool == true)
    }

    @Test("over HTTPS (Python ssl): delivered when the receiver's certificate chains to caFile and names the host; without caFile the certificate is refused and nothing is posted")
    func https() async throws {
        let certs = sharedCertificates
        let python = try await interopPython()
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/webhook_receiver.py").path
        for trusted in [true, false] {
            let dir = temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let receiver = try await ExternalServer.start(python, [
                script, "--token", webhookToken, "--out", dir + "/received.jsonl", "--tls-cert", certs.serverCertificate, "--tls-key", certs.serverKey,
            ])
            let url = "https://localhost:\(receiver.ready["port"] as! Int)/hook"
            let extra = (trusted ? #","caFile":"\#(certs.caCertificate)""# : "") + #","attempts":2,"drainSeconds":3"#
            let serve = try await startServe(in: dir, url: url, invalid: [1, 2], webhook: extra)
            try await post(port: serve.ready["port"] as! Int, dir: dir, count: 10)
            let webhook = ((await serve.stop(interrupt: true)["summary"] as? [String: Any])?["webhook"] as? [String: Any]) ?? [:]
            await receiver.stop(interrupt: true)
            let received = (try? jsonLines(dir + "/received.jsonl")) ?? []
            if trusted {
                #expect(webhook["delivered"] as? Int == 2 && received.count == 1, "\(webhook)")
            } else {
                #expect(webhook["delivered"] as? Int == 0 && webhook["undelivered"] as? Int == 2 && received.isEmpty, "\(webhook)")
            }
        }
    }

    @Test("a receiver that never answers: the service still drains and exits 0 within its drain time, and counts the outcomes it could not post")
    func receiverDown() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = try freePort()
        #expect(port > 0)

        let invalid = [3, 11, 19]
        let serve = try await startServe(in: dir, url: "http://127.0.0.1:\(port)/", invalid: invalid, webhook: #","attempts":50,"drainSeconds":2"#)
        try await post(port: serve.ready["port"] as! Int, dir: dir, count: 100)
        let started = ContinuousClock.now
        let summary = (await serve.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        #expect(ContinuousClock.now - started < .seconds(20), "the drain time bounds the shutdown")
        let webhook = summary["webhook"] as? [String: Any] ?? [:]
        #expect(webhook["delivered"] as? Int == 0 && webhook["undelivered"] as? Int == invalid.count, "\(summary)")
        #expect(summary["entered"] as? Int == 100 && summary["balanced"] as? Bool == true)
    }
}
