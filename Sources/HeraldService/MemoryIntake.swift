import HeraldCore
import Synchronization

/// `herald serve`'s intake without a queue: requests wait in memory (a
/// `RequestQueue`, at most `queueCapacity`), ids are the pipeline's sequence numbers,
/// `Idempotency-Key`s are remembered for this process's life
/// (``IdempotencyKeys``) and outcomes for `GET` are kept by the
/// ``OutcomeIndex``. What is still queued when the pipeline stops is recorded
/// failed.
final class MemoryIntake: NotificationIntake {
    let queue: RequestQueue
    let capacity: Int
    /// The pipeline's ledger, where a cancelled notification's outcome is recorded (set as it starts).
    let ledger = Mutex<OutcomeLedger?>(nil)
    let idempotency: IdempotencyKeys
    let outcomes: OutcomeIndex
    var source: any NotificationSource { queue.source }

    init(configuration: ServiceConfiguration, outcomes: OutcomeIndex) {
        capacity = configuration.queueCapacity
        queue = RequestQueue(scheduleCapacity: configuration.scheduledCapacity)
        idempotency = IdempotencyKeys(window: configuration.idempotencyWindow, capacity: configuration.idempotencyKeys)
        self.outcomes = outcomes
    }

    func submit(_ batch: IntakeBatch, key: IdempotencyKey?) async -> IntakeAnswer {
        if let key {
            switch idempotency.begin(key, now: .now) {
            case .new: break
            case .replay(let ids) where ids.count == batch.count: return .accepted(ids: Array(ids), replayed: true)
            case .replay, .conflict: return .keyConflict
            case .inProgress: return .keyInProgress
            }
        }
        let capacity = capacity, count = batch.count
        // A batch is taken whole or refused whole: one that could never fit is told so.
        let result = queue.enqueue(batch.requests, refuse: { depth in
            count > capacity ? .tooLarge(capacity: capacity) : depth + count > capacity ? .full : nil
        })
        if let key {
            if case .success(let ids) = result { idempotency.finish(key, ids: ids) } else { idempotency.release(key) }
        }
        switch result {
        case .success(let ids): return .accepted(ids: Array(ids), replayed: false)
        case .failure(let refusal): return .refused(refusal)
        }
    }

    func state(of id: UInt64) async -> NotificationState {
        switch outcomes.lookup(id, issued: queue.issued) {
        case .decided(let r): return .decided(r)
        case .pending: return queue.scheduledSendAt(id).map { .scheduled(sendAt: $0) } ?? .pending
        case .forgotten: return .forgotten
        case .unknown: return .unknown
        }
    }

    func pipelineStarting(ledger: OutcomeLedger) { self.ledger.withLock { $0 = ledger } }

    /// A scheduled send whose time has not come: taken out of the queue and recorded `cancelled`
    /// (its outcome then answers GET, the outcomes file and the webhook like any other).
    func cancel(_ id: UInt64) async -> CancelAnswer {
        guard let ledger = ledger.withLock({ $0 }),
            let record = queue.cancel(id, recordingIn: ledger, reason: "cancelled by DELETE /v1/notifications/\(id) before its send-at")
        else { return .notCancelled(await state(of: id)) }
        return .cancelled(record)
    }

    /// Full for `lines` requests: refused before parsing. A batch that could never fit is parsed
    /// (its answer, 413, names its count of requests).
    func refusal(beforeParsing most: Int, lines: () -> Int) -> IntakeRefusal? {
        let room = capacity - queue.depth
        // Room for any count the body could hold: no pass over it.
        if most <= room { return nil }
        let count = lines()
        return count <= capacity && count > room ? .full : nil
    }

    func depth() async -> Int { queue.depth }
    func oldestWaiting() async -> Int64? { queue.oldestWaiting }
    func close() { queue.close() }
    var isClosed: Bool { queue.isClosed }

    func pipelineStopped(ledger: OutcomeLedger, reason: OutcomeReason) async -> String? {
        let left = queue.failQueued(ledger, reason: reason)
        return left == 0 ? nil : "\(left) queued requests were never sent; they are recorded as failed"
    }
}
