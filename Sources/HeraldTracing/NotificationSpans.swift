import HeraldCore
import Tracing

/// Makes each traced notification's spans when its outcome comes (issue 31), on any
/// swift-distributed-tracing tracer (`herald` sets up swift-otel's from the `OTEL_*` variables).
///
/// A notification carries its trace in its ``NotificationRequest/trace`` (the request's
/// `traceparent`: a caller's span, `herald serve`'s intake span); the pipeline notes its way in
/// the ledger's ``TraceBook``; this observer turns the note into spans, all children of that
/// `traceparent`, so they join the caller's trace wherever the notification was sent from:
///
/// - `herald.queue.wait`: from its `enqueued-at` (an intake queued it) to its batch entering the
///   pipeline, when it waited in a queue;
/// - `herald.send`: from entering the pipeline to its outcome, with the outcome, its reason and
///   APNs' status as attributes (an error status for any outcome but accepted);
///   - one span per stage that worked on it (`herald.` and the stage's name: `herald.localize`,
///     `herald.payload`…), its batch's time there;
///   - `apns.request` (client): from the transport taking it to APNs' answer, with the status,
///     the reason, the `apns-id` and whether it may have been sent twice (the outcome's kind is
///     the send span's).
///
/// The spans are made after the fact, with the times the book noted: nothing is done on the
/// pipeline's path but the book's notes, and an untraced notification costs nothing here.
///
/// Given an ``OTLPTraceExporter``, the spans are written straight into its OTLP batches (the same
/// spans, no span objects: `herald` does so whenever the exporter can serve the `OTEL_*`
/// variables); otherwise they are made on a tracer.
public final class NotificationSpans: OutcomeObserver {
    public let book: TraceBook
    let tracer: any Tracer
    let exporter: OTLPTraceExporter?

    /// `tracer`: swift-distributed-tracing's global one (`InstrumentationSystem.tracer`) unless given.
    public init(book: TraceBook, tracer: (any Tracer)? = nil) {
        self.book = book
        self.tracer = tracer ?? InstrumentationSystem.tracer
        exporter = nil
    }

    /// The spans written into `exporter`'s batches; with none, made on the global tracer.
    public init(book: TraceBook, exporter: OTLPTraceExporter?) {
        self.book = book
        tracer = exporter == nil ? InstrumentationSystem.tracer : NoOpTracer()
        self.exporter = exporter
    }

    public func observe(_ records: [OutcomeRecord]) {
        if let exporter {
            // The passages are taken from the book by the exporter's encoder, on its own thread.
            if !book.isEmpty { exporter.write(records, from: book) }
            return
        }
        let taken = book.take(records)
        guard !taken.isEmpty else { return }
        let now = Duration.sinceEpochNanoseconds
        // A POST's notifications share its traceparent: read once per run of them.
        var last: (trace: NotificationTrace, context: ServiceContext)?
        for (record, passage) in taken {
            let parent: ServiceContext
            if let last, last.trace.sameContext(as: passage.trace) {
                parent = last.context
            } else {
                var context = ServiceContext.topLevel
                tracer.extract(["traceparent": passage.trace.traceparent], into: &context, using: TextMapExtractor())
                last = (passage.trace, context)
                parent = context
            }
            spans(record, passage, parent: parent, end: EpochInstant(nanoseconds: passage.ended ?? now))
        }
    }

    func spans(_ record: OutcomeRecord, _ passage: TraceBook.Passage, parent: ServiceContext, end: EpochInstant) {
        let entered = EpochInstant(nanoseconds: passage.entered)
        if let queued = passage.trace.enqueuedAt {
            let start = EpochInstant(nanoseconds: queued &* 1_000_000)
            let wait = tracer.startSpan("herald.queue.wait", context: parent, ofKind: .consumer, at: min(start, entered))
            wait.end(at: entered)
        }
        let send = tracer.startSpan("herald.send", context: parent, ofKind: .internal, at: entered)
        guard send.isRecording else {
            send.end(at: end)
            return
        }
        Self.describe(record, passage, on: send)
        for step in passage.steps {
            let span = tracer.startSpan("herald.\(step.stage)", context: send.context, ofKind: .internal, at: EpochInstant(nanoseconds: step.start))
            span.end(at: EpochInstant(nanoseconds: step.end))
        }
        if let handed = passage.handed {
            let request = tracer.startSpan("apns.request", context: send.context, ofKind: .client, at: EpochInstant(nanoseconds: handed))
            Self.answer(record, on: request)
            request.end(at: max(end, EpochInstant(nanoseconds: handed)))
        }
        send.end(at: end)
    }

    /// The notification and how it ended, on its `herald.send` span.
    static func describe(_ record: OutcomeRecord, _ passage: TraceBook.Passage, on span: any Span) {
        if let id = record.id { span.attributes["herald.request.id"] = Int64(id) }
        if let app = record.app { span.attributes["herald.app"] = app }
        span.attributes["herald.lane"] = passage.lane.description
        span.attributes["herald.sequence"] = Int64(clamping: record.sequence)
        outcome(record, on: span)
    }

    /// APNs' answer, on the `apns.request` span.
    static func answer(_ record: OutcomeRecord, on span: any Span) {
        if let apnsID = record.apnsID { span.attributes["apns.id"] = apnsID }
        if record.possibleDuplicate { span.attributes["herald.possible_duplicate"] = true }
        outcome(record, named: false, on: span)
    }

    /// The outcome's attributes and the span's status; `named`: with `herald.outcome` (the send
    /// span; not again on APNs' answer under it).
    static func outcome(_ record: OutcomeRecord, named: Bool = true, on span: any Span) {
        if named { span.attributes["herald.outcome"] = record.outcome.kind.rawValue }
        switch record.outcome {
        case .accepted:
            span.setStatus(SpanStatus(code: .ok))
        case .rejected(let status):
            // An HTTP/2 answer's status and reason, or the binary interface's status byte.
            span.attributes["apns.status"] = status.rawValue
            if let reason = status.reason { span.attributes["apns.reason"] = reason }
            span.setStatus(SpanStatus(code: .error, message: status.description))
        case .dropped(let why), .failed(let why), .cancelled(let why):
            span.attributes["herald.reason_code"] = why.code.name
            span.setStatus(SpanStatus(code: .error, message: why.description))
        case .suppressed:
            span.attributes["herald.reason_code"] = "suppressed"
        }
    }
}

/// A time as swift-distributed-tracing takes it: nanoseconds since the UNIX epoch.
struct EpochInstant: TracerInstant {
    let nanoseconds: Int64
    var nanosecondsSinceEpoch: UInt64 { UInt64(clamping: nanoseconds) }
    static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }
}

/// Header-style text fields (`traceparent`, `tracestate`) for a tracer's propagator to read.
struct TextMapExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

/// Header-style text fields a tracer's propagator writes.
struct TextMapInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

extension NotificationTrace {
    /// The trace context of `context` (the span a task is in: an HTTP request's, under a tracing
    /// middleware) as a `traceparent`, read by `tracer`'s own propagator; nil when it holds none.
    public static func current(in context: ServiceContext? = .current, tracer: (any Tracer)? = nil) -> NotificationTrace? {
        guard let context else { return nil }
        var fields: [String: String] = [:]
        (tracer ?? InstrumentationSystem.tracer).inject(context, into: &fields, using: TextMapInjector())
        return fields["traceparent"].flatMap { NotificationTrace(traceparent: $0) }
    }
}
