import DequeModule
import Synchronization

/// Carries recorded outcomes from whoever decided them (a stage, a
/// transport's event loop) to the ledger's observers, called by one task of
/// its own in the order the records came. Records pushed and not yet observed
/// are counted: past `bound`, ``waitForRoom()`` suspends (the pipeline's
/// runners call it before handing a batch on), so memory stays bounded by
/// the bound plus what the transport holds in flight.
final class ObserverRelay: Sendable {
    struct State {
        var queue = Deque<[OutcomeRecord]>()
        /// Records pushed and not yet observed.
        var held = 0
        var closed = false
        var drainer: CheckedContinuation<Void, Never>?
        var roomWaiters: [CheckedContinuation<Void, Never>] = []
    }

    let bound: Int
    let state = Mutex(State())

    init(bound: Int) { self.bound = max(1, bound) }

    /// Queues `records` for the observers; `false` once closed (the caller then calls them itself).
    func push(_ records: [OutcomeRecord]) -> Bool {
        let (taken, drainer) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
            if s.closed { return (false, nil) }
            s.queue.append(records)
            s.held += records.count
            defer { s.drainer = nil }
            return (true, s.drainer)
        }
        drainer?.resume()
        return taken
    }

    /// Returns once the records not yet observed are within the bound (or the relay is closed).
    func waitForRoom() async {
        if state.withLock({ $0.held <= bound || $0.closed }) { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.held <= bound || s.closed { return true }
                s.roomWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// No more pushes: ``run(_:)`` delivers what is queued, then returns.
    func close() {
        let (drainer, waiters) = state.withLock { s in
            s.closed = true
            defer {
                s.drainer = nil
                s.roomWaiters = []
            }
            return (s.drainer, s.roomWaiters)
        }
        drainer?.resume()
        for w in waiters { w.resume() }
    }

    /// Calls `observers()` with each queued batch of records, in order, until closed and empty.
    func run(_ observers: @Sendable () -> [any OutcomeObserver]) async {
        while true {
            let next: [OutcomeRecord]?? = state.withLock { s in
                if let first = s.queue.popFirst() { return .some(first) }
                return s.closed ? .some(nil) : nil
            }
            switch next {
            case .some(.some(let records)):
                for o in observers() { o.observe(records) }
                let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    s.held -= records.count
                    guard s.held <= bound else { return [] }
                    defer { s.roomWaiters = [] }
                    return s.roomWaiters
                }
                for w in waiters { w.resume() }
            case .some(.none):
                return
            case .none:
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { s -> Bool in
                        if !s.queue.isEmpty || s.closed { return true }
                        s.drainer = c
                        return false
                    }
                    if now { c.resume() }
                }
            }
        }
    }
}
