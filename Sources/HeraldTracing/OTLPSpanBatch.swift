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
    /// The request being written: room for its head (whose lengths are known only at the end),
    /// then the spans, each a `ScopeSpans.spans` field (2). Handed over whole by ``take()``.
    private var body: ByteBuffer
    private(set) var count = 0
    /// The `Resource` message's bytes.
    let resource: [UInt8]
    /// The `InstrumentationScope` message's bytes.
    let scope: [UInt8]
    /// The bytes kept in front of the spans for the request's head: its most.
    let headRoom: Int
    /// `herald.lane`'s attribute for each lane; an accepted outcome's attribute and status (with
    /// the kind, on the send span) and its status alone (APNs' answer): the same bytes each time,
    /// in memory of `fixed`'s, read with no reference counted.
    let fastLane: UnsafeRawBufferPointer, bulkLane: UnsafeRawBufferPointer
    let accepted: UnsafeRawBufferPointer, acceptedBare: UnsafeRawBufferPointer
    private let fixed: ProtobufWriter
    /// Span ids: SplitMix64 over a random seed (the W3C rule: random, never zero).
    private var idState: SeededGenerator
    /// One notification's spans, written here, then into `body` in one copy.
    private var scratch = ProtobufWriter(capacity: 4096)
    /// The spans the notifications of one run (one route, one traceparent, one enqueued-at)
    /// write alike but for their ids, written once for the run.
    private var shared: Shared?
    /// `shared`'s view (what each notification of its run copies), held apart so that reading it
    /// counts no reference.
    private var run = Shared.View()

    /// A trace id (two halves) and a parent span id, as numbers (written most significant byte first).
    struct Ids {
        var traceHigh: UInt64
        var traceLow: UInt64
        var parent: UInt64
    }

    /// A run's queue wait and stage spans, framed, with where each one's ids go: every
    /// notification of the run copies them and puts in its own span ids (and, for the stages,
    /// its send span's id as their parent); and the leads of its send span and APNs' answer.
    /// Written into memory of its own, which ``view`` shows without reference counting (the
    /// encoder reads it once per notification: a count each time showed in its profile).
    final class Shared {
        let route: TraceBook.Route
        let trace: NotificationTrace
        /// The bytes (`view`'s pointers point into them; never written again).
        private let bytes: ProtobufWriter
        private let ids: UnsafeMutableBufferPointer<Int>
        let view: View

        /// What a notification of the run copies.
        struct View {
            /// The route's times (read once: it no longer changes).
            var entered: Int64 = 0
            var handed: Int64?
            /// `herald.queue.wait` (empty when it was not queued) and where its span id goes.
            var wait = UnsafeRawBufferPointer(start: nil, count: 0)
            var waitID = 0
            /// Each stage's span, one after another, and where each one's span id goes (its
            /// parent's 10 bytes on).
            var stages = UnsafeRawBufferPointer(start: nil, count: 0)
            var stageIDs = UnsafeBufferPointer<Int>(start: nil, count: 0)
            /// The fields of `herald.send` from its trace id to its start, and those of
            /// `apns.request` (empty when the transport did not take the run), their span ids at
            /// ``spanIDOffset`` and, for APNs' answer, its parent's (the send span's) 10 bytes on.
            var sendLead = UnsafeRawBufferPointer(start: nil, count: 0)
            var answerLead = UnsafeRawBufferPointer(start: nil, count: 0)
        }

        /// Writes them for the run of requests on `route` under `trace`.
        init(_ route: TraceBook.Route, _ trace: NotificationTrace) {
            self.route = route
            self.trace = trace
            let entered = route.entered
            let handed = route.handed
            let ids = OTLPSpanBatch.ids(of: trace)
            var w = ProtobufWriter(capacity: 1024)
            // Where each part ends in `w` (written one after another).
            var waitID = 0
            if let queued = trace.enqueuedAt {
                waitID = OTLPSpanBatch.span(into: &w, ids, 0, "herald.queue.wait", .consumer, from: min(queued &* 1_000_000, entered), to: entered) { _ in }
            }
            let waitEnd = w.count
            var child = ids
            child.parent = 0
            let stageIDs = route.steps.map { OTLPSpanBatch.stageSpan(into: &w, child, 0, $0.stage, from: $0.start, to: $0.end) - waitEnd }
            let stagesEnd = w.count
            OTLPSpanBatch.lead(into: &w, ids, 0, "herald.send", .internal, from: entered)
            let sendEnd = w.count
            if let handed {
                OTLPSpanBatch.lead(into: &w, child, 0, "apns.request", .client, from: handed)
            }
            bytes = w
            self.ids = .allocate(capacity: max(1, stageIDs.count))
            _ = self.ids.initialize(from: stageIDs)
            let all = w.written
            view = View(
                entered: entered, handed: handed,
                wait: UnsafeRawBufferPointer(rebasing: all[0..<waitEnd]), waitID: waitID,
                stages: UnsafeRawBufferPointer(rebasing: all[waitEnd..<stagesEnd]),
                stageIDs: UnsafeBufferPointer(rebasing: self.ids[0..<stageIDs.count]),
                sendLead: UnsafeRawBufferPointer(rebasing: all[stagesEnd..<sendEnd]),
                answerLead: UnsafeRawBufferPointer(rebasing: all[sendEnd..<all.count]))
        }

        deinit { ids.deallocate() }

        func fits(_ route: TraceBook.Route, _ trace: NotificationTrace) -> Bool {
            route === self.route && trace == self.trace
        }
    }

    init(resource attributes: [(String, String)], scope: String, version: String, seed: UInt64) {
        var r = ProtobufWriter()
        for (key, value) in attributes { r.attribute(1, key: key, value) }
        resource = r.bytes
        var s = ProtobufWriter()
        s.string(1, scope)
        s.string(2, version)
        self.scope = s.bytes
        // Two tags and lengths for each of ResourceSpans, Resource, ScopeSpans and the scope.
        headRoom = 4 * (1 + 5) + resource.count + self.scope.count
        // One writer's memory holds the four, written one after another (it never grows again).
        var f = ProtobufWriter(capacity: 256)
        var ends: [Int] = []
        f.attribute(9, "herald.lane", "fast" as StaticString)
        ends.append(f.count)
        f.attribute(9, "herald.lane", "bulk" as StaticString)
        ends.append(f.count)
        Self.outcome(.accepted, into: &f)
        ends.append(f.count)
        Self.outcome(.accepted, named: false, into: &f)
        ends.append(f.count)
        fixed = f
        let all = f.written
        fastLane = UnsafeRawBufferPointer(rebasing: all[0..<ends[0]])
        bulkLane = UnsafeRawBufferPointer(rebasing: all[ends[0]..<ends[1]])
        accepted = UnsafeRawBufferPointer(rebasing: all[ends[1]..<ends[2]])
        acceptedBare = UnsafeRawBufferPointer(rebasing: all[ends[2]..<ends[3]])
        body = Self.fresh(headRoom: headRoom, capacity: 1 << 16)
        idState = SeededGenerator(seed: seed)
    }

    private static func fresh(headRoom: Int, capacity: Int) -> ByteBuffer {
        var b = ByteBufferAllocator().buffer(capacity: headRoom + capacity)
        b.moveWriterIndex(forwardBy: headRoom)
        b.moveReaderIndex(forwardBy: headRoom)
        return b
    }

    /// The request holding every span written, and a fresh start.
    mutating func take() -> (body: ByteBuffer, spans: Int) {
        let head = Self.head(resource: resource, scope: scope, spans: body.readableBytes)
        let start = headRoom - head.count
        body.setBytes(head.written, at: start)
        body.moveReaderIndex(to: start)
        let taken = (body, count)
        // The next batch is likely as big as this one: room for it at once.
        body = Self.fresh(headRoom: headRoom, capacity: max(1 << 16, taken.0.readableBytes))
        count = 0
        return taken
    }

    /// `ExportTraceServiceRequest { resource_spans { resource, scope_spans { scope, spans… } } }`
    /// up to the spans, for `spans` bytes of them.
    static func head(resource: [UInt8], scope: [UInt8], spans: Int) -> ProtobufWriter {
        func framed(_ n: Int) -> Int { 1 + ProtobufWriter.size(ofVarint: UInt64(n)) + n }
        let scopeSpans = framed(scope.count) + spans
        let resourceSpans = framed(resource.count) + framed(scopeSpans)
        var head = ProtobufWriter(capacity: 64 + resource.count + scope.count)
        head.tag(1, .lengthDelimited)
        head.varint(UInt64(resourceSpans))
        head.bytes(1, resource)
        head.tag(2, .lengthDelimited)
        head.varint(UInt64(scopeSpans))
        head.bytes(1, scope)
        return head
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
            let id = idState.next()
            if id != 0 { return id }
        }
    }

    /// The trace and parent ids of `trace`.
    static func ids(of trace: NotificationTrace) -> Ids {
        Ids(traceHigh: trace.traceHigh, traceLow: trace.traceLow, parent: trace.parentSpan)
    }

    /// The spans ``append(_:_:end:)`` writes for a passage.
    static func spans(of passage: TraceBook.Passage) -> Int {
        (passage.trace.enqueuedAt == nil ? 0 : 1) + 1 + passage.steps.count + (passage.handed == nil ? 0 : 1)
    }

    /// One notification's spans, ending now (`end`, nanoseconds since the UNIX epoch): its queue
    /// wait, its send with a span per stage and APNs' answer under it (``NotificationSpans``).
    mutating func append(_ record: OutcomeRecord, _ passage: TraceBook.Passage, end: Int64) {
        withUnsafePointer(to: record) { append(UnsafeBufferPointer(start: $0, count: 1), 0, on: passage.route, passage.trace, passage.lane, end: end) }
    }

    /// ``append(_:_:end:)`` for `records[index]`, a request on `route` with this trace and lane.
    /// The record and route are read where they are (the record through its pointer: handed as
    /// a value it was copied, fields and all, to be kept apart from the batch this writes), and
    /// the spans written with no closure, so the writing is plain stores.
    mutating func append(
        _ records: UnsafeBufferPointer<OutcomeRecord>, _ index: Int, on route: borrowing TraceBook.Route, _ trace: NotificationTrace, _ lane: Lane, end: Int64
    ) {
        if shared?.fits(route, trace) != true {
            let made = Shared(copy route, trace)
            shared = made
            run = made.view
        }
        let shared = run
        scratch.removeAll()
        var spans = 1
        if !shared.wait.isEmpty {
            scratch.append(shared.wait)
            scratch.setBigEndian(nextSpanID(), at: shared.waitID)
            spans += 1
        }
        let send = nextSpanID()
        var mark = openSpan(shared.sendLead, send, parent: nil, end: end)
        if let id = records[index].id { scratch.attribute(9, "herald.request.id", Int64(id)) }
        if let app = records[index].app { scratch.attribute(9, "herald.app", app) }
        scratch.append(lane == .fast ? fastLane : bulkLane)
        scratch.attribute(9, "herald.sequence", Int64(clamping: records[index].sequence))
        if case .accepted = records[index].outcome { scratch.append(accepted) } else { Self.outcome(records[index].outcome, into: &scratch) }
        scratch.close(mark)
        if !shared.stages.isEmpty {
            let at = scratch.count
            scratch.append(shared.stages)
            for offset in shared.stageIDs {
                scratch.setBigEndian(nextSpanID(), at: at + offset)
                scratch.setBigEndian(send, at: at + offset + 10)
            }
            spans += shared.stageIDs.count
        }
        if let handed = shared.handed {
            mark = openSpan(shared.answerLead, nextSpanID(), parent: send, end: max(end, handed))
            if let apnsID = records[index].apnsID { scratch.attribute(9, "apns.id", apnsID) }
            if records[index].possibleDuplicate { scratch.attribute(9, "herald.possible_duplicate", true) }
            if case .accepted = records[index].outcome { scratch.append(acceptedBare) } else { Self.outcome(records[index].outcome, named: false, into: &scratch) }
            scratch.close(mark)
            spans += 1
        }
        body.writeBytes(scratch.written)
        count += spans
    }

    /// Opens a span in the scratch from a run's lead (its ids, name, kind and start, written
    /// once): copied, with `spanID` (and `parent`, when given) put in and `end` written after it.
    /// The caller writes the attributes and status, then closes it (`close` with what this returns).
    private mutating func openSpan(_ lead: UnsafeRawBufferPointer, _ spanID: UInt64, parent: UInt64?, end: Int64) -> Int {
        let mark = scratch.open(2)
        let at = scratch.count
        scratch.append(lead)
        scratch.setBigEndian(spanID, at: at + Self.spanIDOffset)
        if let parent { scratch.setBigEndian(parent, at: at + Self.spanIDOffset + 10) }
        scratch.fixed64(8, UInt64(clamping: end))
        return mark
    }

    /// A `Span` as a `ScopeSpans.spans` field: `trace_id` (1), `span_id` (2), `parent_span_id`
    /// (4), `name` (5), `kind` (6), `start_time_unix_nano` (7), `end_time_unix_nano` (8), then
    /// what `attributes` writes (attributes, 9; status, 15). Returns where its span id's bytes
    /// are in `w` (its parent's are 10 bytes on).
    @discardableResult
    static func span(
        into w: inout ProtobufWriter, _ ids: Ids, _ spanID: UInt64, _ name: StaticString, _ kind: Kind, from start: Int64, to end: Int64,
        attributes: (inout ProtobufWriter) -> Void
    ) -> Int {
        let mark = w.open(2)
        lead(into: &w, ids, spanID, name, kind, from: start)
        w.fixed64(8, UInt64(clamping: end))
        attributes(&w)
        // The body starts after its length, which may take more than the byte kept for it.
        let length = w.count - mark - 1
        w.close(mark)
        return w.count - length + spanIDOffset
    }

    /// A span's fields up to its end time: `trace_id`, `span_id`, `parent_span_id`, `name`,
    /// `kind`, `start_time_unix_nano` (a run's spans share them but for their ids).
    static func lead(into w: inout ProtobufWriter, _ ids: Ids, _ spanID: UInt64, _ name: StaticString, _ kind: Kind, from start: Int64) {
        head(into: &w, ids, spanID)
        w.tag(5, .lengthDelimited)
        w.varint(UInt64(name.utf8CodeUnitCount))
        w.append(name)
        w.uint(6, kind.rawValue)
        w.fixed64(7, UInt64(clamping: start))
    }

    /// A stage's span, named `herald.` and the stage's name, as ``span(into:_:_:_:_:from:to:attributes:)``.
    static func stageSpan(
        into w: inout ProtobufWriter, _ ids: Ids, _ spanID: UInt64, _ stage: String, from start: Int64, to end: Int64
    ) -> Int {
        var length = 0
        w.message(2) { s in
            let begin = s.count
            head(into: &s, ids, spanID)
            s.string(5, "herald.", stage)
            times(into: &s, .internal, from: start, to: end)
            length = s.count - begin
        }
        return w.count - length + spanIDOffset
    }

    /// Where a span's id is, from the start of its message: after the trace id's field (18
    /// bytes) and its own field's tag and length.
    static let spanIDOffset = 20

    /// `trace_id` (1), `span_id` (2), `parent_span_id` (4).
    private static func head(into s: inout ProtobufWriter, _ ids: Ids, _ spanID: UInt64) {
        s.tag(1, .lengthDelimited)
        s.byte(16)
        s.appendBigEndian(ids.traceHigh)
        s.appendBigEndian(ids.traceLow)
        s.bigEndian(2, spanID)
        s.bigEndian(4, ids.parent)
    }

    /// `kind` (6), `start_time_unix_nano` (7), `end_time_unix_nano` (8).
    private static func times(into s: inout ProtobufWriter, _ kind: Kind, from start: Int64, to end: Int64) {
        s.uint(6, kind.rawValue)
        s.fixed64(7, UInt64(clamping: start))
        s.fixed64(8, UInt64(clamping: end))
    }

    /// The outcome's attributes and the span's `Status` (15): ok when accepted, an error with
    /// APNs' status or Herald's reason otherwise, none when suppressed. `named`: with the
    /// outcome's kind (`herald.outcome`: on the send span, not again on APNs' answer under it).
    static func outcome(_ outcome: Outcome, named: Bool = true, into w: inout ProtobufWriter) {
        if named { w.attribute(9, "herald.outcome", outcome.kind.rawValue) }
        switch outcome {
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
