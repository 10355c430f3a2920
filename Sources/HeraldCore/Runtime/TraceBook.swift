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
/// A traced request has no entry of its own: its route holds it (sequence, trace, lane), and an
/// outcome finds it on the route it was last found on, else on the routes of its block of
/// sequence numbers: no hashing per request in the common case, where outcomes come a batch
/// at a time.
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
            self.init(trace: trace, lane: lane, route: Route(entered: entered, steps: steps, handed: handed, members: []), ended: ended)
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

    /// The way a group of traced requests went together: when they entered, each stage's work,
    /// when the transport took them; and the requests themselves (their sequence numbers, traces
    /// and lanes), so that a request is found by its route, not by an entry of its own. Shared,
    /// so that a stage's work on a batch is noted once, not once per request. Changed only under
    /// the book's lock, and its way (steps, handed) only while none of its requests has left it
    /// (taken or forked): from then on that is read without the lock (a ``Passage``'s steps; an
    /// exporter writing its spans once for all of its requests).
    package final class Route: @unchecked Sendable {
        package let entered: Int64
        package fileprivate(set) var steps: [Step]
        package fileprivate(set) var handed: Int64?
        /// The requests put on this route, ascending.
        let sequences: [UInt64]
        /// Their traces and lanes, member by member; one of each when all share it (a POST's
        /// requests share the POST's trace).
        let traces: [NotificationTrace]
        let lanes: [Lane]
        /// Members since gone (decided, or forked onto a route of their own), and how many.
        @exclusivity(unchecked) var gone: [Bool]
        @exclusivity(unchecked) var departed = 0
        /// The sequences are `first, first + 1, …` (a member is found by subtraction).
        let contiguous: Bool
        /// Requests in flight on this route.
        var members: Int { sequences.count - departed }

        init(entered: Int64, steps: [Step] = [], handed: Int64? = nil, members: [Member]) {
            self.entered = entered
            self.steps = steps
            self.handed = handed
            var members = members
            if !members.indices.dropFirst().allSatisfy({ members[$0 - 1].sequence < members[$0].sequence }) {
                members.sort { $0.sequence < $1.sequence }
            }
            let sequences = members.map(\.sequence)
            self.sequences = sequences
            let trace = members.first?.trace
            traces = members.allSatisfy { $0.trace == trace } ? (trace.map { [$0] } ?? []) : members.map(\.trace)
            let lane = members.first?.lane
            lanes = members.allSatisfy { $0.lane == lane } ? (lane.map { [$0] } ?? []) : members.map(\.lane)
            gone = Array(repeating: false, count: members.count)
            contiguous = sequences.last.map { $0 &- sequences[0] == UInt64(sequences.count - 1) } ?? true
        }

        /// Where request `sequence` is among the members, if it is one still on this route.
        func member(_ sequence: UInt64) -> Int? {
            guard let first = sequences.first, sequence >= first, sequence <= sequences[sequences.count - 1] else { return nil }
            var k: Int
            if contiguous {
                k = Int(sequence - first)
            } else {
                var (low, high) = (0, sequences.count)
                while low < high {
                    let mid = (low + high) / 2
                    if sequences[mid] < sequence { low = mid + 1 } else { high = mid }
                }
                guard low < sequences.count, sequences[low] == sequence else { return nil }
                k = low
            }
            return gone[k] ? nil : k
        }

        package func trace(_ k: Int) -> NotificationTrace { traces.count == 1 ? traces[0] : traces[k] }
        package func lane(_ k: Int) -> Lane { lanes.count == 1 ? lanes[0] : lanes[k] }
        func memberInfo(_ k: Int) -> Member { Member(sequence: sequences[k], trace: trace(k), lane: lane(k)) }
    }

    /// A traced request as a route holds it.
    struct Member {
        let sequence: UInt64
        let trace: NotificationTrace
        let lane: Lane
    }

    struct Book {
        /// Every route with a request in the book: what keeps them alive.
        var routes: [ObjectIdentifier: Route] = [:]
        /// The routes holding requests numbered in each block of 64 sequence numbers: where a
        /// request's route is looked for when it is not the last one found.
        var blocks: [UInt64: [Route]] = [:]
        /// Requests in flight, all routes together.
        var live = 0
        /// The route a request was last found on (a batch's outcomes mostly share one). Cleared
        /// when the route is let go.
        unowned(unsafe) var hint: Route?

        static let blockShift: UInt64 = 6

        /// The blocks `route`'s members are in, each once.
        static func blocks(of route: Route) -> [UInt64] {
            var out: [UInt64] = []
            for q in route.sequences where out.last != q >> blockShift { out.append(q >> blockShift) }
            return out
        }

        mutating func add(_ route: Route) {
            guard route.members > 0 else { return }
            routes[ObjectIdentifier(route)] = route
            for block in Self.blocks(of: route) { blocks[block, default: []].append(route) }
            live += route.members
        }

        /// `count` of `route`'s requests left it; once none is left the book lets it go (a
        /// passage that has it keeps it).
        mutating func depart(_ count: Int, from route: Route) {
            route.departed += count
            live -= count
            guard route.members <= 0 else { return }
            routes.removeValue(forKey: ObjectIdentifier(route))
            for block in Self.blocks(of: route) {
                blocks[block]?.removeAll { $0 === route }
                if blocks[block]?.isEmpty == true { blocks.removeValue(forKey: block) }
            }
            if hint === route { hint = nil }
        }

        /// The route request `sequence` is on, and where among its members; nil when not in the book.
        mutating func find(_ sequence: UInt64) -> (route: Route, member: Int)? {
            if let hint, let k = hint.member(sequence) { return (hint, k) }
            guard let candidates = blocks[sequence >> Self.blockShift] else { return nil }
            for route in candidates {
                if let k = route.member(sequence) {
                    hint = route
                    return (route, k)
                }
            }
            return nil
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

    /// The batch entered the pipeline now: its traced requests go on one route (made before the
    /// lock is taken; no entry per request).
    func entered(_ batch: borrowing [Envelope]) {
        var members: [Member] = []
        for i in batch.indices {
            guard let trace = batch[i].request.trace else { continue }
            if members.isEmpty { members.reserveCapacity(batch.count - i) }
            members.append(Member(sequence: batch[i].sequence, trace: trace, lane: batch[i].request.effectiveLane))
        }
        guard !members.isEmpty else { return }
        let now = Duration.sinceEpochNanoseconds
        var route = Route(entered: now, members: members)
        let refused = book.withLock { b in
            let room = max(0, capacity - b.live)
            if members.count > room {
                route = Route(entered: now, members: Array(members.prefix(room)))
            }
            b.add(route)
            held.store(b.live, ordering: .relaxed)
            return members.count - route.sequences.count
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
            if let (route, _) = b.find(batch[first].sequence), route.departed == 0, Self.holdsExactly(route.sequences, batch, from: first) {
                change(route)
                return
            }
            // The routes met, each with its members here (a batch mostly has one).
            var routes: [(route: Route, members: [Int])] = []
            for i in first..<batch.count where batch[i].request.trace != nil {
                guard let (route, k) = b.find(batch[i].sequence) else { continue }
                if let at = routes.firstIndex(where: { $0.route === route }) {
                    routes[at].members.append(k)
                } else {
                    routes.append((route, [k]))
                }
            }
            for (route, members) in routes {
                // A route none has left yet changes in place; one that some have left is left as
                // it is (their passages read it) and the rest go on a fork.
                if route.departed == 0 && members.count == route.members {
                    change(route)
                    continue
                }
                let fork = Route(entered: route.entered, steps: route.steps, handed: route.handed, members: members.map(route.memberInfo))
                change(fork)
                for k in members { route.gone[k] = true }
                b.add(fork)
                b.depart(members.count, from: route)
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

    /// The passages of the requests these outcomes end (removed from the book), with their records.
    public func take(_ records: [OutcomeRecord]) -> [(record: OutcomeRecord, passage: Passage)] {
        passages(of: records).map { (records[$0.index], $0.passage) }
    }

    /// The passages of the requests these outcomes end (removed from the book), each with its
    /// record's place in `records` (the records are not copied); `now`: their end (when their
    /// outcomes came), this moment unless given.
    public func passages(of records: [OutcomeRecord], at now: Int64? = nil) -> [(index: Int, passage: Passage)] {
        var out: [(index: Int, passage: Passage)] = []
        records.withUnsafeBufferPointer { passages(of: $0, at: now, into: &out) }
        return out
    }

    /// ``passages(of:at:)`` into `out` (emptied first, its room kept), the records read where they are.
    package func passages(of records: UnsafeBufferPointer<OutcomeRecord>, at now: Int64? = nil, into out: inout [(index: Int, passage: Passage)]) {
        out.removeAll(keepingCapacity: true)
        guard !isEmpty else { return }
        let now = now ?? Duration.sinceEpochNanoseconds
        out.reserveCapacity(records.count)
        remove(records) { i, route, k in
            out.append((i, Passage(trace: route.trace(k), lane: route.lane(k), route: route, ended: now)))
        }
    }

    /// A request taken from the book as an exporter's encoder takes it: where its record is, its
    /// route (not counted: ``take(_:into:keeping:)`` keeps each route met alive) and its place
    /// among the route's members (its trace and lane).
    package struct Taken {
        package let index: Int
        package let route: Unmanaged<Route>
        package let member: Int
    }

    /// ``passages(of:at:)`` without a ``Passage`` each: the requests these outcomes end, removed
    /// from the book, into `out` (emptied first, its room kept), and each route they were on once
    /// into `routes` (which keeps them alive while `out` is read; emptied first too). A
    /// passage counts its route once; a taken request, never.
    package func take(_ records: UnsafeBufferPointer<OutcomeRecord>, into out: inout [Taken], keeping routes: inout [Route]) {
        out.removeAll(keepingCapacity: true)
        routes.removeAll(keepingCapacity: true)
        guard !isEmpty else { return }
        out.reserveCapacity(records.count)
        remove(records) { i, route, k in
            if routes.last !== route { routes.append(route) }
            out.append(Taken(index: i, route: .passUnretained(route), member: k))
        }
    }

    /// Removes the requests these outcomes end from the book, under its lock, each found handed
    /// to `found` (its record's place, its route, its place there) before its route may be let go.
    private func remove(_ records: UnsafeBufferPointer<OutcomeRecord>, _ found: (Int, Route, Int) -> Void) {
        book.withLock { b in
            for i in records.indices {
                guard let (route, k) = b.find(records[i].sequence) else { continue }
                route.gone[k] = true
                found(i, route, k)
                b.depart(1, from: route)
            }
            held.store(b.live, ordering: .relaxed)
        }
    }
}
