import Synchronization

/// What the pipeline notes of its traced requests (those with a ``NotificationRequest/trace``)
/// on their way through (issue 31): when each entered, when each stage worked on its batch, when
/// the transport took it. A tracer's observer takes a request's passage when its outcome comes
/// (``take(_:)``) and makes its spans of it (`HeraldTracing`'s `NotificationSpans`). Give the
/// book to the ``OutcomeLedger`` the pipeline records in.
///
/// An untraced request costs a look at its envelope as its batch enters and nothing after: a
/// batch with no traced request in flight is not looked at again. A stage's work on a batch is
/// noted once for the batch's traced requests together (they share a route until they part).
/// Bounded: past `capacity` passages in flight, new ones are not noted (``overflowed`` counts
/// them: their spans are lost, their notifications are not).
public final class TraceBook: Sendable {
    /// One traced request's way through the pipeline. Times in nanoseconds since the UNIX epoch.
    public struct Passage: Sendable {
        public let trace: NotificationTrace
        public let lane: Lane
        /// When its batch entered the pipeline.
        public let entered: Int64
        /// Each stage's work on its batch, in order.
        public let steps: [Step]
        /// When the transport took its batch; nil when a stage decided it.
        public let handed: Int64?
        /// When its outcome was taken from the book (``TraceBook/take(_:)``): its end.
        public let ended: Int64?

        public init(trace: NotificationTrace, lane: Lane, entered: Int64, steps: [Step] = [], handed: Int64? = nil, ended: Int64? = nil) {
            self.trace = trace
            self.lane = lane
            self.entered = entered
            self.steps = steps
            self.handed = handed
            self.ended = ended
        }
    }

    /// A stage's work on a batch holding a traced request.
    public struct Step: Sendable {
        public let stage: String
        public let start: Int64
        public let end: Int64

        public init(stage: String, start: Int64, end: Int64) {
            self.stage = stage
            self.start = start
            self.end = end
        }
    }

    public let capacity: Int
    let held = Atomic<Int>(0)
    let book = Mutex(Book())
    let lost = Atomic<Int>(0)

    /// A traced request in flight: its trace and the way its batch went (shared by the batch's
    /// traced requests while they go together).
    struct Entry {
        let trace: NotificationTrace
        let lane: Lane
        var route: Route
    }

    /// The way a group of traced requests went together: when they entered, each stage's work,
    /// when the transport took them. Shared, so that a stage's work on a batch is noted once,
    /// not once per request. Mutated only under the book's lock.
    final class Route: @unchecked Sendable {
        let entered: Int64
        var steps: [Step]
        var handed: Int64?
        /// The requests put on this route, in their batch's order.
        let sequences: [UInt64]
        /// Those of them since gone (decided, or forked onto a route of their own).
        var departed = 0
        /// Requests in flight on this route.
        var members: Int { sequences.count - departed }

        init(entered: Int64, steps: [Step] = [], handed: Int64? = nil, sequences: [UInt64]) {
            self.entered = entered
            self.steps = steps
            self.handed = handed
            self.sequences = sequences
        }
    }

    struct Book {
        var entries: [UInt64: Entry] = [:]
    }

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
        let refused = book.withLock { b in
            let room = max(0, capacity - b.entries.count)
            let route = Route(entered: now, sequences: new.prefix(room).map(\.0))
            for (sequence, trace, lane) in new.prefix(room) {
                b.entries[sequence] = Entry(trace: trace, lane: lane, route: route)
            }
            held.store(b.entries.count, ordering: .relaxed)
            return new.count - min(room, new.count)
        }
        if refused > 0 { lost.add(refused, ordering: .relaxed) }
    }

    /// Whether any passage is in flight (else a batch need not be looked at).
    var isEmpty: Bool { held.load(ordering: .relaxed) == 0 }

    /// `stage` worked on the batch from `start` to `end`.
    func ran(_ stage: String, _ batch: borrowing [Envelope], from start: Int64, to end: Int64) {
        let step = Step(stage: stage, start: start, end: end)
        touch(batch) { $0.steps.append(step) }
    }

    /// The transport took the batch now.
    func handed(_ batch: borrowing [Envelope]) {
        let now = Duration.sinceEpochNanoseconds
        touch(batch) { $0.handed = now }
    }

    /// Notes `change` on the routes of the batch's traced requests. A route whose requests are not
    /// all in this batch (some were decided earlier, or a stage split the batch) is forked first:
    /// the requests here go on a copy that takes the change, the others keep the way they went.
    /// The common case, a batch holding exactly one route's requests as they entered, costs one
    /// look-up, not one per request.
    private func touch(_ batch: borrowing [Envelope], _ change: (Route) -> Void) {
        let traced = Self.tracedSequences(batch)
        guard let first = traced.first else { return }
        book.withLock { b in
            if let route = b.entries[first]?.route, route.departed == 0, route.sequences == traced {
                change(route)
                return
            }
            // The routes met, each with its requests here (a batch mostly has one).
            var routes: [(route: Route, sequences: [UInt64])] = []
            for q in traced {
                guard let route = b.entries[q]?.route else { continue }
                if let k = routes.firstIndex(where: { $0.route === route }) {
                    routes[k].sequences.append(q)
                } else {
                    routes.append((route, [q]))
                }
            }
            for (route, sequences) in routes {
                if sequences.count == route.members {
                    change(route)
                    continue
                }
                let fork = Route(entered: route.entered, steps: route.steps, handed: route.handed, sequences: sequences)
                route.departed += sequences.count
                change(fork)
                for q in sequences { b.entries[q]?.route = fork }
            }
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
        let now = Duration.sinceEpochNanoseconds
        return book.withLock { b in
            var out: [(record: OutcomeRecord, passage: Passage)] = []
            for r in records {
                guard let entry = b.entries.removeValue(forKey: r.sequence) else { continue }
                let route = entry.route
                route.departed += 1
                out.append((r, Passage(trace: entry.trace, lane: entry.lane, entered: route.entered, steps: route.steps, handed: route.handed, ended: now)))
            }
            held.store(b.entries.count, ordering: .relaxed)
            return out
        }
    }
}
