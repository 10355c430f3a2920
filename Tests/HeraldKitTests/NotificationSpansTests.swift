import HeraldCore
import HeraldTracing
import InMemoryTracing
import Synchronization
import Testing
import Tracing

/// Issue 31: the spans `NotificationSpans` makes of a pipeline run, on swift-distributed-tracing's
/// in-memory tracer (which keeps what it made): one tree per traced notification, none for the
/// others, its times inside one another, its outcome on it.
@Suite("A traced notification's spans, made from the pipeline's notes (in memory)")
struct NotificationSpansTests {
    struct Mark: EnvelopeStage {
        func apply(_ e: inout Envelope) throws(StageFailure) { e.payload = [0x7B, 0x7D] }
    }

    /// Accepts every request but those whose id is a multiple of 4: `410 Unregistered`.
    final class Answering: Transport {
        func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
            outcomes.record(batch.map { e in
                e.record(e.request.id! % 4 == 0 ? .rejected(Status(http: 410, reason: "Unregistered")) : .accepted)
            })
        }
        func finish(outcomes: OutcomeLedger) async {}
    }

    @Test("every other request traced (a third of those queued first): a herald.send per traced request with a span per stage and apns.request under it, a herald.queue.wait for the queued ones, nothing for the rest; a 410 is an error with APNs' status and reason")
    func spansOfARun() async throws {
        let tracer = InMemoryTracer()
        let book = TraceBook()
        let ledger = OutcomeLedger(traceBook: book)
        ledger.addObserver(NotificationSpans(book: book, tracer: tracer))
        let queuedAt = Duration.sinceEpochMilliseconds - 50
        let requests = (0..<300).map { k -> NotificationRequest in
            var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 1, count: 32)), id: UInt32(k))
            r.aps.alert = Alert(body: "hi")
            if k % 2 == 0 {
                r.trace = NotificationTrace(
                    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", enqueuedAt: k % 3 == 0 ? queuedAt : nil)
            }
            return r
        }
        let pipeline = Pipeline(
            source: InMemorySource(requests), stages: [NamedStage("localize", Mark()), NamedStage("payload", Mark())],
            transport: Answering(), ledger: ledger, options: PipelineOptions(batchSize: 32, threads: 1))
        let snapshot = try await pipeline.run()
        #expect(snapshot.isBalanced && snapshot.entered == 300)
        #expect(book.inFlight == 0 && book.overflowed == 0)

        let spans = tracer.finishedSpans
        let sends = spans.filter { $0.operationName == "herald.send" }
        #expect(sends.count == 150, "one per traced request")
        #expect(Set(sends.compactMap { $0.attributes["herald.request.id"]?.toSpanAttribute() }.map { "\($0)" }).count == 150)
        for send in sends {
            let children = spans.filter { $0.parentSpanID == send.spanID }
            #expect(children.map(\.operationName).sorted() == ["apns.request", "herald.localize", "herald.payload"], "\(children.map(\.operationName))")
            for child in children {
                #expect(child.traceID == send.traceID)
                #expect(child.startInstant.nanosecondsSinceEpoch >= send.startInstant.nanosecondsSinceEpoch)
                #expect(child.endInstant.nanosecondsSinceEpoch <= send.endInstant.nanosecondsSinceEpoch)
            }
            let answer = try #require(children.first { $0.operationName == "apns.request" })
            #expect(answer.kind == .client)
            guard case .int64(let id)? = send.attributes["herald.request.id"]?.toSpanAttribute() else {
                Issue.record("herald.send without its request's id")
                continue
            }
            if id % 4 == 0 {
                #expect(answer.status?.code == .error && send.status?.code == .error)
                #expect(answer.attributes["apns.status"]?.toSpanAttribute() == 410 && answer.attributes["apns.reason"]?.toSpanAttribute() == "Unregistered")
                #expect(send.attributes["herald.outcome"]?.toSpanAttribute() == "rejected")
            } else {
                #expect(answer.status?.code == .ok && send.attributes["herald.outcome"]?.toSpanAttribute() == "accepted")
            }
        }
        let waits = spans.filter { $0.operationName == "herald.queue.wait" }
        #expect(waits.count == 50, "the traced requests queued first (k % 6 == 0)")
        for wait in waits {
            #expect(wait.startInstant.nanosecondsSinceEpoch == UInt64(queuedAt) * 1_000_000 && wait.endInstant.nanosecondsSinceEpoch > wait.startInstant.nanosecondsSinceEpoch)
        }
        #expect(spans.count == 150 * 4 + 50, "nothing for the untraced half")
    }
}
