import HeraldBinary
import HeraldCore

/// The in-memory transport on many cores: several ``SimulatorTransport``s, each
/// with a simulated gateway of its own, working on one batch at once. A device
/// token always goes to the same shard (by its hash), so each device sees one
/// gateway: its state (invalid, uninstalled, offline with a stored
/// notification) and its deliveries are what one simulator would give it.
///
/// Each batch is split by shard, the shards deliver their parts in parallel,
/// and the batch's records are recorded together, in the batch's order (by
/// sequence), before ``send(_:outcomes:)`` returns: what one
/// ``SimulatorTransport`` records for a fault-free run, whatever the number of
/// shards. With faults, each shard runs its own fault plan (the seed plus the
/// shard's number), so what happens depends on the number of shards.
public final class ShardedSimulatorTransport: Transport, TransportReporting {
    public let shards: [SimulatorTransport]

    /// `shards` must not be empty; each should have a simulator of its own.
    public init(shards: [SimulatorTransport]) {
        precondition(!shards.isEmpty, "a sharded simulator transport needs a shard")
        self.shards = shards
    }

    /// The shard a token goes to.
    func shard(of token: DeviceToken) -> Int {
        Int(UInt(bitPattern: token.hashValue) % UInt(shards.count))
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var parts = [[DeliveryItem]](repeating: [], count: shards.count)
        var records: [OutcomeRecord] = []
        records.reserveCapacity(batch.count)
        for i in batch.indices {  // in place: `for e in batch` copied each envelope
            if let item = DeliveryItem(batch[i]) {
                parts[shard(of: batch[i].request.token)].append(item)
            } else {
                records.append(batch[i].record(.failed(OutcomeReason(.internalFailure, "transport: the envelope has no frame"))))
            }
        }
        records += await withTaskGroup(of: [OutcomeRecord].self) { group in
            for s in parts.indices where !parts[s].isEmpty {
                let (shard, items) = (shards[s], parts[s])
                group.addTask { await shard.deliver(items) }
            }
            var all: [OutcomeRecord] = []
            for await part in group { all += part }
            return all
        }
        records.sort { $0.sequence < $1.sequence }
        outcomes.record(records)
    }

    public func finish(outcomes: OutcomeLedger) async {
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
