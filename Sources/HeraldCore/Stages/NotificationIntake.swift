/// Where a long-running service's accepted requests wait for its pipeline,
/// and where their ids are answered from: `herald serve` writes its HTTP
/// routes once over `any NotificationIntake`, whether requests are held in
/// memory (the default) or become rows of a database queue that outlive the
/// process (`HeraldPostgres.PostgresIntake`).
///
/// A batch is taken whole or refused whole (``IntakeAnswer``): every request
/// either has an id or a refusal. The intake is also the service pipeline's
/// ``source``, and may add observers of its own (a queue writes outcomes back
/// to its rows).
public protocol NotificationIntake: Sendable {
    /// Takes `batch` whole, or refuses it whole. With `key`, a batch already
    /// taken under that key with the same fingerprint gets its first ids again
    /// (`replayed`), and nothing is queued twice.
    func submit(_ batch: IntakeBatch, key: IdempotencyKey?) async -> IntakeAnswer
    /// What became of notification `id`.
    func state(of id: UInt64) async -> NotificationState
    /// Requests waiting for a pipeline (may be counted a moment ago).
    func depth() async -> Int
    /// The depth as last counted, without counting now (`nil`: never counted): what a
    /// periodic sampler reads where counting costs a query (a queue's rows). Memory's is `depth()`.
    func lastCountedDepth() async -> Int?
    /// Since when the longest-waiting request has waited for a pipeline (epoch milliseconds); nil
    /// when none waits, or when the intake cannot tell. The default: nil.
    func oldestWaiting() async -> Int64?
    /// No more requests; what was taken still goes through (a queue's rows stay for other workers).
    func close()
    var isClosed: Bool { get }
    /// Whether ``submit(_:key:)`` wants each request's JSON text (``IntakeBatch/texts``), as a queue that stores it does.
    var keepsText: Bool { get }
    /// A refusal known before a batch is parsed, from its request lines (JSON Lines: at least
    /// its requests; a JSON array counts as one): a queue with no room for that many answers at
    /// once, so a client retrying against a full queue does not have each retry decoded in full.
    /// `most` bounds the lines (from the body's size); `lines()` counts them (a pass over the
    /// body: call it only when `most` leaves the answer open). `nil` (the default) when the batch
    /// must be parsed to be answered.
    func refusal(beforeParsing most: Int, lines: () -> Int) -> IntakeRefusal?

    /// The pipeline's source: what was taken, in order.
    var source: any NotificationSource { get }
    /// Observers the intake needs on the pipeline's ledger, after every other (a queue's outcome writer).
    var observers: [any OutcomeObserver] { get }
    /// The id a caller knows the notification by, from the pipeline's sequence number (`nil`: unknown).
    func notificationID(ofSequence sequence: UInt64) -> UInt64?
    /// Called as the pipeline starts.
    func pipelineStarting()
    /// Called as the pipeline starts, with its ledger (where a cancelled notification's outcome
    /// is recorded); the default calls ``pipelineStarting()``.
    func pipelineStarting(ledger: OutcomeLedger)
    /// Cancels notification `id` if it has not gone out: a scheduled send whose `send-at` has not
    /// come. The default cancels nothing (an intake that holds no scheduled sends).
    func cancel(_ id: UInt64) async -> CancelAnswer
    /// Called once the pipeline has stopped: what was taken but never reached
    /// the pipeline is recorded into `ledger` as failed with `reason`; what the
    /// intake still owes (outcomes not yet written back) is finished. Returns a
    /// line for the log, if any.
    func pipelineStopped(ledger: OutcomeLedger, reason: OutcomeReason) async -> String?
}

extension NotificationIntake {
    public func refusal(beforeParsing most: Int, lines: () -> Int) -> IntakeRefusal? { nil }
    public var keepsText: Bool { false }
    public var observers: [any OutcomeObserver] { [] }
    public func lastCountedDepth() async -> Int? { await depth() }
    public func oldestWaiting() async -> Int64? { nil }
    public func notificationID(ofSequence sequence: UInt64) -> UInt64? { sequence }
    public func pipelineStarting() {}
    public func pipelineStarting(ledger: OutcomeLedger) { pipelineStarting() }
    public func cancel(_ id: UInt64) async -> CancelAnswer { .notCancelled(await state(of: id)) }
}

/// What ``NotificationIntake/cancel(_:)`` did.
public enum CancelAnswer: Sendable, Hashable {
    /// Cancelled: it will never be sent; its outcome (`cancelled`).
    case cancelled(OutcomeRecord)
    /// Not cancelled: what it is (pending: on its way, or queued to go now; decided; unknown).
    case notCancelled(NotificationState)
    /// The intake's storage did not answer: nothing was cancelled.
    case unavailable(String)
}

/// Requests for an intake, in order; with ``NotificationIntake/keepsText`` each with its JSON text.
public struct IntakeBatch: Sendable {
    public var requests: [NotificationRequest]
    public var texts: [String]
    public init(requests: [NotificationRequest], texts: [String] = []) {
        self.requests = requests
        self.texts = texts
    }
    public var count: Int { requests.count }
}

/// A retried batch's identity: the client's `Idempotency-Key` and a
/// fingerprint of the batch's bytes, which a retry must match.
public struct IdempotencyKey: Sendable, Hashable {
    public let key: String
    public let fingerprint: String
    public init(key: String, fingerprint: String) {
        self.key = key
        self.fingerprint = fingerprint
    }
}

/// Why an intake refused a batch: a caller answers 413, 429 or 503.
public enum IntakeRefusal: Error, Sendable, Hashable {
    /// The batch holds more requests than the queue can ever hold (its
    /// capacity): retrying cannot help, the batch must be split.
    case tooLarge(capacity: Int)
    /// The queue cannot take the whole batch now: retry later.
    case full
    /// Shutting down: no new requests.
    case closed
    /// The batch's scheduled sends (`send-at`) would be more than the intake holds in memory
    /// (`capacity`): retry later, or use the queue, which holds them in the database.
    case scheduleFull(capacity: Int)
}

/// What an intake did with a batch.
public enum IntakeAnswer: Sendable, Hashable {
    /// Taken: an id per request, in order. `replayed`: taken before, under the same key.
    case accepted(ids: [UInt64], replayed: Bool)
    case refused(IntakeRefusal)
    /// The key was used with another batch: nothing of this one was taken.
    case keyConflict
    /// The key's first batch is still being answered: retry in a moment.
    case keyInProgress
    /// The intake's storage did not answer: nothing of the batch was taken.
    case unavailable(String)
}

/// What became of a notification, by its id.
public enum NotificationState: Sendable, Hashable {
    /// Its outcome (``OutcomeRecord/possibleDuplicate``: it may have been sent twice).
    case decided(OutcomeRecord)
    /// Taken, not decided yet.
    case pending
    /// Taken and held until its `send-at` (epoch milliseconds): not on its way yet, so it can be cancelled.
    case scheduled(sendAt: Int64)
    /// Decided so long ago that its outcome is no longer kept.
    case forgotten
    /// No notification has this id.
    case unknown
    /// The intake's storage did not answer.
    case unavailable(String)
}
