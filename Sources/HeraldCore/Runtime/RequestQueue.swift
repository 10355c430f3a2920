import DequeModule
import Synchronization

/// The in-memory queue in front of a long-running pipeline (`herald serve`'s
/// intake, `HeraldClient`'s): requests are numbered as they are queued, from
/// 0, and the numbers are the pipeline's sequence numbers (its ``source``
/// emits each request under its number). They wait in two lanes
/// (``LaneQueue``: the fast lane first, the bulk lane's minimum share), so a
/// fast-lane request overtakes a queued campaign; a batch is queued whole or
/// refused whole.
package final class RequestQueue: Sendable {
    /// A request with its number, in its lane.
    package struct Queued: LaneCarrying, Sendable {
        package var sequence: UInt64
        package var request: NotificationRequest
        package var lane: Lane
    }
    struct State {
        var queue = LaneQueue<Queued>()
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

    package init() {}

    /// Sets the bulk window (`nil` or 0: none).
    package func setBulkWindow(_ window: Int?) { self.window.store(max(0, window ?? 0), ordering: .relaxed) }

    package var bulkWindow: Int? {
        let w = window.load(ordering: .relaxed)
        return w == 0 ? nil : w
    }

    /// Queues `requests` unless closed or `refuse(depth)` (the requests already
    /// queued) says why not. `numbered` sees their numbers before the source can
    /// take them (a caller registers what waits for their outcomes there).
    package func enqueue(
        _ requests: [NotificationRequest], refuse: (Int) -> IntakeRefusal? = { _ in nil }, numbered: (Range<UInt64>) -> Void = { _ in }
    ) -> Result<Range<UInt64>, IntakeRefusal> {
        let (result, taker): (Result<Range<UInt64>, IntakeRefusal>, UnsafeContinuation<Void, Never>?) = state.withLock { s in
            if s.closed { return (.failure(.closed), nil) }
            if let refusal = refuse(s.queue.count) { return (.failure(refusal), nil) }
            let numbers = s.next..<(s.next + UInt64(requests.count))
            numbered(numbers)
            for (q, r) in zip(numbers, requests) { s.queue.append(Queued(sequence: q, request: r, lane: r.effectiveLane)) }
            s.next = numbers.upperBound
            defer { s.taker = nil }
            return (.success(numbers), s.taker)
        }
        taker?.resume()
        return result
    }

    /// Numbers given so far (the next one).
    package var issued: UInt64 { state.withLock { $0.next } }
    /// Requests waiting for the source.
    package var depth: Int { state.withLock { $0.queue.count } }
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
    /// it) into `ledger` as failed with `reason`, under its numbers. Returns how many.
    @discardableResult
    package func failQueued(_ ledger: OutcomeLedger, reason: OutcomeReason) -> Int {
        let left = state.withLock { $0.queue.removeAll() }
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
            case waitForAny
            case waitForFast
        }
        while true {
            let next: Next = state.withLock { s in
                if s.queue.isEmpty { return s.closed ? .end : .waitForAny }
                let out = s.queue.take(max: max, bulk: bulk)
                return out.isEmpty ? .waitForFast : .taken(out)
            }
            switch next {
            case .taken(let out): return out
            case .end: return nil
            case .waitForAny: await waitForRequest(timeout: nil)
            case .waitForFast:
                await waitForRequest(timeout: wait)
                return []
            }
        }
    }

    /// Waits until a request is queued (with `timeout`: a fast-lane one, or `timeout` passes) or
    /// the queue closes.
    func waitForRequest(timeout: Duration?) async {
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
                if s.poked || (timeout == nil ? (s.closed || !s.queue.isEmpty) : s.queue.hasFast) {
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
                for q in batch { await sink.emit(q.request, sequence: q.sequence) }
                if batch.isEmpty || queue.depth == 0 { await sink.flush() }
            }
        }
    }
}
