import HeraldCore
import HeraldJSON
import HeraldPostgres
import Hummingbird
import Synchronization

/// `herald serve`'s intake when the configuration has a `queue` section: each
/// accepted request becomes a row of the PostgreSQL queue (its id is the
/// row's), so it outlives this process; any worker (this service's own
/// pipeline, or `herald work` elsewhere) sends it, and
/// `GET /v1/notifications/{id}` reads the row.
final class QueueIntake: Sendable {
    let queue: PostgresQueue
    /// Queued rows past which `POST` answers 429 (counted at most once a second).
    let capacity: Int
    let closed = Atomic<Bool>(false)
    let counted = Mutex<(count: Int, at: ContinuousClock.Instant)?>(nil)

    init(queue: PostgresQueue, capacity: Int) {
        self.queue = queue
        self.capacity = capacity
    }

    var isClosed: Bool { closed.load(ordering: .relaxed) }
    func close() { closed.store(true, ordering: .relaxed) }

    /// Queued rows, as last counted (again when a second old).
    func depth() async -> Int {
        if let c = counted.withLock({ $0 }), ContinuousClock.now - c.at < .seconds(1) { return c.count }
        let n = (try? await queue.queuedCount()) ?? counted.withLock { $0?.count ?? 0 }
        counted.withLock { $0 = (n, .now) }
        return n
    }

    enum Refusal: Error {
        case intake(IntakeRefusal)
        /// The `Idempotency-Key` was used with another body.
        case keyConflict
        case database(QueueError)
    }

    /// Rows for `texts`, in order, or why not. With `key`, the rows the key
    /// made before (`replayed`), looked up before the capacity check so a
    /// retry is answered even when the queue is full.
    func submit(_ texts: [String], key: IdempotencyKey?, window: Duration) async -> Result<(ids: [Int64], replayed: Bool), Refusal> {
        if isClosed { return .failure(.intake(.closed)) }
        do {
            if let key {
                switch try await queue.lookUp(idempotencyKey: key.key, fingerprint: key.fingerprint, window: window) {
                case .replayed(let ids)?: return .success((ids, true))
                case .conflict?: return .failure(.keyConflict)
                case .enqueued?, nil: break
                }
            }
            if texts.count > capacity { return .failure(.intake(.tooLarge(capacity: capacity))) }
            if await depth() + texts.count > capacity { return .failure(.intake(.full)) }
            let ids: [Int64]
            if let key {
                switch try await queue.enqueueReturningIDs(texts, idempotencyKey: key.key, fingerprint: key.fingerprint, window: window) {
                case .enqueued(let new): ids = new
                case .replayed(let old): return .success((old, true))
                case .conflict: return .failure(.keyConflict)
                }
            } else {
                ids = try await queue.enqueueReturningIDs(texts)
            }
            counted.withLock { c in c = c.map { ($0.count + ids.count, $0.at) } }
            return .success((ids, false))
        } catch {
            return .failure(.database(error))
        }
    }

    /// `GET /v1/notifications/{id}`'s answer for row `id`: status and body.
    func answer(_ id: UInt64) async -> (status: HTTPResponse.Status, body: [UInt8]) {
        let row: PostgresQueue.Row?
        do { row = try await queue.row(Int64(clamping: id)) } catch {
            var w = JSONWriter(capacity: 160)
            w.raw("{\"notification\":")
            w.int(Int(clamping: id))
            w.raw(",\"error\":")
            w.string("\(error)")
            w.raw("}")
            return (.serviceUnavailable, w.bytes)
        }
        var w = JSONWriter(capacity: 200)
        w.raw("{\"notification\":")
        w.int(Int(clamping: id))
        guard let row else {
            w.raw(",\"error\":\"no such notification\"}")
            return (.notFound, w.bytes)
        }
        guard row.state == "done", let outcome = row.outcome else {
            w.raw(",\"state\":\"pending\"}")
            return (.ok, w.bytes)
        }
        w.raw(",\"state\":\"decided\",\"outcome\":{\"outcome\":")
        w.string(outcome)
        if let s = row.status { w.raw(",\"status\":"); w.int(s) }
        if let r = row.reason { w.raw(",\"reason\":"); w.string(r) }
        if let c = row.reasonCode { w.raw(",\"code\":"); w.string(c) }
        if let a = row.apnsID { w.raw(",\"apnsId\":"); w.string(a) }
        if row.possibleDuplicate { w.raw(",\"possibleDuplicate\":true") }
        w.raw("}}")
        return (.ok, w.bytes)
    }
}
