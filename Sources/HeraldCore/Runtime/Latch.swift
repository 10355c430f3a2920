import Synchronization

/// A one-way signal that tasks can wait for: once ``open()`` is called,
/// every ``wait()``, past and future, returns. What a service's `run()` waits
/// on until it is told to stop (a graceful shutdown, `close()`, cancellation).
package final class Latch: Sendable {
    struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    let state = Mutex(State())

    package init() {}

    package var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Opens the latch: every waiter returns.
    package func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.isOpen = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Returns once the latch is open. Cancelling the waiting task opens it
    /// (a service's `run()` cancelled stops as if told to).
    package func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.isOpen || Task.isCancelled { return true }
                    s.waiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            open()
        }
    }
}
