import Synchronization

/// What the pipeline notes of its traced requests (those with a ``NotificationRequest/trace``)
/// on their way through (issue 31): when each entered, when each stage worked on its batch, when
/// the transport took it. A tracer's observer takes a request's passage when its outcome comes
/// (``take(_:)``) and makes its spans of it (`HeraldTracing`'s `NotificationSpans`). Give the
/// book to the ``OutcomeLedger`` the pipeline records in.
///
/// An untraced request costs a look at its envelope as its batch enters and nothing after: a
/// batch with no traced request in flight is not looked at again. Bounded: past `capacity`
/// passages in flight, new ones are not noted (``overflowed`` counts them: their spans are lost,
/// their notifications are not).
public final class TraceBook: Sendable {
    /// One traced request's way through the pipeline. Times in nanoseconds since the UNIX epoch.
    public struct Passage: Sendable {
        public let trace: NotificationTrace
        public let lane: Lane
        /// When its batch entered the pipeline.
        public let entered: Int64
        /// Each stage's work on its batch, in order.
        public internal(set) var steps: [Step] = []
        /// When the transport took its batch; nil when a stage decided it.
        public internal(set) var handed: Int64?
    }

    /// A stage's work on a batch holding a traced request.
    public struct Step: Sendable {
        public let stage: String
        public let start: Int64
        public let end: Int64
    }

    public let capacity: Int
    let held = Atomic<Int>(0)
    let passages = Mutex<[UInt64: Passage]>([:])
    let lost = Atomic<Int>(0)

    public init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    /// Passages not noted because `capacity` were in flight.
    public var overflowed: Int { lost.load(ordering: .relaxed) }
    /// Passages in flight: noted, their outcome not yet taken.
    public var inFlight: Int { held.load(ordering: .relaxed) }

    /// The batch entered the pipeline now.
    func entered(_ batch: borrowing [Envelope]) {
        var new: [(UInt64, NotificationTrace, Lane)] = []
        for i in batch.indices {
            if let trace = batch[i].request.trace { new.append((batch[i].sequence, trace, batch[i].request.effectiveLane)) }
        }
        guard !new.isEmpty else { return }
        let now = Duration.sinceEpochNanoseconds
        let refused = passages.withLock { p in
            var refused = 0
            for (sequence, trace, lane) in new {
                if p.count >= capacity {
                    refused += 1
                } else {
                    p[sequence] = Passage(trace: trace, lane: lane, entered: now)
                }
            }
            held.store(p.count, ordering: .relaxed)
            return refused
        }
        if refused > 0 { lost.add(refused, ordering: .relaxed) }
    }

    /// Whether any passage is in flight (else a batch need not be looked at).
    var isEmpty: Bool { held.load(ordering: .relaxed) == 0 }

    /// `stage` worked on the batch from `start` to `end`.
    func ran(_ stage: String, _ batch: borrowing [Envelope], from start: Int64, to end: Int64) {
        let traced = Self.tracedSequences(batch)
        guard !traced.isEmpty else { return }
        let step = Step(stage: stage, start: start, end: end)
        passages.withLock { p in
            for q in traced { p[q]?.steps.append(step) }
        }
    }

    /// The transport took the batch now.
    func handed(_ batch: borrowing [Envelope]) {
        let traced = Self.tracedSequences(batch)
        guard !traced.isEmpty else { return }
        let now = Duration.sinceEpochNanoseconds
        passages.withLock { p in
            for q in traced { p[q]?.handed = now }
        }
    }

    static func tracedSequences(_ batch: borrowing [Envelope]) -> [UInt64] {
        var out: [UInt64] = []
        for i in batch.indices where batch[i].request.trace != nil { out.append(batch[i].sequence) }
        return out
    }

    /// The passages of the requests these outcomes end (removed from the book), with their records.
    public func take(_ records: [OutcomeRecord]) -> [(record: OutcomeRecord, passage: Passage)] {
        guard !isEmpty else { return [] }
        return passages.withLock { p in
            var out: [(record: OutcomeRecord, passage: Passage)] = []
            for r in records {
                if let passage = p.removeValue(forKey: r.sequence) { out.append((r, passage)) }
            }
            held.store(p.count, ordering: .relaxed)
            return out
        }
    }
}
