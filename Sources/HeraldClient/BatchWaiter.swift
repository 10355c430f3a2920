import HeraldCore
import Synchronization

/// One `send(_:)` of many requests waiting for all their outcomes, filled
/// in any order, resumed once the last arrives (or at once if cancelled:
/// the notifications go on without it).
final class BatchWaiter: Sendable {
    struct State {
        var outcomes: [SendOutcome?]
        var left: Int
        var continuation: UnsafeContinuation<[SendOutcome], any Error>?
        var cancelled = false
    }
    let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(outcomes: Array(repeating: nil, count: count), left: count))
    }

    /// Sets the continuation; resumes at once if everything (or the cancellation) came first.
    func wait(_ c: UnsafeContinuation<[SendOutcome], any Error>) {
        let now = state.withLock { s -> Result<[SendOutcome], any Error>? in
            if s.cancelled { return .failure(CancellationError()) }
            if s.left == 0 { return .success(s.outcomes.map { $0! }) }
            s.continuation = c
            return nil
        }
        if let now { c.resume(with: now) }
    }

    func fill(_ index: Int, _ outcome: SendOutcome) {
        let done = state.withLock { s -> (UnsafeContinuation<[SendOutcome], any Error>, [SendOutcome])? in
            guard !s.cancelled, s.outcomes[index] == nil else { return nil }
            s.outcomes[index] = outcome
            s.left -= 1
            guard s.left == 0, let c = s.continuation else { return nil }
            s.continuation = nil
            return (c, s.outcomes.map { $0! })
        }
        if let (c, outcomes) = done { c.resume(returning: outcomes) }
    }

    func cancel() {
        let c = state.withLock { s -> UnsafeContinuation<[SendOutcome], any Error>? in
            guard !s.cancelled, s.left > 0 else { return nil }
            s.cancelled = true
            defer { s.continuation = nil }
            return s.continuation
        }
        c?.resume(throwing: CancellationError())
    }
}
