import HeraldCore
import PostgresNIO
import Synchronization

/// Which row (and lease) each of a run's sequence numbers came from: filled by
/// ``PostgresQueueSource`` as it claims and emits, emptied by
/// ``QueueOutcomeWriter`` as outcomes are written. Its size is the number of
/// rows in the pipeline.
public final class LeaseBook: Sendable {
    struct Lease {
        /// Rows of the lease held here whose outcome is not written yet.
        var remaining = 0
        /// An outcome write for some of its rows was given up: the lease must not be dropped, so
        /// that it runs out and those rows are taken over.
        var lost = false
        /// The lease's claims when this worker claimed it: what its rows' outcomes record. A claim
        /// of this worker's that took the lease over again meanwhile (``claim(_:)``) sent nothing
        /// twice, so it does not count.
        var attempts = 1
    }
    /// Rows emitted together (a claim's), numbered from `first` on: no per-row hashing, a claim's
    /// rows are noted with one lock and found again by their place.
    struct Span {
        var first: UInt64
        var rows: [Int64]
        var leases: [Int64]
        /// Whose outcome is decided.
        var decided: [Bool]
        var open: Int
        func index(of sequence: UInt64) -> Int? {
            guard sequence >= first, sequence - first < UInt64(rows.count) else { return nil }
            let k = Int(sequence - first)
            return decided[k] ? nil : k
        }
    }
    struct Rows {
        /// Rows claimed and not yet emitted (a batch claimed ahead, the rest of the batch being emitted).
        var claimed = 0
        /// Emitted rows whose outcome is not decided yet, by sequence number; oldest first.
        var spans: [Span] = []
        var undecided = 0
        /// Rows whose outcome is decided but not yet written back.
        var unwritten = 0
        /// The leases rows are held under.
        var leases: [Int64: Lease] = [:]
        /// Claims that failed without an answer: they may have leased rows to this worker.
        var unansweredClaims: [Int64] = []
        /// Leases claims took whose rows are not noted yet, by claim token: renewed, and never taken
        /// over by this worker's own claims, from the moment their claim took them. (A claim whose
        /// rows could not be read keeps them here until they are recovered.)
        var reserved: [Int64: [Int64]] = [:]
        /// Finished leases (every row's outcome written, or none left) whose drop failed: dropped
        /// again with the next renewal (``QueueOutcomeWriter/renewWhileRunning()``), not left to run
        /// out and wait for a claim to take them over.
        var undropped: Set<Int64> = []
        /// The span holding `sequence` undecided.
        func find(_ sequence: UInt64) -> (span: Int, index: Int)? {
            // Spans are in sequence order: the last one starting at or before it.
            var lo = 0, hi = spans.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if spans[mid].first <= sequence { lo = mid + 1 } else { hi = mid }
            }
            guard lo > 0, let k = spans[lo - 1].index(of: sequence) else { return nil }
            return (lo - 1, k)
        }
    }
    let rows = Mutex(Rows())
    /// The source stopped because the run was told to stop (a signal, a graceful shutdown), not
    /// because the queue was drained: the writer's finish is then bounded (see ``QueueOutcomeWriter/finish()``).
    let stopRequested = Atomic<Bool>(false)
    public init() {}
    /// A claim's lease statement took these leases (``PostgresQueue/claim(limit:token:inFlight:leased:)``):
    /// held from now on, until their rows are noted by ``claim(_:tokens:)``.
    func reserve(_ leases: [Int64], token: Int64) {
        guard !leases.isEmpty else { return }
        rows.withLock { $0.reserved[token] = leases }
    }
    /// Rows just claimed by the claims with these tokens (or found again after their answer was
    /// lost): held (and their leases renewed) from now on, before they are emitted, in place of the
    /// claims' reserved leases. Returns them, less the rows of leases held here already (a claim
    /// takes over a lease of this worker's only once its rows have left the book: their outcome
    /// written, or given up).
    @discardableResult
    func claim(_ claimed: [PostgresQueue.Claimed], tokens: [Int64] = []) -> [PostgresQueue.Claimed] {
        rows.withLock { r in
            let fresh = claimed.filter { r.leases[$0.lease] == nil }
            r.claimed += fresh.count
            for row in fresh {
                r.leases[row.lease, default: Lease()].remaining += 1
                r.leases[row.lease]!.attempts = row.attempts
            }
            for t in tokens { r.reserved[t] = nil }
            return fresh
        }
    }
    /// Whether rows of `lease` are held here (claimed, in flight, or their outcome not yet written).
    func holds(_ lease: Int64) -> Bool { rows.withLock { $0.leases[lease] != nil } }
    /// A claim failed without an answer: it may have committed, leasing rows no one here knows of.
    func claimUnanswered(_ token: Int64) { rows.withLock { $0.unansweredClaims.append(token) } }
    /// The unanswered claims to look for, and forgets them.
    func takeUnansweredClaims() -> [Int64] { rows.withLock { r in defer { r.unansweredClaims.removeAll() }; return r.unansweredClaims } }
    /// Claimed rows are about to be emitted as `first`, `first + 1`, … (one sequence number each, in order).
    func hold(_ claimed: some Collection<PostgresQueue.Claimed>, from first: UInt64) {
        guard !claimed.isEmpty else { return }
        let span = Span(first: first, rows: claimed.map(\.id), leases: claimed.map(\.lease), decided: Array(repeating: false, count: claimed.count), open: claimed.count)
        rows.withLock { r in
            r.claimed -= claimed.count
            r.undecided += claimed.count
            r.spans.append(span)
        }
    }
    /// The row and lease of a decided sequence number: held, as unwritten, until ``settle(_:written:)``.
    func take(_ sequence: UInt64) -> (row: Int64, lease: Int64, attempts: Int)? {
        rows.withLock { r in
            guard let (i, k) = r.find(sequence) else { return nil }
            r.spans[i].decided[k] = true
            r.spans[i].open -= 1
            let lease = r.spans[i].leases[k]
            let held = (r.spans[i].rows[k], lease, r.leases[lease]?.attempts ?? 1)
            if r.spans[i].open == 0 { r.spans.remove(at: i) }
            r.undecided -= 1
            r.unwritten += 1
            return held
        }
    }
    /// The leases that writing `batch` finishes: every row of theirs held here is in it, and none was given up.
    func completing(_ batch: [PostgresQueue.Finished]) -> [Int64] {
        rows.withLock { r in
            var counts: [Int64: Int] = [:]
            for f in batch { counts[f.lease, default: 0] += 1 }
            return counts.compactMap { lease, n in
                guard let l = r.leases[lease], !l.lost, l.remaining == n else { return nil }
                return lease
            }.sorted()
        }
    }
    /// These rows' outcomes were written (`written`), or given up: the book no longer holds them. A
    /// lease none of whose rows are held any more leaves the book (no longer renewed); returns those
    /// of them with every outcome written.
    @discardableResult
    func settle(_ batch: [PostgresQueue.Finished], written: Bool) -> [Int64] {
        rows.withLock { r in
            r.unwritten -= batch.count
            var finished: [Int64] = []
            for f in batch {
                guard var l = r.leases[f.lease] else { continue }
                l.remaining -= 1
                if !written { l.lost = true }
                if l.remaining > 0 {
                    r.leases[f.lease] = l
                } else {
                    r.leases[f.lease] = nil
                    if !l.lost { finished.append(f.lease) }
                }
            }
            return finished
        }
    }
    /// These finished leases could not be dropped (the database was away): kept to be dropped again.
    func dropFailed(_ leases: [Int64]) { rows.withLock { $0.undropped.formUnion(leases) } }
    /// The finished leases whose drop failed, forgotten here (``dropFailed(_:)`` keeps them again if this drop fails too).
    func takeUndropped() -> [Int64] { rows.withLock { r in defer { r.undropped.removeAll() }; return r.undropped.sorted() } }
    func peek(_ sequence: UInt64) -> Int64? { rows.withLock { r in r.find(sequence).map { r.spans[$0.span].rows[$0.index] } } }
    /// Rows emitted whose outcome has not been decided yet.
    public var count: Int { rows.withLock { $0.undecided } }
    /// Rows held: claimed and not yet emitted, undecided, or decided and not yet written.
    public var held: Int { rows.withLock { $0.claimed + $0.undecided + $0.unwritten } }
    /// The leases this worker holds rows under, or whose rows a claim of its is reading: they are
    /// renewed, and this worker's own claims never take them over, even once they have run out
    /// (after a long outage).
    var leases: [Int64] {
        rows.withLock { r in
            var all = Array(r.leases.keys)
            for reserved in r.reserved.values { all.append(contentsOf: reserved.filter { r.leases[$0] == nil }) }
            return all
        }
    }
}
