import Synchronization

/// Receives outcome records as they are decided (to write them out, to feed
/// the token store, to collect them in tests).
///
/// While a ``Pipeline`` runs, observers are called by a task of the ledger's
/// own, in the order the records were decided, never on the thread that
/// decided them (a transport's event loop): an observer that writes to a
/// file or a database, or blocks for a while, holds up neither the
/// connections nor the stages. Records not yet observed are bounded
/// (``PipelineOptions/observerBacklog``): past the bound the pipeline waits
/// before handing the next batch on, so a slow observer slows the source
/// rather than growing memory. Outside a run (a transport driven by hand)
/// observers are called inline, before `record` returns.
public protocol OutcomeObserver: Sendable {
    func observe(_ records: [OutcomeRecord])
}

/// Counts what entered a pipeline and how each request ended, and proves the
/// books balance: entered = accepted + rejected + dropped + suppressed + failed.
///
/// With `tracksIdentity` (the default) it also remembers which sequence
/// numbers are outstanding, so a request that ends twice, or one that never
/// entered, is caught as a violation rather than hidden in the totals.
public final class OutcomeLedger: Sendable {
    struct State {
        var entered: UInt64 = 0
        var counts: [UInt64] = Array(repeating: 0, count: Outcome.Kind.allCases.count)
        var outstanding = OutstandingSequences()
        var violations: [String] = []
    }

    struct Observers {
        var list: [any OutcomeObserver]
        /// While a pipeline runs: the relay that calls `list` off the recording thread.
        var relay: ObserverRelay?
    }

    let state = Mutex(State())
    let observers: Mutex<Observers>
    public let tracksIdentity: Bool

    /// Where a pipeline recording here notes its traced requests' way (``TraceBook``); nil: not noted.
    public let traceBook: TraceBook?

    public init(tracksIdentity: Bool = true, observers: [any OutcomeObserver] = [], traceBook: TraceBook? = nil) {
        self.tracksIdentity = tracksIdentity
        self.observers = Mutex(Observers(list: observers))
        self.traceBook = traceBook
    }

    /// Adds an observer for records decided from now on.
    public func addObserver(_ observer: any OutcomeObserver) {
        observers.withLock { $0.list.append(observer) }
    }

    /// Adds `observer` ahead of every other: it has seen a batch before any other observer has
    /// (the pipeline's latency timer, so that once an outcome answers `GET`, `/metrics` counts it).
    public func addFirstObserver(_ observer: any OutcomeObserver) {
        observers.withLock { $0.list.insert(observer, at: 0) }
    }

    var observerList: [any OutcomeObserver] { observers.withLock { $0.list } }

    /// From now on observers are called by `relay`'s task, not by whoever records;
    /// `nil` when a relay is active already (its run relays for both).
    func startRelay(bound: Int) -> ObserverRelay? {
        observers.withLock { o in
            guard o.relay == nil else { return nil }
            let relay = ObserverRelay(bound: bound)
            o.relay = relay
            return relay
        }
    }

    /// Back to calling observers inline; what the relay holds is still delivered by its task.
    func stopRelay(_ relay: ObserverRelay) {
        observers.withLock { if $0.relay === relay { $0.relay = nil } }
        relay.close()
    }

    /// Suspends while the records waiting for observers are over the relay's bound (backpressure).
    func waitForObserverRoom() async {
        guard let relay = observers.withLock({ $0.relay }) else { return }
        await relay.waitForRoom()
    }

    /// Requests that entered and have no outcome yet.
    package var pending: Int {
        state.withLock { s in Int(clamping: Int64(s.entered) - Int64(s.counts.reduce(0, +))) }
    }

    /// Notes that these requests entered the pipeline.
    public func enter(_ sequences: some Sequence<UInt64>, count: Int) {
        state.withLock { s in
            s.entered += UInt64(count)
            if tracksIdentity { for q in sequences { _ = s.outstanding.insert(q) } }
        }
    }

    /// Records outcomes. Each sequence number must be recorded exactly once.
    public func record(_ records: [OutcomeRecord]) {
        guard !records.isEmpty else { return }
        state.withLock { s in
            // By index, reading each record in place (`for r in records` copied every record).
            for i in records.indices {
                s.counts[Self.index(records[i].outcome.kind)] += 1
                if tracksIdentity && !s.outstanding.remove(records[i].sequence) && s.violations.count < 100 {
                    s.violations.append("sequence \(records[i].sequence) recorded without being outstanding (\(records[i].outcome))")
                }
            }
        }
        let (list, relay) = observers.withLock { ($0.list, $0.relay) }
        guard !list.isEmpty else { return }
        if let relay, relay.push(records) { return }
        for o in list { o.observe(records) }
    }

    /// Records that every envelope of `batch` ended with `outcome` (a
    /// transport that takes or refuses a whole batch at once). Records are
    /// built only when something reads them: an observer, or identity tracking.
    public func record(_ batch: [Envelope], as outcome: Outcome) {
        guard !batch.isEmpty else { return }
        if !tracksIdentity && observers.withLock({ $0.list.isEmpty }) {
            state.withLock { $0.counts[Self.index(outcome.kind)] += UInt64(batch.count) }
        } else {
            record(batch.records(outcome))
        }
    }

    /// Records one outcome.
    public func record(_ record: OutcomeRecord) { self.record([record]) }

    static func index(_ k: Outcome.Kind) -> Int {
        switch k {
        case .accepted: return 0
        case .rejected: return 1
        case .dropped: return 2
        case .suppressed: return 3
        case .failed: return 4
        case .cancelled: return 5
        }
    }

    /// The counts so far.
    public var snapshot: LedgerSnapshot {
        state.withLock { s in
            LedgerSnapshot(
                entered: s.entered, accepted: s.counts[0], rejected: s.counts[1], dropped: s.counts[2],
                suppressed: s.counts[3], failed: s.counts[4], cancelled: s.counts[5], violations: s.violations)
        }
    }
}

/// A copy of the ledger's counts.
public struct LedgerSnapshot: Sendable, Hashable, CustomStringConvertible {
    public var entered: UInt64
    public var accepted: UInt64
    public var rejected: UInt64
    public var dropped: UInt64
    public var suppressed: UInt64
    public var failed: UInt64
    public var cancelled: UInt64 = 0
    public var violations: [String]

    /// Requests that ended, whatever the outcome.
    public var ended: UInt64 { accepted + rejected + dropped + suppressed + failed + cancelled }
    /// Requests still without an outcome.
    public var pending: Int64 { Int64(entered) - Int64(ended) }
    /// Every request that entered ended exactly once.
    public var isBalanced: Bool { pending == 0 && violations.isEmpty }

    public func count(_ kind: Outcome.Kind) -> UInt64 {
        switch kind {
        case .accepted: return accepted
        case .rejected: return rejected
        case .dropped: return dropped
        case .suppressed: return suppressed
        case .failed: return failed
        case .cancelled: return cancelled
        }
    }

    public var description: String {
        "entered \(entered): accepted \(accepted), rejected \(rejected), dropped \(dropped), suppressed \(suppressed), failed \(failed)"
            + (cancelled != 0 ? ", cancelled \(cancelled)" : "")
            + (pending != 0 ? ", PENDING \(pending)" : "") + (violations.isEmpty ? "" : ", \(violations.count) violations")
    }
}

/// The books did not balance at the end of a run.
public struct LedgerImbalance: Error, Sendable, CustomStringConvertible {
    public let snapshot: LedgerSnapshot
    public var description: String { "outcome ledger does not balance: \(snapshot); \(snapshot.violations.prefix(3).joined(separator: "; "))" }
}

/// Collects outcome records in memory, for tests and embedders.
public final class OutcomeCollector: OutcomeObserver {
    let storage = Mutex<[OutcomeRecord]>([])
    public init() {}
    public func observe(_ records: [OutcomeRecord]) { storage.withLock { $0.append(contentsOf: records) } }
    /// Everything recorded so far, in the order it was recorded.
    public var records: [OutcomeRecord] { storage.withLock { $0 } }
}

