import Foundation
import HeraldTestSupport
import Testing

@Suite(
    "herald serve with the PostgreSQL queue as its intake",
    .serialized, .enabled(if: PostgresCluster.binaries != nil && interopVenvPossible, Comment(rawValue: PostgresCluster.absent)))
struct ServeQueueTests {
    @Test("5,000 notifications POSTed by a Python client become rows (ids are the rows'), the service's own worker sends them, GET reads the row, the webhook names them by row; SIGINT drains; every row done once")
    func postIntoTheQueue() async throws {
        let (cluster, db) = try await freshDatabase()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let python = try await interopPython()
        let receiver = try await ExternalServer.start(python, [
            repositoryRoot().appendingPathComponent("Tests/Interop/webhook_receiver.py").path, "--token", "hook-token-0123456789", "--out", dir + "/received.jsonl",
        ])
        try "hook-token-0123456789\n".write(toFile: dir + "/hook-token", atomically: true, encoding: .utf8)
        try "a-test-token-0123456789abcdef\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens"},"transport":{"type":"simulator"},"tokens":{"type":"postgres"},
         "outcomes":{"webhook":{"url":"http://127.0.0.1:\#(receiver.ready["port"] as! Int)/","tokenFile":"hook-token","kinds":["accepted"],"batch":1000,"flushMilliseconds":50}},
         "queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","poll":0.1}}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
        let port = server.ready["port"] as! Int
        let report = try await runServeClient(port: port, tokenFile: dir + "/api-tokens", ["--count", "5000", "--batch", "500"])
        let ids = (report["ids"] as? [String: Int] ?? [:]).values.sorted()
        #expect(report["accepted"] as? Int == 5000 && ids.count == 5000, "\(report["statuses"] ?? "")")
        // The ids are the rows': GET reads the row back.
        let get = try await runCommand(python, [
            "-c",
            "import sys, urllib.request; r = urllib.request.Request(sys.argv[1], headers={'Authorization': 'Bearer a-test-token-0123456789abcdef'}); print(urllib.request.urlopen(r).read().decode())",
            "http://127.0.0.1:\(port)/v1/notifications/\(ids[17])",
        ])
        #expect(get.contains(#""state":"decided""#) && get.contains(#""outcome":"accepted""#), "\(get)")
        let summary = (await server.stop(interrupt: true)["summary"] as? [String: Any]) ?? [:]
        #expect(summary["entered"] as? Int == 5000 && summary["balanced"] as? Bool == true && summary["token_changes_not_written"] as? Int == 0, "\(summary)")
        await #expect(try tally(cluster, db) == ["done|accepted": 5000])
        await #expect(try cluster.psql(db, "SELECT min(id) || '-' || max(id) FROM notifications") == "\(ids.first!)-\(ids.last!)")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1") == "0")
        await receiver.stop(interrupt: true)
        var named: [Int] = []
        for line in try String(contentsOfFile: dir + "/received.jsonl", encoding: .utf8).split(separator: "\n") {
            let batch = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            named += (batch["outcomes"] as? [[String: Any]] ?? []).compactMap { $0["notification"] as? Int }
        }
        #expect(named.sorted() == ids, "the webhook names each notification by its row, as POST did")
    }
}
