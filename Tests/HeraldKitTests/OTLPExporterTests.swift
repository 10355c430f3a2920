import Foundation
import HeraldClient
import HeraldCore
import HeraldTestSupport
@testable import HeraldTracing
import Logging
import NIOCore
import OTel
import ServiceLifecycle
import Synchronization
import Testing
import Tracing

/// Issue 31: Herald's own OTLP writer for notification spans. The wire bytes are checked twice:
/// byte-exact vectors of the protobuf writer, and whole exports decoded by OpenTelemetry's own
/// Python messages (`Tests/Interop/otlp_receiver.py`, `opentelemetry-proto`), which also plays a
/// collector that fails, stalls or is not there.
@Suite("Notification spans written straight into OTLP (protobuf), exported over HTTP")
struct OTLPExporterTests {
    // MARK: the protobuf writer, byte for byte

    @Test("protobuf wire vectors: varints (1, 150, 300, 2^63), an int64 of -1 in ten bytes, fixed64 little-endian, a string, a nested message whose length needs two bytes")
    func wireVectors() {
        var w = ProtobufWriter()
        w.uint(1, 150)
        #expect(w.bytes == [0x08, 0x96, 0x01], "protobuf's documented example: field 1 = 150")
        w = ProtobufWriter()
        w.varint(300)
        w.varint(1 << 63)
        #expect(w.bytes == [0xAC, 0x02, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
        w = ProtobufWriter()
        w.int(3, -1)
        #expect(w.bytes == [0x18] + [UInt8](repeating: 0xFF, count: 9) + [0x01])
        w = ProtobufWriter()
        w.fixed64(7, 0x0102_0304_0506_0708)
        #expect(w.bytes == [0x39, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])
        w = ProtobufWriter()
        w.string(2, "testing")
        #expect(w.bytes == [0x12, 0x07] + Array("testing".utf8), "protobuf's documented example: field 2 = \"testing\"")
        w = ProtobufWriter()
        w.message(3) { $0.string(1, String(repeating: "x", count: 200)) }
        // Field 3, length 203 (0xCB 0x01), then field 1, length 200 (0xC8 0x01) and the text.
        #expect(Array(w.bytes.prefix(5)) == [0x1A, 0xCB, 0x01, 0x0A, 0xC8] && w.bytes[5] == 0x01 && w.bytes.count == 3 + 203)
        w = ProtobufWriter()
        w.bigEndian(2, 0x00F0_67AA_0BA9_02B7)
        #expect(w.bytes == [0x12, 0x08, 0x00, 0xF0, 0x67, 0xAA, 0x0B, 0xA9, 0x02, 0xB7])
        w = ProtobufWriter()
        w.attribute(9, "k", true)
        #expect(w.bytes == [0x4A, 0x07, 0x0A, 0x01, 0x6B, 0x12, 0x02, 0x10, 0x01])
    }

    @Test("one span, byte for byte: the request's frame (resource, scope), then the span's ids, name, kind, times, attribute and status")
    func oneSpanVector() {
        var batch = OTLPSpanBatch(resource: [("service.name", "h")], scope: "herald", version: "1", seed: 7)
        let trace = NotificationTrace(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", enqueuedAt: 2)!
        var record = Envelope(sequence: 0, request: NotificationRequest(token: DeviceToken(bytes: [1]))).record(.accepted)
        record.id = nil
        let passage = TraceBook.Passage(trace: trace, lane: .fast, entered: 3_000_000)
        batch.append(record, passage, end: 4_000_000)
        #expect(batch.count == 2, "its queue wait and its send (no stage, no transport)")
        let (buffer, spans) = batch.take()
        let body = Array(buffer.readableBytesView)
        #expect(spans == 2 && batch.count == 0)
        let traceID: [UInt8] = [0x4B, 0xF9, 0x2F, 0x35, 0x77, 0xB3, 0x4D, 0xA6, 0xA3, 0xCE, 0x92, 0x9D, 0x0E, 0x0E, 0x47, 0x36]
        let parent: [UInt8] = [0x00, 0xF0, 0x67, 0xAA, 0x0B, 0xA9, 0x02, 0xB7]
        var ids = OTLPSpanBatch(resource: [], scope: "", version: "", seed: 7)
        let first = ids.nextSpanID(), second = ids.nextSpanID()
        func be(_ v: UInt64) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
        func le(_ v: UInt64) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        let wait: [UInt8] =
            [0x0A, 16] + traceID + [0x12, 8] + be(first) + [0x22, 8] + parent + [0x2A, 17] + Array("herald.queue.wait".utf8)
            + [0x30, 5] + [0x39] + le(2_000_000) + [0x41] + le(3_000_000)
        let kv: (String, String) -> [UInt8] = { k, v in
            [0x4A, UInt8(6 + k.utf8.count + v.utf8.count), 0x0A, UInt8(k.utf8.count)] + Array(k.utf8) + [0x12, UInt8(2 + v.utf8.count), 0x0A, UInt8(v.utf8.count)] + Array(v.utf8)
        }
        let send: [UInt8] =
            [0x0A, 16] + traceID + [0x12, 8] + be(second) + [0x22, 8] + parent + [0x2A, 11] + Array("herald.send".utf8)
            + [0x30, 1] + [0x39] + le(3_000_000) + [0x41] + le(4_000_000)
            + kv("herald.lane", "fast")
            + [0x4A, 21, 0x0A, 15] + Array("herald.sequence".utf8) + [0x12, 2, 0x18, 0]
            + kv("herald.outcome", "accepted")
            + [0x7A, 2, 0x18, 1]
        let resource: [UInt8] = [0x0A, 19, 0x0A, 12] + Array("service.name".utf8) + [0x12, 3, 0x0A, 1, 0x68]
        let scope: [UInt8] = [0x0A, 6] + Array("herald".utf8) + [0x12, 1, 0x31]
        let spansBytes: [UInt8] = [0x12] + varint(wait.count) + wait + [0x12] + varint(send.count) + send
        let scopeSpans: [UInt8] = [0x0A, UInt8(scope.count)] + scope + spansBytes
        let resourceSpans: [UInt8] = [0x0A, UInt8(resource.count)] + resource + [0x12] + varint(scopeSpans.count) + scopeSpans
        let expected: [UInt8] = [0x0A] + varint(resourceSpans.count) + resourceSpans
        #expect(body == expected)
        #expect(first != second && first != 0 && second != 0)
    }

    func varint(_ n: Int) -> [UInt8] {
        var w = ProtobufWriter()
        w.varint(UInt64(n))
        return w.bytes
    }

    // MARK: whole exports, decoded by OpenTelemetry's messages

    /// Accepts every request but those whose id is a multiple of 4: `410 Unregistered`.
    final class Answering: Transport {
        func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
            outcomes.record(batch.map { e in
                e.record(e.request.id! % 4 == 0 ? .rejected(Status(http: 410, reason: "Unregistered")) : .accepted)
            })
        }
        func finish(outcomes: OutcomeLedger) async {}
    }

    struct Mark: EnvelopeStage {
        func apply(_ e: inout Envelope) throws(StageFailure) { e.payload = [0x7B, 0x7D] }
    }

    static let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpan = "00f067aa0ba902b7"

    /// `count` requests through a pipeline whose spans go to `exporter`: the even ones traced under
    /// the caller's trace, sampled unless a multiple of 10, a third of them queued first. The
    /// exporter's encoder takes the passages from `book` (empty once it has written them all).
    func run(_ count: Int, into exporter: OTLPTraceExporter, queuedAt: Int64, book: TraceBook = TraceBook()) async throws -> Duration {
        let ledger = OutcomeLedger(traceBook: book)
        ledger.addObserver(NotificationSpans(book: book, exporter: exporter))
        let requests = (0..<count).map { k -> NotificationRequest in
            var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 1, count: 32)), id: UInt32(k))
            r.aps.alert = Alert(body: "hi")
            if k % 2 == 0 {
                r.trace = NotificationTrace(
                    traceparent: "00-\(Self.callerTrace)-\(Self.callerSpan)-\(k % 10 == 0 ? "00" : "01")", enqueuedAt: k % 3 == 0 ? queuedAt : nil)
            }
            return r
        }
        let pipeline = Pipeline(
            source: InMemorySource(requests), stages: [NamedStage("localize", Mark()), NamedStage("payload", Mark())],
            transport: Answering(), ledger: ledger, options: PipelineOptions(batchSize: 32, threads: 1))
        let started = ContinuousClock.now
        let snapshot = try await pipeline.run()
        #expect(snapshot.isBalanced && snapshot.entered == count)
        return started.duration(to: .now)
    }

    /// The exporter running in a service group until `body` is done, then stopped (exporting what it holds).
    func exporting<T>(_ exporter: OTLPTraceExporter, _ body: () async throws -> T) async throws -> T {
        let group = ServiceGroup(services: [exporter], gracefulShutdownSignals: [], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let task = Task { try await group.run() }
        let result: T
        do { result = try await body() } catch {
            await group.triggerGracefulShutdown()
            _ = try? await task.value
            throw error
        }
        await group.triggerGracefulShutdown()
        try await task.value
        return result
    }

    func receiver(_ dir: String, _ options: [String] = []) async throws -> ExternalServer {
        let python = try await interopPython()
        return try await ExternalServer.start(
            python, [repositoryRoot().appendingPathComponent("Tests/Interop/otlp_receiver.py").path, dir + "/spans.jsonl"] + options)
    }

    /// `body` with a directory of its own, OpenTelemetry's receiver writing the spans it decodes
    /// there (started with `options`) and an exporter to it (``configuration(port:)``, then
    /// `adjust`); the receiver stopped and the directory removed however `body` ends.
    func withReceiver<T>(
        _ options: [String] = [], logger: Logger = Logger(label: "test"), adjust: (inout OTLPExportConfiguration) -> Void = { _ in },
        _ body: (_ dir: String, _ collector: ExternalServer, _ exporter: OTLPTraceExporter) async throws -> T
    ) async throws -> T {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let collector = try await receiver(dir, options)
        defer { collector.stopInBackground(interrupt: true) }
        var c = configuration(port: collector.ready["port"] as! Int)
        adjust(&c)
        return try await body(dir, collector, OTLPTraceExporter(configuration: c, logger: logger))
    }

    func spans(_ dir: String) throws -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: dir + "/spans.jsonl", encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
    }

    func configuration(port: Int) -> OTLPExportConfiguration {
        var c = OTLPExportConfiguration()
        c.endpoint = "http://127.0.0.1:\(port)/v1/traces"
        c.resource = [("service.name", "herald-test"), ("deployment.environment", "test")]
        c.scheduleDelay = .milliseconds(100)
        c.maxBatchSpans = 64
        return c
    }

    @Test("300 requests, the even ones traced (a fifth of those not sampled by the caller): OpenTelemetry's decoder reads every export; each sampled request has its send with a span per stage and apns.request under it, the caller's span as parent, its outcome and a 410's status and reason; the unsampled and untraced have none; span ids unique; the resource and scope named", .enabled(if: interopVenvPossible))
    func decodedByOpenTelemetry() async throws {
        try await withReceiver { dir, collector, exporter in
            let queuedAt = Duration.sinceEpochMilliseconds - 50
            let book = TraceBook()
            _ = try await exporting(exporter) { try await run(300, into: exporter, queuedAt: queuedAt, book: book) }
            #expect(book.inFlight == 0 && book.routesHeld == 0, "every passage taken by the encoder, every route let go")
            await collector.stop(interrupt: true)

            let all = try spans(dir)
            // Sampled: k even and not a multiple of 10: 120 requests, 4 spans each, and a wait for k % 6 == 0 (but not % 10): 40.
            #expect(all.count == 120 * 4 + 40 && exporter.exported == all.count && exporter.dropped == 0, "\(all.count) decoded, \(exporter.exported) exported")
            #expect(Set(all.map { $0["span_id"] as? String ?? "" }).count == all.count, "span ids unique")
            #expect(all.allSatisfy { $0["trace_id"] as? String == Self.callerTrace && $0["service"] as? String == "herald-test" && $0["scope"] as? String == "herald" })
            let sends = all.filter { $0["name"] as? String == "herald.send" }
            #expect(sends.count == 120)
            var ids = Set<Int>()
            for send in sends {
                let attributes = send["attributes"] as? [String: Any] ?? [:]
                let id = try #require(attributes["herald.request.id"] as? Int)
                ids.insert(id)
                #expect(send["parent_span_id"] as? String == Self.callerSpan && send["kind"] as? Int == 1)
                #expect(attributes["herald.lane"] as? String == "fast" && attributes["herald.sequence"] as? Int == id)
                let children = all.filter { $0["parent_span_id"] as? String == send["span_id"] as? String }
                #expect(children.compactMap { $0["name"] as? String }.sorted() == ["apns.request", "herald.localize", "herald.payload"])
                let (start, end) = (send["start"] as? UInt64 ?? 0, send["end"] as? UInt64 ?? 0)
                for child in children {
                    #expect((child["start"] as? UInt64 ?? 0) >= start && (child["end"] as? UInt64 ?? .max) <= end && start > 0)
                    if (child["name"] as? String ?? "").hasPrefix("herald.") {
                        #expect(child["kind"] as? Int == 1 && (child["attributes"] as? [String: Any] ?? [:]).isEmpty, "a stage's span: its name says which")
                    } else {
                        #expect((child["attributes"] as? [String: Any])?["herald.outcome"] == nil, "the outcome's kind is on the send span")
                    }
                }
                let answer = try #require(children.first { $0["name"] as? String == "apns.request" })
                let answered = answer["attributes"] as? [String: Any] ?? [:]
                #expect(answer["kind"] as? Int == 3)
                if id % 4 == 0 {
                    #expect(answer["status"] as? Int == 2 && send["status"] as? Int == 2 && attributes["herald.outcome"] as? String == "rejected")
                    #expect(answered["apns.status"] as? Int == 410 && answered["apns.reason"] as? String == "Unregistered")
                    #expect((answer["status_message"] as? String ?? "").contains("Unregistered"))
                } else {
                    #expect(answer["status"] as? Int == 1 && attributes["herald.outcome"] as? String == "accepted")
                }
            }
            #expect(ids == Set((0..<300).filter { $0 % 2 == 0 && $0 % 10 != 0 }), "the sampled requests, each once")
            let waits = all.filter { $0["name"] as? String == "herald.queue.wait" }
            #expect(waits.count == 40)
            for wait in waits {
                #expect(wait["kind"] as? Int == 5 && wait["start"] as? UInt64 == UInt64(queuedAt) * 1_000_000 && wait["parent_span_id"] as? String == Self.callerSpan)
            }
        }
    }

    @Test("HeraldClient traced: a batch sent inside the app's span (swift-otel's tracer) joins its trace: each notification's wait in the client, send, stages and APNs' answer, written by Herald's exporter under that span; a send outside any span makes none", .enabled(if: interopVenvPossible))
    func clientInsideAppSpan() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let collector = try await receiver(dir)
        defer { collector.stopInBackground(interrupt: true) }
        let port = collector.ready["port"] as! Int
        let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        // The app's tracing, as an app sets it up: swift-otel, W3C propagation.
        var otel = OTel.Configuration.default
        otel.serviceName = "app"
        otel.logs.enabled = false
        otel.metrics.enabled = false
        otel.traces.enabled = true
        otel.traces.sampler = .alwaysOn
        otel.traces.otlpExporter.protocol = .httpProtobuf
        otel.traces.otlpExporter.endpoint = "http://127.0.0.1:\(port)/v1/traces"
        otel.diagnosticLogger = .custom(quiet)
        let backend = try OTel.makeTracingBackend(configuration: otel)
        let tracer = backend.factory
        let exporter = OTLPTraceExporter(configuration: configuration(port: port), logger: quiet)
        let client = try HeraldClient(
            assembly: HeraldAssembly(), transport: Answering(), tracing: ClientTracing(tracer: tracer, exporter: exporter))
        // Started in this order, stopped in the other: the client drains, then the exporter sends.
        let group = ServiceGroup(services: [backend.service, exporter, client], gracefulShutdownSignals: [], logger: quiet)
        let running = Task { try await group.run() }
        func request(_ id: UInt32) -> NotificationRequest {
            // A token each: a 410 makes the token store suppress later sends to its token.
            var r = NotificationRequest(token: DeviceToken(bytes: [UInt8(id)] + [UInt8](repeating: 2, count: 31)), id: id)
            r.aps.alert = Alert(body: "order \(id)")
            return r
        }
        let span = tracer.startSpan("app.order", context: .topLevel)
        let caller = try #require(NotificationTrace.current(in: span.context, tracer: tracer), "swift-otel's span as a traceparent")
        let inside = try await ServiceContext.withValue(span.context) { try await client.send((0..<5).map { request($0) }) }
        span.end()
        let outside = try await client.send(request(101))
        #expect(inside.count == 5 && outside.isAccepted && inside[0].kind == .rejected, "\(inside.map(\.outcome)) \(outside.outcome)")
        await group.triggerGracefulShutdown()
        try await running.value
        await collector.stop(interrupt: true)

        let all = try spans(dir)
        let ours = all.filter { $0["scope"] as? String == "herald" }
        #expect(ours.allSatisfy { $0["trace_id"] as? String == caller.traceID }, "every notification span in the app's trace")
        let sends = ours.filter { $0["name"] as? String == "herald.send" }
        let ids = sends.compactMap { ($0["attributes"] as? [String: Any])?["herald.request.id"] as? Int }
        #expect(ids.sorted() == [0, 1, 2, 3, 4], "the five sent inside the span, not the one outside: \(ids)")
        for send in sends {
            #expect(send["parent_span_id"] as? String == caller.parentID)
            let children = ours.filter { $0["parent_span_id"] as? String == send["span_id"] as? String }.compactMap { $0["name"] as? String }
            #expect(children.contains("apns.request") && children.contains("herald.localize") && children.contains("herald.payload"), "\(children)")
        }
        let waits = ours.filter { $0["name"] as? String == "herald.queue.wait" }
        #expect(waits.count == 5 && waits.allSatisfy { $0["parent_span_id"] as? String == caller.parentID }, "each one's wait in the client")
        #expect(exporter.dropped == 0 && exporter.exported == ours.count)
    }

    @Test("a collector answering 503 to its first two exports: they are retried and every span arrives, none dropped", .enabled(if: interopVenvPossible))
    func retriedAfter503() async throws {
        try await withReceiver(["--fail-first", "2"]) { dir, collector, exporter in
            let book = TraceBook()
            _ = try await exporting(exporter) { try await run(100, into: exporter, queuedAt: Duration.sinceEpochMilliseconds, book: book) }
            #expect(book.inFlight == 0)
            await collector.stop(interrupt: true)
            let all = try spans(dir)
            // k even, not % 10: 40 requests × 4 spans, and waits for k % 6 == 0 (not % 10): 0, 6, … 96 less 0, 30, 60, 90: 13.
            #expect(all.count == 40 * 4 + 13 && exporter.exported == all.count && exporter.dropped == 0, "\(all.count) decoded, \(exporter.dropped) dropped")
        }
    }

    @Test("an idle encoder sleeps until outcomes come: after a burst it parks (no batch open), the next burst wakes it and is exported in full, twice over", .enabled(if: interopVenvPossible))
    func parksWhenIdle() async throws {
        try await withReceiver { dir, collector, exporter in
            let book = TraceBook()
            // 100 requests: 40 sampled × 4 spans and 13 waits (as retriedAfter503 counts them).
            let perBurst = 40 * 4 + 13
            try await exporting(exporter) {
                for burst in 1...3 {
                    _ = try await run(100, into: exporter, queuedAt: Duration.sinceEpochMilliseconds, book: book)
                    let deadline = ContinuousClock.now.advanced(by: .seconds(20))
                    while exporter.exported < burst * perBurst || !exporter.state.withLock({ $0.encoderParked }) {
                        guard ContinuousClock.now < deadline else { break }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    #expect(exporter.exported == burst * perBurst, "burst \(burst): \(exporter.exported) exported")
                    #expect(exporter.state.withLock { $0.encoderParked }, "burst \(burst): the encoder parked once idle")
                }
            }
            #expect(book.inFlight == 0 && exporter.dropped == 0)
            await collector.stop(interrupt: true)
            #expect(try spans(dir).count == 3 * perBurst)
        }
    }

    // Wall-clock bounds (the pipeline not held, a prompt end): run apart by .ci/run, after the
    // parallel run (`HERALD_TIMING_APART=1` skips them there: under its load 300 requests took 40 s).
    @Test("no collector (nothing listens on the port): the pipeline is not held, every span is counted dropped once the export time is over, nothing is exported",
        .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func noCollector() async throws {
        // A port that was free a moment ago, now closed.
        let port = try freePort()
        var c = configuration(port: port)
        c.exportTimeout = .milliseconds(800)
        c.maxBatchSpans = 1000
        let exporter = OTLPTraceExporter(configuration: c, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let took = try await exporting(exporter) { try await run(300, into: exporter, queuedAt: Duration.sinceEpochMilliseconds) }
        #expect(took < .seconds(5), "the pipeline ran at its own pace: \(took)")
        #expect(exporter.exported == 0 && exporter.dropped == 120 * 4 + 40)
    }

    @Test("the exporter's task cancelled (its group going down at once) with spans held and no collector: it ends at once, every span counted dropped",
        .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func cancelled() async throws {
        var c = configuration(port: try freePort())
        c.scheduleDelay = .seconds(60)
        let exporter = OTLPTraceExporter(configuration: c, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let task = Task { try await exporter.run() }
        let book = TraceBook()
        _ = try await run(100, into: exporter, queuedAt: Duration.sinceEpochMilliseconds, book: book)
        let start = ContinuousClock.now
        task.cancel()
        try await task.value
        #expect(book.inFlight == 0, "what was handed over was taken and counted")
        #expect(ContinuousClock.now - start < .seconds(5), "\(ContinuousClock.now - start)")
        #expect(exporter.exported == 0 && exporter.dropped == 40 * 4 + 13)
    }

    @Test("a collector that stalls while spans keep coming: the queue holds at most its bound, the rest are dropped and counted, the pipeline is not held, and every span is either exported or dropped", .enabled(if: interopVenvPossible),
        .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func boundedWhileStalled() async throws {
        // The first export waits 6 s for its answer (within one POST's time: it is not sent twice).
        let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        try await withReceiver(["--stall", "6"], logger: quiet, adjust: { c in
            c.maxBatchSpans = 50
            c.maxQueuedSpans = 200
            c.timeout = .seconds(20)
        }) { dir, collector, exporter in
            let took = try await exporting(exporter) { try await run(2_000, into: exporter, queuedAt: Duration.sinceEpochMilliseconds) }
            await collector.stop(interrupt: true)
            let written = 800 * 4 + 267
            #expect(took < .seconds(5), "the pipeline did not wait for the stalled collector: \(took)")
            #expect(exporter.dropped > 0 && exporter.exported + exporter.dropped == written, "\(exporter.exported) exported, \(exporter.dropped) dropped of \(written)")
            #expect(try spans(dir).count == exporter.exported)
        }
    }

    @Test("the OTEL_* variables: endpoints (the traces' own as given, the shared one with /v1/traces), headers percent-decoded, the samplers, the batch settings; what this exporter does not do (gRPC, JSON, gzip, another exporter) leaves the spans to the tracer; a bad value names its variable")
    func environment() throws {
        let base = try #require(try OTLPExportConfiguration.fromEnvironment(["OTEL_TRACES_EXPORTER": "otlp"]))
        #expect(base.endpoint == "http://localhost:4318/v1/traces" && base.sampler == .parentBased(.alwaysOn) && base.resource.first?.1 == "herald")
        let c = try #require(
            try OTLPExportConfiguration.fromEnvironment([
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-team=push",
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_BSP_MAX_QUEUE_SIZE": "1000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5000", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
                "OTEL_SERVICE_NAME": "push", "OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,host.name=a%2Cb",
            ]))
        #expect(c.endpoint == "http://collector:4318/v1/traces")
        #expect(c.headers.map { "\($0.0)=\($0.1)" } == ["authorization=Bearer abc", "x-team=push"])
        #expect(c.sampler == .parentBased(.ratio(0.25)) && c.scheduleDelay == .milliseconds(200) && c.timeout == .milliseconds(2500))
        #expect(c.maxQueuedSpans == 1000 && c.maxBatchSpans == 1000, "a batch never larger than the queue")
        #expect(c.resource.map { "\($0.0)=\($0.1)" } == ["service.name=push", "host.name=a,b"])
        let own = try #require(try OTLPExportConfiguration.fromEnvironment(["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c.example/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other"]))
        #expect(own.endpoint == "https://c.example/traces")
        for unsupported in [
            ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"],
            ["OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"], ["OTEL_TRACES_EXPORTER": "console"],
        ] {
            #expect(try OTLPExportConfiguration.fromEnvironment(unsupported) == nil, "\(unsupported)")
        }
        for (key, value) in [
            ("OTEL_TRACES_SAMPLER", "sometimes"), ("OTEL_TRACES_SAMPLER_ARG", "2"), ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"), ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"), ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
        ] {
            var env = [key: value]
            if key == "OTEL_TRACES_SAMPLER_ARG" { env["OTEL_TRACES_SAMPLER"] = "traceidratio" }
            #expect {
                _ = try OTLPExportConfiguration.fromEnvironment(env)
            } throws: { ($0 as? OTLPConfigurationError)?.variable == key }
        }
        // The ratio sampler reads the trace id's last 16 digits: below the ratio of 2^63 (its top bit ignored).
        let low = NotificationTrace(traceparent: "00-ffffffffffffffff0000000000000001-00f067aa0ba902b7-00")!
        let high = NotificationTrace(traceparent: "00-00000000000000007fffffffffffffff-00f067aa0ba902b7-01")!
        #expect(OTLPExportConfiguration.Sampler.ratio(0.5).samples(low) && !OTLPExportConfiguration.Sampler.ratio(0.5).samples(high))
        #expect(!OTLPExportConfiguration.Sampler.parentBased(.alwaysOn).samples(low) && OTLPExportConfiguration.Sampler.parentBased(.alwaysOn).samples(high))
    }
}

