import Foundation
import HeraldTestSupport
import Testing

/// Issue 34: `Idempotency-Key` on `POST /v1/notifications`, without the
/// queue (keys in memory), over raw sockets. The PostgreSQL side (across a
/// restart and across two services) is `IdempotencyQueueTests`.
@Suite("herald serve: Idempotency-Key in memory", .serialized)
struct IdempotencyTests {
    static let token = "a-test-token-0123456789abcdef"

    static func post(_ port: Int, _ body: String, key: String?) async throws -> RawExchange {
        var head = "POST /v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer \(token)\r\n"
        if let key { head += "Idempotency-Key: \(key)\r\n" }
        head += "Content-Type: application/x-ndjson\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        return try await rawHTTP(port: port, head + body)
    }

    static func batch(_ ids: Range<Int>) -> String {
        ids.map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n"}"# + "\n" }.joined()
    }

    static func replayed(_ e: RawExchange) -> Bool {
        e.text.lowercased().components(separatedBy: "\r\n\r\n").first?.contains("\r\nidempotent-replayed: true") == true
    }

    @Test("a retried POST (same key, same body) gets the same numbers, marked Idempotent-Replayed, and nothing is sent twice; another body under the key: 422; a bad key: 400; a batch refused (413) leaves its key free for the retry")
    func memory() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "\(Self.token)\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"{"serve":{"apiTokensFile":"api-tokens","queue":2000},"transport":{"type":"simulator"},"outcomes":"outcomes.jsonl"}"#
            .write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
        let port = server.ready["port"] as! Int

        let first = try await Self.post(port, Self.batch(0..<500), key: "batch-1")
        #expect(first.status == 202 && !Self.replayed(first), "\(first.text.prefix(300))")
        for _ in 0..<3 {
            let again = try await Self.post(port, Self.batch(0..<500), key: "batch-1")
            #expect(again.status == 202 && Self.replayed(again) && again.body == first.body, "\(again.text.prefix(300))")
        }
        // The draft's quoted form names the same key.
        let quoted = try await Self.post(port, Self.batch(0..<500), key: "\"batch-1\"")
        #expect(quoted.status == 202 && quoted.body == first.body)
        let other = try await Self.post(port, Self.batch(0..<501), key: "batch-1")
        #expect(other.status == 422 && other.body.contains("used with another body"), "\(other.text)")
        let bad = try await Self.post(port, Self.batch(0..<1), key: "two words")
        #expect(bad.status == 400 && bad.body.contains("Idempotency-Key"), "\(bad.text)")
        // Without a key the same body is a new batch.
        let unkeyed = try await Self.post(port, Self.batch(500..<510), key: nil)
        #expect(unkeyed.status == 202)
        // Too large for the queue (2,000): 413, and the key stays free; the retry, split, is taken.
        let tooLarge = try await Self.post(port, Self.batch(1000..<3001), key: "batch-2")
        #expect(tooLarge.status == 413)
        let split = try await Self.post(port, Self.batch(1000..<1100), key: "batch-2")
        #expect(split.status == 202 && !Self.replayed(split), "\(split.text.prefix(300))")

        let summary = (await server.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        #expect(summary["entered"] as? Int == 610 && summary["balanced"] as? Bool == true, "\(summary)")
        var perID: [Int: Int] = [:]
        for line in try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n") {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            perID[o["id"] as? Int ?? -1, default: 0] += 1
        }
        #expect(perID.count == 610 && perID.values.allSatisfy { $0 == 1 }, "each notification once: \(perID.count) ids, \(perID.values.filter { $0 != 1 }.count) more than once")
    }
}
