import HeraldBinary
import HeraldCore
import Synchronization

/// The in-memory transport on many cores: several ``SimulatorTransport``s, each
/// with a simulated gateway of its own, working on one batch at once. A device
/// token always goes to the same shard (by its hash), so each device sees one
/// gateway: its state (invalid, uninstalled, offline with a stored
/// notification) and its deliveries are what one simulator would give it.
///
/// Each batch is split by shard and the shards deliver their parts in
/// parallel. ``send(_:outcomes:)`` returns once the batch is handed over (at
/// most `window` batches are in flight; then it waits), so the next batch is
/// not held back by this one's slowest part; each batch's records are
/// recorded together, batches in the order they were sent, records by
/// sequence: what one ``SimulatorTransport`` records for a fault-free run,
/// whatever the number of shards. ``finish(outcomes:)`` returns once every
/// batch is recorded. With faults, each shard runs its own fault plan (the
/// seed plus the shard's number), so what happens depends on the number of shards.
public final class ShardedSimulatorTransport: Transport, TransportReporting {
    public let shards: [SimulatorTransport]
    /// Batches delivered at once.
    public let window: Int
    let gate: FlowGate
    let state = Mutex(State())

    struct State {
        var nextTicket = 0
        var nextToRecord = 0
        /// Delivered batches waiting for the ones before them.
        var ready: [Int: (records: [OutcomeRecord], ledger: OutcomeLedger)] = [:]
        /// Whether a task is recording now (it records what becomes ready meanwhile too).
        var recording = false
        var outstanding = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        /// The ready batches next in order.
        mutating func takeReady() -> [(records: [OutcomeRecord], ledger: OutcomeLedger)] {
            var out: [(records: [OutcomeRecord], ledger: OutcomeLedger)] = []
            while let next = ready.removeValue(forKey: nextToRecord) {
                out.append(next)
                nextToRecord += 1
            }
            return out
        }
    }

    /// `shards` must not be empty; each should have a simulator of its own.
    public init(shards: [SimulatorTransport], window: Int = 4) {
        precondition(!shards.isEmpty, "a sharded simulator transport needs a shard")
        self.shards = shards
        self.window = max(1, window)
        gate = FlowGate(limit: self.window)
    }

    /// The shard a token goes to.
    func shard(of token: DeviceToken) -> Int {
        Int(token.spreadKey % UInt64(shards.count))
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var parts = [[DeliveryItem]](repeating: [], count: shards.count)
        let unframed = DeliveryItem.items(of: batch, unframed: SimulatorTransport.unframed) { item in
            parts[shard(of: item.token)].append(item)
        }
        await gate.acquire(1)
        let ticket = state.withLock { s in
            s.outstanding += 1
            defer { s.nextTicket += 1 }
            return s.nextTicket
        }
        let shards = self.shards
        let handoff = Handoff(consume parts)
        Task {
            // Each part's records are moved, not copied: taken whole when they are all there is
            // so far, else moved onto the end (`+=` copies every record, then frees the part).
            var records = await withTaskGroup(of: [OutcomeRecord].self) { group in
                var parts = handoff.take()
                for s in parts.indices where !parts[s].isEmpty {
                    let shard = shards[s], items = Handoff(parts[s])
                    parts[s] = []
                    group.addTask { await shard.deliver(items.take()) }
                }
                var all: [OutcomeRecord] = []
                for await var part in group {
                    if all.isEmpty { all = part } else { part.removeAllInOrder { all.append($0) } }
                }
                return all
            }
            if !unframed.isEmpty { records += unframed }
            records.sort { $0.sequence < $1.sequence }
            self.delivered(ticket, records, outcomes)
        }
    }

    /// Batch `ticket` is delivered: recorded now if every batch before it is, else once they are.
    /// Whoever finds nobody recording records every batch ready in order, so records never overtake;
    /// whoever finds a recorder leaves its batch to it and returns at once. (It used to go on into
    /// the loop below with nothing to record, take what was ready there and record it beside the
    /// recorder, or clear `recording` under it: in about one `herald send` run in ten on two cores,
    /// a batch's outcome lines came after the next batch's.)
    func delivered(_ ticket: Int, _ records: [OutcomeRecord], _ ledger: OutcomeLedger) {
        guard var next = state.withLock({ s -> [(records: [OutcomeRecord], ledger: OutcomeLedger)]? in
            s.ready[ticket] = (records, ledger)
            guard !s.recording else { return nil }
            s.recording = true
            return s.takeReady()
        }) else { return }
        while true {
            for b in next { b.ledger.record(b.records) }
            gate.remove(next.count)
            let (more, idle) = state.withLock { s -> ([(records: [OutcomeRecord], ledger: OutcomeLedger)], [CheckedContinuation<Void, Never>]) in
                s.outstanding -= next.count
                let more = s.takeReady()
                if more.isEmpty { s.recording = false }
                guard s.outstanding == 0 else { return (more, []) }
                defer { s.idleWaiters.removeAll() }
                return (more, s.idleWaiters)
            }
            for w in idle { w.resume() }
            if more.isEmpty { return }
            next = more
        }
    }

    public func finish(outcomes: OutcomeLedger) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.outstanding == 0 { return true }
                s.idleWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        var records: [OutcomeRecord] = []
        for shard in shards { records += await shard.drained() }
        records.sort { $0.sequence < $1.sequence }
        outcomes.record(records)
    }

    /// The shards' delivery counters, summed.
    public var statistics: DeliveryStatistics {
        get async {
            var total = DeliveryStatistics()
            for shard in shards { total.add(await shard.statistics) }
            return total
        }
    }

    public var counters: [(name: String, value: Int)] {
        get async { await statistics.counters }
    }
}
