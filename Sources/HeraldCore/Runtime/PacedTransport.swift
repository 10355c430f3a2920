import Synchronization

/// A transport behind a ``Pacer`` (the `pacing` key of a `transport` section, an app's
/// included): notifications go to `inner` no faster than its rules allow; the rest wait here,
/// and a task of its own sends each at its time. What waits counts as sent by the pipeline
/// (it has no outcome yet), so an intake's window and `maxHeld` bound it: `send` waits while
/// `maxHeld` notifications are held. `finish` waits for every held one to go, at its pace.
public final class PacedTransport: Transport, LaneWindowing, TransportHealthReporting, TransportReporting, Sendable {
    public let inner: any Transport
    let pacer: Mutex<Pacer>
    /// One `inner.send` at a time (the pipeline's and the release task's).
    let turn = FlowGate(limit: 1)
    /// Notifications held at most before `send` waits.
    let maxHeld: Int
    struct Run {
        var ledger: OutcomeLedger?
        var task: Task<Void, Never>?
        var wake: AsyncStream<Void>.Continuation?
        var abandoned: String?
    }
    let run = Mutex(Run())

    package init(_ inner: any Transport, rules: Pacer.Rules, maxHeld: Int = 100_000) {
        self.inner = inner
        pacer = Mutex(Pacer(rules: rules))
        self.maxHeld = max(1, maxHeld)
    }

    public var bulkWindow: Int { (inner as? any LaneWindowing)?.bulkWindow ?? 0 }
    public var health: TransportHealth { (inner as? any TransportHealthReporting)?.health ?? .ready }
    public var counters: [(name: String, value: Int)] {
        get async {
            let (rate, token, collapsed) = pacer.withLock { ($0.heldForRate, $0.heldForToken, $0.collapsedCount) }
            return (await (inner as? any TransportReporting)?.counters ?? [])
                + [("paced_by_rate", rate), ("paced_by_token", token), ("collapsed", collapsed)]
        }
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let out = pacer.withLock { $0.offer(batch, now: .now) }
        record(out.collapsed, outcomes)
        if !out.send.isEmpty { try await sendInner(out.send, outcomes) }
        if pacer.withLock({ $0.held }) > 0 { startReleasing(outcomes) }
        while pacer.withLock({ $0.held }) >= maxHeld, run.withLock({ $0.abandoned == nil }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    public func finish(outcomes: OutcomeLedger) async {
        // What waits goes at its pace; then the inner transport finishes.
        while pacer.withLock({ $0.held }) > 0, run.withLock({ $0.abandoned == nil }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let task = run.withLock { r -> Task<Void, Never>? in
            r.wake?.finish()
            return r.task
        }
        await task?.value
        await inner.finish(outcomes: outcomes)
    }

    public func shutdownRequested() { inner.shutdownRequested() }

    public func abandon(_ reason: String) {
        let (ledger, wake) = run.withLock { r in
            r.abandoned = reason
            return (r.ledger, r.wake)
        }
        let left = pacer.withLock { $0.removeAll() }
        if let ledger, !left.isEmpty { ledger.record(left.records(.failed(OutcomeReason(.abandoned, reason)))) }
        wake?.finish()
        inner.abandon(reason)
    }

    func sendInner(_ batch: [Envelope], _ outcomes: OutcomeLedger) async throws {
        await turn.acquire(1)
        defer { turn.remove(1) }
        try await inner.send(batch, outcomes: outcomes)
    }

    func record(_ collapsed: [Envelope], _ outcomes: OutcomeLedger) {
        guard !collapsed.isEmpty else { return }
        outcomes.record(collapsed.records(.dropped(OutcomeReason(
            .collapsed, "collapsed: a newer notification to the same device token with the same collapse-id replaced it while it waited for the token's pace"))))
    }

    /// The task that sends held notifications at their time (started once, on the first held one).
    func startReleasing(_ outcomes: OutcomeLedger) {
        let wake = run.withLock { r -> AsyncStream<Void>.Continuation? in
            if let w = r.wake { return w }
            guard r.abandoned == nil else { return nil }
            let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            r.ledger = outcomes
            r.wake = continuation
            r.task = Task { [self] in await release(stream, outcomes) }
            return nil
        }
        wake?.yield()
    }

    func release(_ wakes: AsyncStream<Void>, _ outcomes: OutcomeLedger) async {
        var iterator = wakes.makeAsyncIterator()
        while run.withLock({ $0.abandoned == nil }) {
            let (out, next) = pacer.withLock { $0.release(now: .now) }
            record(out.collapsed, outcomes)
            if !out.send.isEmpty {
                do { try await sendInner(out.send, outcomes) } catch {
                    outcomes.record(out.send.records(.failed(OutcomeReason(.internalFailure, "the transport failed on a paced batch: \(error)"))))
                }
            }
            if let next {
                // Until the next turn (a new held notification may come sooner: looked at then).
                let wait = next - .now
                if wait > .zero { try? await Task.sleep(for: min(wait, .milliseconds(250))) }
            } else if await iterator.next() == nil, pacer.withLock({ $0.held }) == 0 {
                return
            }
        }
    }
}
