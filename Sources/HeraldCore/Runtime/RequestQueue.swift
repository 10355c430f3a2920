import DequeModule
import HeapModule
import Synchronization

/// The in-memory queue in front of a long-running pipeline (`herald serve`'s
/// intake, `HeraldClient`'s): requests are numbered as they are queued, from
/// 0, and the numbers are the pipeline's sequence numbers (its ``source``
/// emits each request under its number). They wait in two lanes
/// (``LaneQueue``: the fast lane first, the bulk lane's minimum share), so a
/// fast-lane request overtakes a queued campaign; a batch is queued whole or
/// refused whole. A request with a `send-at` to come is numbered as it is
/// queued too, but held apart (at most `scheduleCapacity`) until its time,
/// then joins its lane; until then it can be cancelled.
package final class RequestQueue: Sendable {
    /// A request with its number, in its lane.
    package struct Queued: LaneCarrying, Sendable {
        package var sequence: UInt64
        package var request: NotificationRequest
        package var lane: Lane
        /// When it began to wait for the source (epoch milliseconds): queued, or its `send-at` come.
        package var waitingSince: Int64
    }
    /// A scheduled request's time and number (ordered by time, then number).
    struct Due: Comparable {
        var at: Int64
        var sequence: UInt64
        static func < (a: Due, b: Due) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    }
    struct State {
        var queue = LaneQueue<Queued>()
        /// Requests whose `send-at` is to come, by number; their times in `due` (a time whose
        /// number is gone from here was cancelled).
        var scheduled: [UInt64: Queued] = [:]
        var due = Heap<Due>()
        var next: UInt64 = 0
        var closed = false
        /// The source, waiting for requests.
        var taker: UnsafeContinuation<Void, Never>?
        /// A wait's timer fired before the wait began: the wait returns at once.
        var poked = false
    }
    let state = Mutex(State())
    /// Bulk-lane requests the source lets into the pipeline only while fewer than this many are in
    /// it (entered, no outcome yet): the rest of a campaign waits here, where the fast lane overtakes
    /// it, not in the stages' buffers ahead of it. 0: no limit (the default; its owner sets the
    /// transport's ``LaneWindowing/bulkWindow`` once the pipeline is built).
    let window = Atomic<Int>(0)
    /// Scheduled requests held at most.
    package let scheduleCapacity: Int
    /// The wall clock, in milliseconds since the epoch (what `send-at` counts).
    package let now: @Sendable () -> Int64

    package init(scheduleCapacity: Int = 100_000, now: @escaping @Sendable () -> Int64 = { Duration.sinceEpochMilliseconds }) {
        self.scheduleCapacity = scheduleCapacity
        self.now = now
    }

    /// Sets the bulk window (`nil` or 0: none).
    package func setBulkWindow(_ window: Int?) { self.window.store(max(0, window ?? 0), ordering: .relaxed) }

    package var bulkWindow: Int? {
        let w = window.load(ordering: .relaxed)
        return w == 0 ? nil : w
    }

    /// Queues `requests` unless closed or `refuse(depth)` (the requests already
    /// queued) says why not. `numbered` sees their numbers before the source can
    /// take them (a caller registers what waits for their outcomes there).
    /// Requests whose `send-at` is to come are held until then; a batch that
    /// would hold more than `scheduleCapacity` is refused.
    package func enqueue(
        _ requests: [NotificationRequest], refuse: (Int) -> IntakeRefusal? = { _ in nil }, numbered: (Range<UInt64>) -> Void = { _ in }
    ) -> Result<Range<UInt64>, IntakeRefusal> {
        let now = now()
        let later = requests.reduce(0) { $0 + (($1.sendAt ?? .min) > now ? 1 : 0) }
        let (result, taker): (Result<Range<UInt64>, IntakeRefusal>, UnsafeContinuation<Void, Never>?) = state.withLock { s in
            if s.closed { return (.failure(.closed), nil) }
            if let refusal = refuse(s.queue.count) { return (.failure(refusal), nil) }
            if later > 0, s.scheduled.count + later > scheduleCapacity { return (.failure(.scheduleFull(capacity: scheduleCapacity)), nil) }
            let numbers = s.next..<(s.next + UInt64(requests.count))
            numbered(numbers)
            for (q, r) in zip(numbers, requests) {
                let queued = Queued(sequence: q, request: r, lane: r.effectiveLane, waitingSince: now)
                if let at = r.sendAt, at > now {
                    s.scheduled[q] = queued
                    s.due.insert(Due(at: at, sequence: q))
                } else {
                    s.queue.append(queued)
                }
            }
            s.next = numbers.upperBound
            defer { s.taker = nil }
            return (.success(numbers), s.taker)
        }
        taker?.resume()
        return result
    }

    /// Numbers given so far (the next one).
    package var issued: UInt64 { state.withLock { $0.next } }
    /// Requests waiting for the source (scheduled ones once their time has come).
    package var depth: Int { state.withLock { $0.queue.count } }
    /// Since when the longest-waiting request has waited for the source (epoch milliseconds: the
    /// earlier of the two lanes' first requests); nil when none waits.
    package var oldestWaiting: Int64? {
        state.withLock { s in
            let heads = s.queue.heads
            return [heads.fast?.waitingSince, heads.bulk?.waitingSince].compactMap { $0 }.min()
        }
    }
    /// Scheduled requests whose time is to come.
    package var scheduledCount: Int { state.withLock { $0.scheduled.count } }

    /// Takes scheduled request `sequence` back if its time has not come (it is then the caller's
    /// to record, cancelled); nil when it is not held here.
    package func cancel(_ sequence: UInt64) -> Queued? {
        state.withLock { $0.scheduled.removeValue(forKey: sequence) }
    }

    /// ``cancel(_:)``, and records it `cancelled` with `reason` in `ledger`: a scheduled request
    /// never entered the pipeline, so it enters the books now and ends there at once (its
    /// observers, the outcomes file, a waiting caller see it as any other outcome). The record,
    /// or nil when it is not held here (on its way, decided, or unknown).
    package func cancel(_ sequence: UInt64, recordingIn ledger: OutcomeLedger, reason: String) -> OutcomeRecord? {
        guard let q = cancel(sequence) else { return nil }
        let record = Envelope(sequence: q.sequence, request: q.request).record(.cancelled(OutcomeReason(.cancelled, reason)))
        ledger.enter(CollectionOfOne(q.sequence), count: 1)
        ledger.record(record)
        return record
    }

    /// Whether request `sequence` waits for its `send-at`.
    package func isScheduled(_ sequence: UInt64) -> Bool { scheduledSendAt(sequence) != nil }
    /// When request `sequence` is to be sent (epoch milliseconds), while it waits for that time.
    package func scheduledSendAt(_ sequence: UInt64) -> Int64? { state.withLock { $0.scheduled[sequence]?.request.sendAt } }

    /// Moves the scheduled requests whose time has come to their lanes, in time order; the time
    /// of the next one still to come.
    static func release(_ s: inout State, now: Int64) -> Int64? {
        while let first = s.due.min {
            guard s.scheduled[first.sequence] != nil else {
                s.due.removeMin()
                continue
            }
            if first.at > now { return first.at }
            s.due.removeMin()
            if var q = s.scheduled.removeValue(forKey: first.sequence) {
                q.waitingSince = first.at
                s.queue.append(q)
            }
        }
        return nil
    }
    package var isClosed: Bool { state.withLock { $0.closed } }

    /// No more requests: what is queued still goes to the source, which then ends.
    package func close() {
        let taker = state.withLock { s -> UnsafeContinuation<Void, Never>? in
            s.closed = true
            defer { s.taker = nil }
            return s.taker
        }
        taker?.resume()
    }

    /// Empties the queue, recording what was left (the pipeline stopped without
    /// it, scheduled requests included) into `ledger` as failed with `reason`,
    /// under its numbers. Returns how many.
    @discardableResult
    package func failQueued(_ ledger: OutcomeLedger, reason: OutcomeReason) -> Int {
        let left = state.withLock { s in
            let held = s.scheduled.values.sorted { $0.sequence < $1.sequence }
            s.scheduled.removeAll()
            s.due = Heap()
            return s.queue.removeAll() + held
        }
        guard !left.isEmpty else { return 0 }
        ledger.enter(left.map(\.sequence), count: left.count)
        ledger.record(left.map { OutcomeRecord(sequence: $0.sequence, line: nil, id: $0.request.id, token: $0.request.token, outcome: .failed(reason)) })
        return left.count
    }

    /// Up to `max` queued requests, at most `bulk` of them from the bulk lane, waiting for some;
    /// `nil` once closed and empty. When only bulk-lane requests wait and `bulk` is 0, waits at most
    /// `wait` for a fast-lane one, and returns `[]` if none came (the caller looks at the bulk
    /// lane's room again).
    package func take(max: Int, bulk: Int = .max, wait: Duration = .milliseconds(1)) async -> [Queued]? {
        enum Next {
            case taken([Queued])
            case end
            case waitForAny(nextDue: Int64?)
            case waitForFast
        }
        while true {
            let now = now()
            let next: Next = state.withLock { s in
                let nextDue = Self.release(&s, now: now)
                if s.queue.isEmpty { return s.closed ? .end : .waitForAny(nextDue: nextDue) }
                let out = s.queue.take(max: max, bulk: bulk)
                return out.isEmpty ? .waitForFast : .taken(out)
            }
            switch next {
            case .taken(let out): return out
            case .end: return nil
            case .waitForAny(let nextDue):
                // Until a request comes, or the next scheduled one's time (a wake-up early or late by
                // a few milliseconds only makes this loop look again).
                await waitForRequest(timeout: nextDue.map { .milliseconds(Swift.max(1, $0 - now)) }, anyRequest: true)
            case .waitForFast:
                await waitForRequest(timeout: wait)
                return []
            }
        }
    }

    /// Waits until a request is queued (with `timeout`: a fast-lane one unless `anyRequest`, or
    /// `timeout` passes) or the queue closes.
    func waitForRequest(timeout: Duration?, anyRequest: Bool = false) async {
        // The timer wakes the wait, or, if it fires before the wait begins, marks it to return at
        // once (so no wake-up is lost). A stale timer (its wait ended meanwhile) may wake a later
        // wait early: that caller looks again.
        let timer = timeout.map { t in
            Task { [self] in
                guard (try? await Task.sleep(for: t)) != nil else { return }
                let taker = state.withLock { s -> UnsafeContinuation<Void, Never>? in
                    guard let c = s.taker else {
                        s.poked = true
                        return nil
                    }
                    s.taker = nil
                    return c
                }
                taker?.resume()
            }
        }
        await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.poked || (timeout == nil || anyRequest ? (s.closed || !s.queue.isEmpty) : s.queue.hasFast) {
                    s.poked = false
                    return true
                }
                s.taker = c
                return false
            }
            if now { c.resume() }
        }
        timer?.cancel()
    }

    /// The queue as a pipeline's source.
    package var source: Source { Source(queue: self) }

    /// Emits queued requests, each under its number, fast lane first, and
    /// flushes whenever it has nothing more to emit now, so a lone request is
    /// not held back waiting for a full batch. Bulk-lane requests enter only
    /// while fewer than ``RequestQueue/bulkWindow`` are in the pipeline (when set). The
    /// pipeline stopping (a second signal abandons it) ends it at once: what is
    /// left stays queued, for its owner to record (``failQueued(_:reason:)``).
    package struct Source: NotificationSource {
        let queue: RequestQueue
        package func produce(into sink: SourceSink) async throws {
            while !sink.isStopping {
                let room = queue.bulkWindow.map { Swift.max(0, $0 - sink.ledger.pending) } ?? .max
                guard let batch = await queue.take(max: 512, bulk: room) else { break }
                let now = queue.now()
                for q in batch {
                    if let expired = q.request.expiredBeforeSending(nowMilliseconds: now) {
                        await sink.emitDropped(q.request, sequence: q.sequence, reason: expired)
                    } else {
                        await sink.emit(q.request, sequence: q.sequence)
                    }
                }
                if batch.isEmpty || queue.depth == 0 { await sink.flush() }
            }
        }
    }
}
