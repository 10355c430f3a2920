import Foundation
import HeraldTestSupport
import Testing

/// Issue 34: `Idempotency-Key` with the PostgreSQL queue: the key lives in
/// the database with the rows it made, so a retry is answered the same
/// across a restart and by another `herald serve` on the same queue.
@Suite(
    "herald serve: Idempotency-Key kept in the queue's database",
    .serialized, .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct IdempotencyQueueTests {
    static let token = "a-test-token-0123456789abcdef"

    static func post(_ port: Int, _ body: String, key: String) async throws -> RawExchange {
        try await rawHTTP(port: port, """
            POST /v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer \(token)\r\n\
            Idempotency-Key: \(key)\r\nContent-Type: application/x-ndjson\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)
            """, timeout: 30)
    }

    static func batch(_ ids: Range<Int>) -> String {
        ids.map { #"{"id":\#($0),"token":"\#(String(repeating: "ab", count: 32))","alert":"n"}"# + "\n" }.joined()
    }

    static func replayed(_ e: RawExchange) -> Bool {
        e.text.lowercased().components(separatedBy: "\r\n\r\n").first?.contains("\r\nidempotent-replayed: true") == true
    }

    @Test("a POST replayed after a restart, and to a second service on the same queue, gets the same rows and inserts none; another body: 422; one new key sent to both services at once: one batch of rows; every row sent once")
    func acrossRestartAndWorkers() async throws {
        let (cluster, db) = try await freshDatabase()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "\(Self.token)\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens"},"transport":{"type":"simulator"},
         "queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","poll":0.1}}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        func start() async throws -> (ExternalServer, Int) {
            let s = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
            return (s, s.ready["port"] as! Int)
        }

        var (a, portA) = try await start()
        let first = try await Self.post(portA, Self.batch(0..<1000), key: "k-1")
        #expect(first.status == 202 && !Self.replayed(first), "\(first.text.prefix(300))")
        let summaryA = (await a.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        #expect(summaryA["balanced"] as? Bool == true, "\(summaryA)")

        // Restarted: the retry gets the first answer; nothing new is inserted.
        (a, portA) = try await start()
        let afterRestart = try await Self.post(portA, Self.batch(0..<1000), key: "k-1")
        #expect(afterRestart.status == 202 && Self.replayed(afterRestart) && afterRestart.body == first.body, "\(afterRestart.text.prefix(300))")
        // A second service on the same queue: the same.
        let (b, portB) = try await start()
        let atB = try await Self.post(portB, Self.batch(0..<1000), key: "k-1")
        #expect(atB.status == 202 && Self.replayed(atB) && atB.body == first.body, "\(atB.text.prefix(300))")
        let other = try await Self.post(portB, Self.batch(0..<999), key: "k-1")
        #expect(other.status == 422, "\(other.text.prefix(300))")

        // One new key sent to both at once: one of them inserts, the other waits for its transaction and replays.
        async let toA = Self.post(portA, Self.batch(1000..<3000), key: "k-2")
        async let toB = Self.post(portB, Self.batch(1000..<3000), key: "k-2")
        let (ra, rb) = try await (toA, toB)
        #expect(ra.status == 202 && rb.status == 202 && ra.body == rb.body, "\(ra.text.prefix(200)) / \(rb.text.prefix(200))")
        #expect(Self.replayed(ra) != Self.replayed(rb), "exactly one of the two was replayed")

        // Both drain; every row is done, once.
        var waited = 0
        while try await tally(cluster, db) != ["done|accepted": 3000], waited < 300 {
            try await Task.sleep(for: .milliseconds(100))
            waited += 1
        }
        await a.stop(interrupt: true)
        await b.stop(interrupt: true)
        await #expect(try tally(cluster, db) == ["done|accepted": 3000])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM notifications") == "3000")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1") == "0")
        await #expect(try cluster.psql(db, "SELECT string_agg(key || ':' || cardinality(ids), ',' ORDER BY key) FROM herald_idempotency") == "k-1:1000,k-2:2000")
    }
}
