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
        /// The way its batch went, shared with the requests that went the same way; no longer
        /// changed once a request has left it (``TraceBook/take(_:)``), so passages share it
        /// rather than copy its steps.
        package let route: Route
        /// When its outcome was taken from the book (``TraceBook/take(_:)``): its end.
        public let ended: Int64?

        /// When its batch entered the pipeline.
        public var entered: Int64 { route.entered }
        /// Each stage's work on its batch, in order.
        public var steps: [Step] { route.steps }
        /// When the transport took its batch; nil when a stage decided it.
        public var handed: Int64? { route.handed }

        public init(trace: NotificationTrace, lane: Lane, entered: Int64, steps: [Step] = [], handed: Int64? = nil, ended: Int64? = nil) {
            self.init(trace: trace, lane: lane, route: Route(entered: entered, steps: steps, handed: handed, sequences: []), ended: ended)
        }

        init(trace: NotificationTrace, lane: Lane, route: Route, ended: Int64?) {
            self.trace = trace
            self.lane = lane
            self.route = route
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
        /// Not counted: ``Book/routes`` keeps every route alive while any of its requests is in
        /// the book (an entry made and removed per request would count it twice, on the
        /// pipeline's threads and the encoder's, for nothing).
        unowned(unsafe) var route: Route
    }

    /// The way a group of traced requests went together: when they entered, each stage's work,
    /// when the transport took them. Shared, so that a stage's work on a batch is noted once,
    /// not once per request. Changed only under the book's lock, and only while none of its
    /// requests has left it (taken or forked): from then on it is read without the lock (a
    /// ``Passage``'s steps; an exporter writing its spans once for all of its requests).
    package final class Route: @unchecked Sendable {
        package let entered: Int64
        package fileprivate(set) var steps: [Step]
        package fileprivate(set) var handed: Int64?
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
        /// Every route with a request in the book: what keeps them alive (``Entry/route``).
        var routes: [ObjectIdentifier: Route] = [:]

        mutating func add(_ route: Route) {
            if route.members > 0 { routes[ObjectIdentifier(route)] = route }
        }

        /// `count` of `route`'s requests left it; once none is left the book lets it go (a
        /// passage that has it keeps it).
        mutating func depart(_ count: Int, from route: Route) {
            route.departed += count
            if route.members <= 0 { routes.removeValue(forKey: ObjectIdentifier(route)) }
        }
    }

    public init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    /// Passages not noted because `capacity` were in flight.
    public var overflowed: Int { lost.load(ordering: .relaxed) }
    /// Routes the book holds (some request of each in flight).
    package var routesHeld: Int { book.withLock { $0.routes.count } }
    /// Passages in flight: noted, their outcome not yet taken.
    public var inFlight: Int { held.load(ordering: .relaxed) }

    /// The batch entered the pipeline now.
    func entered(_ batch: borrowing [Envelope]) {
        let traced = Self.tracedSequences(batch)
        guard !traced.isEmpty else { return }
        let now = Duration.sinceEpochNanoseconds
        let refused = book.withLock { b in
            let room = max(0, capacity - b.entries.count)
            let noted = traced.count <= room ? traced : Array(traced.prefix(room))
            let route = Route(entered: now, sequences: noted)
            b.add(route)
            b.entries.reserveCapacity(b.entries.count + noted.count)
            var left = noted.count
            for i in batch.indices where left > 0 {
                guard let trace = batch[i].request.trace else { continue }
                b.entries[batch[i].sequence] = Entry(trace: trace, lane: batch[i].request.effectiveLane, route: route)
                left -= 1
            }
            held.store(b.entries.count, ordering: .relaxed)
            return traced.count - noted.count
        }
        if refused > 0 { lost.add(refused, ordering: .relaxed) }
    }

    /// Whether any passage is in flight (else a batch need not be looked at).
    package var isEmpty: Bool { held.load(ordering: .relaxed) == 0 }

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
        guard let first = batch.firstIndex(where: { $0.request.trace != nil }) else { return }
        book.withLock { b in
            if let route = b.entries[batch[first].sequence]?.route, route.departed == 0, Self.holdsExactly(route.sequences, batch, from: first) {
                change(route)
                return
            }
            let traced = Self.tracedSequences(batch)
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
                // A route none has left yet changes in place; one that some have left is left as
                // it is (their passages read it) and the rest go on a fork.
                if route.departed == 0 && sequences.count == route.members {
                    change(route)
                    continue
                }
                let fork = Route(entered: route.entered, steps: route.steps, handed: route.handed, sequences: sequences)
                change(fork)
                b.add(fork)
                for q in sequences { b.entries[q]?.route = fork }
                b.depart(sequences.count, from: route)
            }
        }
    }

    /// Whether the batch's traced requests, from index `first` (the first traced one), are
    /// exactly `sequences`, in order.
    static func holdsExactly(_ sequences: [UInt64], _ batch: borrowing [Envelope], from first: Int) -> Bool {
        var k = 0
        for i in first..<batch.count where batch[i].request.trace != nil {
            guard k < sequences.count, sequences[k] == batch[i].sequence else { return false }
            k += 1
        }
        return k == sequences.count
    }

    static func tracedSequences(_ batch: borrowing [Envelope]) -> [UInt64] {
        var out: [UInt64] = []
        for i in batch.indices where batch[i].request.trace != nil { out.append(batch[i].sequence) }
        return out
    }

    /// The passages of the requests these outcomes end (removed from the book), with their records.
    public func take(_ records: [OutcomeRecord]) -> [(record: OutcomeRecord, passage: Passage)] {
        passages(of: records).map { (records[$0.index], $0.passage) }
    }

    /// The passages of the requests these outcomes end (removed from the book), each with its
    /// record's place in `records` (the records are not copied); `now`: their end (when their
    /// outcomes came), this moment unless given.
    public func passages(of records: [OutcomeRecord], at now: Int64? = nil) -> [(index: Int, passage: Passage)] {
        guard !isEmpty else { return [] }
        let now = now ?? Duration.sinceEpochNanoseconds
        return book.withLock { b in
            var out: [(index: Int, passage: Passage)] = []
            out.reserveCapacity(min(records.count, b.entries.count))
            for i in records.indices {
                guard let entry = b.entries.removeValue(forKey: records[i].sequence) else { continue }
                out.append((i, Passage(trace: entry.trace, lane: entry.lane, route: entry.route, ended: now)))
                b.depart(1, from: entry.route)
            }
            held.store(b.entries.count, ordering: .relaxed)
            return out
        }
    }
}
