import Foundation
import HeraldTestSupport
import Testing

/// Issue 31: one notification followed from the caller's HTTP request, through a queue row, to
/// the worker that sends it and APNs' answer, as spans exported over OTLP/HTTP (protobuf) by
/// swift-otel (the HTTP requests') and Herald's own writer (the notifications'), and decoded by
/// OpenTelemetry's own messages (`Tests/Interop/otlp_receiver.py`).
@Suite(
    "Traces across herald serve, the queue and herald work, exported over OTLP",
    .serialized, .enabled(if: PostgresCluster.binaries != nil && interopVenvPossible, Comment(rawValue: PostgresCluster.absent)))
struct TracingTests {
    /// A span as the receiver wrote it.
    struct Span {
        let traceID, spanID, parentID, name, service, scope: String
        let kind, status: Int
        let start, end: UInt64
        let attributes: [String: Any]
        init(_ o: [String: Any]) {
            traceID = o["trace_id"] as? String ?? ""
            spanID = o["span_id"] as? String ?? ""
            parentID = o["parent_span_id"] as? String ?? ""
            name = o["name"] as? String ?? ""
            service = o["service"] as? String ?? ""
            scope = o["scope"] as? String ?? ""
            kind = o["kind"] as? Int ?? -1
            status = o["status"] as? Int ?? -1
            start = (o["start"] as? NSNumber)?.uint64Value ?? 0
            end = (o["end"] as? NSNumber)?.uint64Value ?? 0
            attributes = o["attributes"] as? [String: Any] ?? [:]
        }
    }

    static let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpan = "00f067aa0ba902b7"
    static let ownTrace = "0af7651916cd43dd8448eb211c80319c"

    @Test("herald serve taking requests into the queue (serve.worker false) and herald work sending them: a POST with a traceparent makes one trace under the caller's id: the POST's server span, the queue wait and the worker's send (a span per stage, APNs' answer) under it; a request's own traceparent starts its spans in its own trace; both processes export by OTLP/HTTP")
    func acrossTheQueue() async throws {
        let (cluster, db) = try await freshDatabase()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let python = try await interopPython()
        let receiver = try await ExternalServer.start(python, [
            repositoryRoot().appendingPathComponent("Tests/Interop/otlp_receiver.py").path, dir + "/spans.jsonl",
        ])
        defer { receiver.stopInBackground(interrupt: true) }
        let otlp = "http://127.0.0.1:\(receiver.ready["port"] as! Int)"
        func tracing(_ service: String) -> [String: String] {
            ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "200"]
        }
        try "a-test-token-0123456789abcdef\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens","worker":false},"transport":{"type":"simulator"},
         "queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","poll":0.1}}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(
            try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"],
            environment: tracing("herald-api"))
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int
        let token = String(repeating: "ab", count: 32)
        // Two requests in one POST under the caller's trace; the second names a trace of its own.
        let body = #"{"token":"\#(token)","alert":"traced","topic":"com.example","id":1}"# + "\n"
            + #"{"token":"\#(token)","alert":"its own","topic":"com.example","id":2,"traceparent":"00-\#(Self.ownTrace)-b7ad6b7169203331-01"}"# + "\n"
        let posted = try await runCommand(python, [
            "-c",
            """
            import sys, urllib.request
            r = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST", headers={
                "Authorization": "Bearer a-test-token-0123456789abcdef", "Content-Type": "application/x-ndjson",
                "traceparent": "00-\(Self.callerTrace)-\(Self.callerSpan)-01"})
            print(urllib.request.urlopen(r).read().decode())
            """,
            "http://127.0.0.1:\(port)/v1/notifications", body,
        ])
        #expect(posted.contains(#""accepted":2"#), "\(posted)")
        // The service only queues: the rows wait for a worker.
        try await Task.sleep(for: .milliseconds(300))
        await #expect(try tally(cluster, db) == ["queued|-": 2])
        let work = try await runHerald(
            ["work", "--config", dir + "/serve.json", "--drain", "--log-level", "warning"], timeout: 120, environment: tracing("herald-worker"))
        #expect(work.status == 0, "\(work.stderr)")
        await #expect(try tally(cluster, db) == ["done|accepted": 2])
        await server.stop(interrupt: true)
        await receiver.stop(interrupt: true)

        let spans = try String(contentsOfFile: dir + "/spans.jsonl", encoding: .utf8).split(separator: "\n").map { line in
            Span(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:])
        }
        let caller = spans.filter { $0.traceID == Self.callerTrace }
        let names = caller.map(\.name).sorted()
        // The POST, then for request 1: its queue wait and its send with a span per stage and APNs' answer.
        let post = try #require(caller.first { $0.name == "/v1/notifications" }, "\(names)")
        #expect(post.service == "herald-api" && post.parentID == Self.callerSpan && post.kind == 2, "the POST's span is the caller's child, a server span")
        #expect(post.attributes["http.response.status_code"] as? Int == 202)
        let waits = caller.filter { $0.name == "herald.queue.wait" }, sends = caller.filter { $0.name == "herald.send" }
        #expect(waits.count == 1 && sends.count == 1, "one notification in the caller's trace: \(names)")
        let wait = try #require(waits.first), send = try #require(sends.first)
        #expect(wait.service == "herald-worker" && send.service == "herald-worker", "the worker continues the trace the row carries")
        #expect(wait.scope == "herald" && send.scope == "herald", "the notifications' spans written by Herald's own OTLP exporter")
        #expect(wait.parentID == post.spanID && send.parentID == post.spanID)
        #expect(send.attributes["herald.request.id"] as? Int == 1 && send.attributes["herald.outcome"] as? String == "accepted" && send.status == 1)
        // The wait runs from the POST's queueing to the worker's taking it: after the POST began, before the send began.
        #expect(wait.start >= post.start - 1_000_000 && wait.end <= send.start + 1_000_000 && wait.end > wait.start)
        let children = caller.filter { $0.parentID == send.spanID }
        let stages = children.filter { $0.name != "apns.request" }.map { $0.name.replacingOccurrences(of: "herald.", with: "") }
        // Spans for the stages that do work (localization, the payload), none for the in-memory checks and framing.
        #expect(stages == ["localize", "payload"], "\(stages)")
        for stage in children where stage.name != "apns.request" {
            #expect(stage.name.hasPrefix("herald.") && stage.start >= send.start && stage.end <= send.end)
        }
        let answer = try #require(children.first { $0.name == "apns.request" }, "\(names)")
        #expect(answer.kind == 3 && answer.status == 1 && answer.end <= send.end && answer.start >= send.start)
        #expect(Set(caller.map(\.traceID)).count == 1 && caller.count == 3 + children.count, "nothing else in the caller's trace: \(names)")

        // The second request's own trace: its queue wait and send are children of its own parent span.
        let own = spans.filter { $0.traceID == Self.ownTrace }
        let ownSend = try #require(own.first { $0.name == "herald.send" }, "\(own.map(\.name))")
        #expect(ownSend.parentID == "b7ad6b7169203331" && ownSend.attributes["herald.request.id"] as? Int == 2)
        #expect(own.contains { $0.name == "herald.queue.wait" && $0.parentID == "b7ad6b7169203331" })
    }
}
