import DequeModule
import Synchronization

/// The in-memory queue in front of a long-running pipeline (`herald serve`'s
/// intake, `HeraldClient`'s): requests are numbered as they are queued, from
/// 0, and the numbers are the pipeline's sequence numbers, since its
/// ``source`` emits every queued request, in order. A batch is queued whole or
/// refused whole.
package final class RequestQueue: Sendable {
    struct State {
        var queue = Deque<NotificationRequest>()
        var next: UInt64 = 0
        var closed = false
        /// The source, waiting for requests.
        var taker: UnsafeContinuation<Void, Never>?
    }
    let state = Mutex(State())

    package init() {}

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
            s.queue.append(contentsOf: requests)
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
        let left = state.withLock { s in
            let first = s.next - UInt64(s.queue.count)
            defer { s.queue.removeAll() }
            return s.queue.enumerated().map { (first + UInt64($0.offset), $0.element) }
        }
        guard !left.isEmpty else { return 0 }
        ledger.enter(left.map(\.0), count: left.count)
        ledger.record(left.map { q, r in OutcomeRecord(sequence: q, line: nil, id: r.id, token: r.token, outcome: .failed(reason)) })
        return left.count
    }

    /// Up to `max` queued requests, waiting for some; `nil` once closed and empty.
    package func take(max: Int) async -> [NotificationRequest]? {
        while true {
            let taken: [NotificationRequest]? = state.withLock { s in
                guard !s.queue.isEmpty else { return s.closed ? [] : nil }
                let n = Swift.min(max, s.queue.count)
                defer { s.queue.removeFirst(n) }
                return Array(s.queue.prefix(n))
            }
            if let taken { return taken.isEmpty ? nil : taken }
            await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if !s.queue.isEmpty || s.closed { return true }
                    s.taker = c
                    return false
                }
                if now { c.resume() }
            }
        }
    }

    /// The queue as a pipeline's source.
    package var source: Source { Source(queue: self) }

    /// Emits queued requests in order, and flushes whenever the queue runs dry,
    /// so a lone request is not held back waiting for a full batch. The
    /// pipeline stopping (a second signal abandons it) ends it at once: what is
    /// left stays queued, for its owner to record (``failQueued(_:reason:)``).
    package struct Source: NotificationSource {
        let queue: RequestQueue
        package func produce(into sink: SourceSink) async throws {
            while !sink.isStopping, let batch = await queue.take(max: 512) {
                for r in batch { await sink.emit(r) }
                if queue.depth == 0 { await sink.flush() }
            }
        }
    }
}
