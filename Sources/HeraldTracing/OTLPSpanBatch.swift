import HeraldCore
import NIOCore

/// Notification spans written straight into an OTLP `ExportTraceServiceRequest` (protobuf),
/// batch by batch (issue 31): the same spans ``NotificationSpans`` makes on a tracer, with the
/// same names, kinds, times, attributes and statuses, but no span object, no tracer and no hop
/// per span: every id and time is known when the outcome comes, so each span is a few dozen
/// appended bytes. Sans-I/O: records and passages in, request bodies out;
/// ``OTLPTraceExporter`` sends them.
///
/// One request holds one `ResourceSpans` (the process: `service.name` and the resource's other
/// attributes) with one `ScopeSpans` (Herald's instrumentation scope) and the spans.
struct OTLPSpanBatch {
    /// The spans written so far, each a `ScopeSpans.spans` field (2).
    private(set) var spans = ProtobufWriter(capacity: 1 << 16)
    private(set) var count = 0
    /// The `Resource` message's bytes.
    let resource: [UInt8]
    /// The `InstrumentationScope` message's bytes.
    let scope: [UInt8]
    /// Span ids: SplitMix64 over a random seed (the W3C rule: random, never zero).
    private var idState: UInt64
    /// One span's fields, written here before they go into `spans` behind their length.
    private var scratch = ProtobufWriter(capacity: 1024)
    /// The last traceparent read, and its ids (a POST's notifications share one).
    private var lastParent: (traceparent: String, ids: Ids)?

    /// A trace id (two halves) and a parent span id, as numbers (written most significant byte first).
    struct Ids {
        var traceHigh: UInt64
        var traceLow: UInt64
        var parent: UInt64
    }

    init(resource attributes: [(String, String)], scope: String, version: String, seed: UInt64) {
        var r = ProtobufWriter()
        for (key, value) in attributes { r.attribute(1, key: key, value) }
        resource = r.bytes
        var s = ProtobufWriter()
        s.string(1, scope)
        s.string(2, version)
        self.scope = s.bytes
        idState = seed
    }

    /// The request holding every span written, and a fresh start.
    mutating func take() -> (body: ByteBuffer, spans: Int) {
        let body = Self.request(resource: resource, scope: scope, spans: spans.written)
        let taken = count
        spans.removeAll()
        count = 0
        return (body, taken)
    }

    /// `ExportTraceServiceRequest { resource_spans { resource, scope_spans { scope, spans… } } }`.
    static func request(resource: [UInt8], scope: [UInt8], spans: UnsafeRawBufferPointer) -> ByteBuffer {
        func framed(_ n: Int) -> Int { 1 + ProtobufWriter.size(ofVarint: UInt64(n)) + n }
        let scopeSpans = framed(scope.count) + spans.count
        let resourceSpans = framed(resource.count) + framed(scopeSpans)
        var head = ProtobufWriter(capacity: 64 + resource.count + scope.count)
        head.tag(1, .lengthDelimited)
        head.varint(UInt64(resourceSpans))
        head.bytes(1, resource)
        head.tag(2, .lengthDelimited)
        head.varint(UInt64(scopeSpans))
        head.bytes(1, scope)
        var body = ByteBufferAllocator().buffer(capacity: head.count + spans.count)
        body.writeBytes(head.written)
        body.writeBytes(spans)
        return body
    }

    /// OTLP's `Span.SpanKind`.
    enum Kind: UInt64 {
        case `internal` = 1
        case server = 2
        case client = 3
        case producer = 4
        case consumer = 5
    }

    mutating func nextSpanID() -> UInt64 {
        while true {
            idState &+= 0x9E37_79B9_7F4A_7C15
            var z = idState
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            if z != 0 { return z }
        }
    }

    /// The trace and parent ids of `trace` (read once per run of one traceparent).
    private mutating func ids(of trace: NotificationTrace) -> Ids {
        if let last = lastParent, last.traceparent == trace.traceparent { return last.ids }
        // Validated when the request was read: lowercase hex.
        let ids = Ids(
            traceHigh: UInt64(trace.traceID.prefix(16), radix: 16) ?? 0, traceLow: UInt64(trace.traceID.suffix(16), radix: 16) ?? 0,
            parent: UInt64(trace.parentID, radix: 16) ?? 0)
        lastParent = (trace.traceparent, ids)
        return ids
    }

    /// The spans ``append(_:_:end:)`` writes for a passage.
    static func spans(of passage: TraceBook.Passage) -> Int {
        (passage.trace.enqueuedAt == nil ? 0 : 1) + 1 + passage.steps.count + (passage.handed == nil ? 0 : 1)
    }

    /// One notification's spans, ending now (`end`, nanoseconds since the UNIX epoch): its queue
    /// wait, its send with a span per stage and APNs' answer under it (``NotificationSpans``).
    mutating func append(_ record: OutcomeRecord, _ passage: TraceBook.Passage, end: Int64) {
        var ids = ids(of: passage.trace)
        let entered = passage.entered
        if let queued = passage.trace.enqueuedAt {
            begin(ids, nextSpanID(), "herald.queue.wait", .consumer, from: min(queued &* 1_000_000, entered), to: entered)
            finish()
        }
        let send = nextSpanID()
        begin(ids, send, "herald.send", .internal, from: entered, to: end)
        if let id = record.id { scratch.attribute(9, "herald.request.id", Int64(id)) }
        if let app = record.app { scratch.attribute(9, "herald.app", app) }
        scratch.attribute(9, "herald.lane", passage.lane.description)
        scratch.attribute(9, "herald.sequence", Int64(clamping: record.sequence))
        Self.outcome(record, into: &scratch)
        finish()
        ids.parent = send
        for step in passage.steps {
            scratch.removeAll()
            head(ids, nextSpanID())
            scratch.string(5, "herald.", step.stage)
            times(.internal, from: step.start, to: step.end)
            scratch.attribute(9, "herald.stage", step.stage)
            finish()
        }
        if let handed = passage.handed {
            begin(ids, nextSpanID(), "apns.request", .client, from: handed, to: max(end, handed))
            if let apnsID = record.apnsID { scratch.attribute(9, "apns.id", apnsID) }
            if record.possibleDuplicate { scratch.attribute(9, "herald.possible_duplicate", true) }
            Self.outcome(record, into: &scratch)
            finish()
        }
    }

    /// A `Span`'s first fields into the scratch: ids, name, kind, times.
    private mutating func begin(_ ids: Ids, _ spanID: UInt64, _ name: StaticString, _ kind: Kind, from start: Int64, to end: Int64) {
        scratch.removeAll()
        head(ids, spanID)
        scratch.tag(5, .lengthDelimited)
        scratch.varint(UInt64(name.utf8CodeUnitCount))
        scratch.append(name)
        times(kind, from: start, to: end)
    }

    /// `trace_id` (1), `span_id` (2), `parent_span_id` (4).
    private mutating func head(_ ids: Ids, _ spanID: UInt64) {
        scratch.tag(1, .lengthDelimited)
        scratch.byte(16)
        scratch.appendBigEndian(ids.traceHigh)
        scratch.appendBigEndian(ids.traceLow)
        scratch.bigEndian(2, spanID)
        scratch.bigEndian(4, ids.parent)
    }

    /// `kind` (6), `start_time_unix_nano` (7), `end_time_unix_nano` (8).
    private mutating func times(_ kind: Kind, from start: Int64, to end: Int64) {
        scratch.uint(6, kind.rawValue)
        scratch.fixed64(7, UInt64(clamping: start))
        scratch.fixed64(8, UInt64(clamping: end))
    }

    /// The span in the scratch, behind its tag and length, into the batch.
    private mutating func finish() {
        spans.tag(2, .lengthDelimited)
        spans.varint(UInt64(scratch.count))
        spans.append(scratch.written)
        count += 1
    }

    /// The outcome's attributes and the span's `Status` (15): ok when accepted, an error with
    /// APNs' status or Herald's reason otherwise, none when suppressed.
    static func outcome(_ record: OutcomeRecord, into w: inout ProtobufWriter) {
        w.attribute(9, "herald.outcome", record.outcome.kind.rawValue)
        switch record.outcome {
        case .accepted:
            w.message(15) { $0.uint(3, 1) }
        case .rejected(let status):
            w.attribute(9, "apns.status", Int64(status.rawValue))
            if let reason = status.reason { w.attribute(9, "apns.reason", reason) }
            w.message(15) { s in
                s.string(2, status.description)
                s.uint(3, 2)
            }
        case .dropped(let why), .failed(let why), .cancelled(let why):
            w.attribute(9, "herald.reason_code", why.code.name)
            w.message(15) { s in
                s.string(2, why.description)
                s.uint(3, 2)
            }
        case .suppressed:
            w.attribute(9, "herald.reason_code", "suppressed")
        }
    }
}
