import DequeModule
import HeraldCore
import Synchronization

/// The bounded queue between the HTTP API and the pipeline. A batch is taken
/// whole or refused whole (``IntakeRefusal``), so every request either got an
/// id or a refusal. Ids are consecutive from 0 and equal the pipeline's
/// sequence numbers: the source emits every queued request, in order.
public final class ServiceIntake: Sendable {
    struct State {
        var queue = Deque<NotificationRequest>()
        var nextID: UInt64 = 0
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    let state = Mutex(State())
    public let capacity: Int

    public init(capacity: Int) { self.capacity = capacity }

    /// Queues `requests`; their ids are the returned range.
    public func submit(_ requests: [NotificationRequest]) -> Result<Range<UInt64>, IntakeRefusal> {
        let (result, waiter): (Result<Range<UInt64>, IntakeRefusal>, CheckedContinuation<Void, Never>?) = state.withLock { s in
            if s.closed { return (.failure(.closed), nil) }
            if requests.count > capacity { return (.failure(.tooLarge(capacity: capacity)), nil) }
            if s.queue.count + requests.count > capacity { return (.failure(.full), nil) }
            let first = s.nextID
            s.queue.append(contentsOf: requests)
            s.nextID += UInt64(requests.count)
            let w = s.waiter
            s.waiter = nil
            return (.success(first..<s.nextID), w)
        }
        waiter?.resume()
        return result
    }

    /// Ids handed out so far (the next id).
    public var issued: UInt64 { state.withLock { $0.nextID } }
    /// Requests waiting for the pipeline.
    public var depth: Int { state.withLock { $0.queue.count } }
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// No more requests: what is queued still goes through.
    public func close() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.closed = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Empties the queue: what is left, with the ids it was given.
    func drain() -> [(UInt64, NotificationRequest)] {
        state.withLock { s in
            let first = s.nextID - UInt64(s.queue.count)
            defer { s.queue.removeAll() }
            return s.queue.enumerated().map { (first + UInt64($0.offset), $0.element) }
        }
    }

    /// Up to `max` queued requests, waiting for some; `nil` once closed and empty.
    func take(max: Int) async -> [NotificationRequest]? {
        while true {
            let taken: [NotificationRequest]? = state.withLock { s in
                guard !s.queue.isEmpty else { return s.closed ? [] : nil }
                let n = Swift.min(max, s.queue.count)
                defer { s.queue.removeFirst(n) }
                return Array(s.queue.prefix(n))
            }
            if let taken { return taken.isEmpty ? nil : taken }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if !s.queue.isEmpty || s.closed { return true }
                    s.waiter = c
                    return false
                }
                if resumeNow { c.resume() }
            }
        }
    }
}

/// The intake as the pipeline's source: emits queued requests in order, and
/// flushes whenever the queue runs dry, so a lone request is not held back.
public struct IntakeSource: NotificationSource {
    public let intake: ServiceIntake
    public init(intake: ServiceIntake) { self.intake = intake }

    public func produce(into sink: SourceSink) async throws {
        // A graceful stop closes the intake: what is queued drains. The pipeline stopping (a
        // second signal abandons it) ends the source at once: what is left stays queued, and
        // the service records it failed, without pushing it through the pipeline.
        while !sink.isStopping, let batch = await intake.take(max: 512) {
            for r in batch { await sink.emit(r) }
            if intake.depth == 0 { await sink.flush() }
        }
    }
}
