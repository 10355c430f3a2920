import Synchronization

/// Limits how many notifications a transport holds, over all its connections:
/// `send` waits here while the connections are behind (the gateway and HTTP/2 transports).
package final class FlowGate: Sendable {
    struct State {
        var count = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Opened for good at shutdown: nobody waits any more.
        var open = false
    }
    let state = Mutex(State())
    let limit: Int
    package init(limit: Int) { self.limit = max(1, limit) }

    /// Waits until fewer than `limit` are queued, then counts `n` more.
    package func acquire(_ n: Int) async {
        while true {
            let admitted = state.withLock { s -> Bool in
                guard s.open || s.count < limit else { return false }
                s.count += n
                return true
            }
            if admitted { return }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.open || s.count < limit { return true }
                    s.waiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        }
    }

    package func add(_ n: Int) { state.withLock { $0.count += n } }
    /// Notifications held now (queued or in flight).
    package var held: Int { state.withLock { $0.count } }

    /// Lets everyone through, now and from now on.
    package func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    package func remove(_ n: Int) {
        guard n > 0 else { return }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.count -= n
            guard s.count < limit, !s.waiters.isEmpty else { return [] }
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}
