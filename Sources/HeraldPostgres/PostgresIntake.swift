import HeraldCore
import Synchronization

/// A service's intake on the PostgreSQL queue (`herald serve` with a `queue`
/// section): each accepted request becomes a row (its id is the row's), so it
/// outlives this process; any worker (this service's own pipeline, or `herald
/// work` elsewhere) sends it, and ``state(of:)`` reads the row.
///
/// The service's pipeline is one of the queue's workers: ``source`` claims
/// rows, ``observers`` writes their outcomes back. ``close()`` stops the
/// claiming: what this worker holds drains, the rest stays queued for others.
public final class PostgresIntake: NotificationIntake {
    public let queue: PostgresQueue
    /// Queued rows past which a batch is refused `full` (counted at most once a second).
    public let capacity: Int
    /// This service's worker: nil for an intake only (``init(queue:capacity:idempotencyWindow:worker:onProblem:)``).
    let worker: (source: PostgresQueueSource, writer: QueueOutcomeWriter)?
    let closed = Atomic<Bool>(false)
    let counted = Mutex<(count: Int, at: ContinuousClock.Instant)?>(nil)
    /// The oldest waiting row's time as last read.
    let oldest = Mutex<(since: Int64?, at: ContinuousClock.Instant)?>(nil)
    let idempotencyWindow: Duration

    let idle = IdleSource()

    /// `idempotencyWindow`: how long a key's batch is answered again; `onProblem` hears of a database away.
    /// `worker`: whether this service's pipeline is one of the queue's workers (the default), or
    /// the service only takes requests in and other processes (`herald work`) send them.
    public init(queue: PostgresQueue, capacity: Int, idempotencyWindow: Duration, worker: Bool = true, onProblem: @escaping @Sendable (String) -> Void) {
        self.queue = queue
        self.capacity = capacity
        self.idempotencyWindow = idempotencyWindow
        self.worker = worker ? queue.worker(drain: false, onProblem: onProblem) : nil
    }

    public var source: any NotificationSource { worker?.source ?? idle }
    public var observers: [any OutcomeObserver] { worker.map { [$0.writer] } ?? [] }
    public var keepsText: Bool { true }
    public var isClosed: Bool { closed.load(ordering: .relaxed) }

    public func close() {
        closed.store(true, ordering: .relaxed)
        worker?.source.book.stopRequested.store(true, ordering: .releasing)
        idle.stop.set()
    }

    public func notificationID(ofSequence sequence: UInt64) -> UInt64? {
        worker?.writer.rowID(of: sequence).map { UInt64(clamping: $0) }
    }

    public func pipelineStarting() { worker?.writer.start() }

    public func pipelineStopped(ledger: OutcomeLedger, reason: OutcomeReason) async -> String? {
        guard let writer = worker?.writer else { return nil }
        let report = await writer.finish()
        return "queue: \(report.written) outcomes written back, \(report.notWritten) not written, \(report.leaseLost) taken over by another worker"
    }

    /// Queued rows as `depth()` last counted them (the operator page's history does not count).
    public func lastCountedDepth() async -> Int? { counted.withLock { $0?.count } }

    /// Since when the longest-waiting row has waited (read again when a second old); nil when
    /// none waits or the database did not answer.
    public func oldestWaiting() async -> Int64? {
        if let c = oldest.withLock({ $0 }), ContinuousClock.now - c.at < .seconds(1) { return c.since }
        let since = try? await queue.oldestWaiting()
        oldest.withLock { $0 = (since, .now) }
        return since
    }

    /// Queued rows, as last counted (again when a second old).
    public func depth() async -> Int {
        if let c = counted.withLock({ $0 }), ContinuousClock.now - c.at < .seconds(1) { return c.count }
        let n = (try? await queue.queuedCount()) ?? counted.withLock { $0?.count ?? 0 }
        counted.withLock { $0 = (n, .now) }
        return n
    }

    /// Rows for the batch's texts, in order. With `key`, the rows the key made
    /// before (`replayed`), looked up before the capacity check so a retry is
    /// answered even when the queue is full.
    public func submit(_ batch: IntakeBatch, key: IdempotencyKey?) async -> IntakeAnswer {
        if isClosed { return .refused(.closed) }
        let texts = batch.texts
        let placements = batch.requests.count == texts.count ? batch.requests.map(PostgresQueue.Placement.init) : nil
        func accepted(_ ids: [Int64], replayed: Bool) -> IntakeAnswer {
            // A key reused for a batch of another length is the same key with another body.
            guard ids.count == texts.count else { return .keyConflict }
            return .accepted(ids: ids.map { UInt64(clamping: $0) }, replayed: replayed)
        }
        do {
            if let key {
                switch try await queue.lookUp(idempotencyKey: key.key, fingerprint: key.fingerprint, window: idempotencyWindow) {
                case .replayed(let ids)?: return accepted(ids, replayed: true)
                case .conflict?: return .keyConflict
                case .enqueued?, nil: break
                }
            }
            if texts.count > capacity { return .refused(.tooLarge(capacity: capacity)) }
            if await depth() + texts.count > capacity { return .refused(.full) }
            let ids: [Int64]
            if let key {
                switch try await queue.enqueueReturningIDs(texts, placements: placements, idempotencyKey: key.key, fingerprint: key.fingerprint, window: idempotencyWindow) {
                case .enqueued(let new): ids = new
                case .replayed(let old): return accepted(old, replayed: true)
                case .conflict: return .keyConflict
                }
            } else {
                ids = try await queue.enqueueReturningIDs(texts, placements: placements)
            }
            counted.withLock { c in c = c.map { ($0.count + ids.count, $0.at) } }
            return accepted(ids, replayed: false)
        } catch {
            return .unavailable("the queue's database did not take the batch (nothing of it was queued): \(error)")
        }
    }

    /// Cancels row `id` if it is held for its `send-at` (its outcome, `cancelled`, is written with
    /// it); otherwise what it is.
    public func cancel(_ id: UInt64) async -> CancelAnswer {
        let reason = OutcomeReason(.cancelled, "cancelled by DELETE /v1/notifications/\(id) before its send-at")
        do {
            switch try await queue.cancel(Int64(clamping: id), reason: reason) {
            case .cancelled:
                return .cancelled(OutcomeRecord(sequence: id, line: nil, id: nil, token: nil, outcome: .cancelled(reason)))
            case .notHeld:
                return .notCancelled(await state(of: id))
            }
        } catch {
            return .unavailable("\(error)")
        }
    }

    /// Row `id`'s state: its outcome once a worker wrote it back.
    public func state(of id: UInt64) async -> NotificationState {
        let row: PostgresQueue.Row?
        do { row = try await queue.row(Int64(clamping: id)) } catch { return .unavailable("\(error)") }
        guard let row else { return .unknown }
        if row.state == "scheduled", let at = row.sendAt { return .scheduled(sendAt: at) }
        guard row.state == "done", let outcome = row.outcome else { return .pending }
        return .decided(row.record(outcome: outcome, id: id))
    }
}

extension PostgresQueue.Row {
    /// The outcome written back to this row, as the record it was written from
    /// (its sequence number is the row's id; the request's own id and token are
    /// in its text, not kept here).
    func record(outcome kind: String, id: UInt64) -> OutcomeRecord {
        let why = OutcomeReason(reasonCode.map { OutcomeReason.Code($0) } ?? .unspecified, reason ?? "")
        let outcome: Outcome
        switch kind {
        case "accepted": outcome = .accepted
        case "suppressed": outcome = .suppressed
        case "rejected":
            let s = status ?? 0
            // A binary-interface status is a byte; an HTTP/2 answer's is its HTTP status, with APNs' reason.
            outcome = .rejected(s < 256 && s >= 0 ? Status(rawValue: UInt8(s)) : Status(http: s, reason: reason))
        case "dropped": outcome = .dropped(why)
        case "cancelled": outcome = .cancelled(why)
        default: outcome = .failed(why)
        }
        var record = OutcomeRecord(sequence: id, line: nil, id: nil, token: nil, outcome: outcome, apnsID: apnsID)
        record.possibleDuplicate = possibleDuplicate
        return record
    }
}

/// The source of a service that only takes requests into the queue (``PostgresIntake`` without a
/// worker): it emits nothing and returns once the intake closes (or the pipeline stops).
final class IdleSource: NotificationSource {
    let stop = StopSignal()
    var lineKey: StaticString { "row" }
    func produce(into sink: SourceSink) async throws {
        while !sink.isStopping && !stop.isSet && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
