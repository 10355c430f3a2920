import HeraldCore

/// Requests from the `notifications` table: claims batches of rows (see
/// ``PostgresQueue/claim(limit:)``), decodes each row's request line as `herald
/// send` decodes a JSON Lines line, and emits it, noting in the ``LeaseBook``
/// which row each sequence number is, so ``QueueOutcomeWriter`` can write its
/// outcome back. A row that is not a valid request ends `dropped` with the
/// reason (and the row id); the rows behind it carry on.
///
/// Idle, it waits for a `NOTIFY` on ``QueueSchema/channel`` (or `poll`,
/// whichever comes first). With `drain` it returns once nothing is queued and
/// no other worker holds a row (what others hold ends, or comes back to the
/// queue when their lease expires, so it waits for those); otherwise it runs
/// until the pipeline is shut down. A database that goes away is retried with
/// back-off, reported through `onProblem`.
public struct PostgresQueueSource: NotificationSource {
    public let queue: PostgresQueue
    public let book: LeaseBook
    public let drain: Bool
    public let decoder: RequestDecoder
    let onProblem: @Sendable (String) -> Void

    public init(
        queue: PostgresQueue, book: LeaseBook, drain: Bool, decoder: RequestDecoder = RequestDecoder(),
        onProblem: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.queue = queue
        self.book = book
        self.drain = drain
        self.decoder = decoder
        self.onProblem = onProblem
    }

    /// Outcome lines name a row by its id: `"row": 17`.
    public var lineKey: StaticString { "row" }

    /// Rows a worker may hold (in the pipeline, or their outcomes not yet written) before it claims more.
    var heldLimit: Int { 4 * queue.configuration.batch + queue.configuration.writeBatch }

    /// Claims in flight ahead of the batch being emitted: their round trips overlap the pipeline's
    /// work and each other's (a claim's time is mostly waiting: for the database, for the answer's
    /// decoding), so one worker is not held to one claim per claim's latency.
    static let claimsAhead = 2

    /// How often a worker holding all it may looks for fast-lane rows: an empty look is the
    /// claim's lock-free check (about 0.5 ms of the database's CPU), 2-3% of a core while a
    /// campaign keeps the worker at its limit, and nothing otherwise.
    static let fastLook = Duration.milliseconds(20)

    public func produce(into sink: SourceSink) async throws {
        // Scheduled rows whose time has come are moved where claims find them, beside the claiming.
        let releaser = Task { await releaseScheduled() }
        defer { releaser.cancel() }
        var failures = 0
        // Claims in a row that found nothing: the wait after each grows from a few milliseconds to
        // `poll`. A claim finds nothing while another worker's claim holds the rows after the
        // cursor as well as when the queue is empty; waiting a whole `poll` for a NOTIFY (only
        // inserts send one) left a queued backlog to whichever worker claimed first.
        var emptyClaims = 0
        // Claims in flight, oldest first; emitted in that order.
        var ahead: [Task<[PostgresQueue.Claimed], any Error>] = []
        // When this worker last looked for the fast lane's rows while at its limit, and the NOTIFY count then.
        var fastLook = (notified: queue.notificationCount, at: ContinuousClock.now)
        var fastBacklog = false
        while true {
            if stopping(sink) {
                book.stopRequested.store(true, ordering: .releasing)
                // Claimed rows are this worker's to finish: what was claimed ahead goes through too.
                for claim in ahead { if let rows = try? await claim.value { await emit(rows, into: sink) } }
                if let rows = try? await recoverUnansweredClaims(), !rows.isEmpty { await emit(rows, into: sink) }
                return
            }
            // Memory stays bounded when outcomes are written more slowly than rows are claimed:
            // no new claim while the worker holds more than a few batches.
            if book.held >= heldLimit && ahead.isEmpty {
                // Holding all it may (a campaign, most likely), it still takes the fast lane's rows
                // when woken, or every `fastLook` (20 ms; `poll` if less), up to twice the limit: an
                // alert enqueued now must not wait until the campaign held here has gone out, nor
                // for a NOTIFY (a producer sends at most one per `poll`). A look that fills a whole
                // batch found a backlog of the fast lane, not a few alerts: no more looks until the
                // worker is under its limit again (what it holds stays within one batch past it).
                if book.held < 2 * heldLimit, !fastBacklog,
                    queue.notificationCount != fastLook.notified || ContinuousClock.now - fastLook.at >= min(Self.fastLook, queue.configuration.poll)
                {
                    fastLook = (queue.notificationCount, .now)
                    do {
                        let rows = try await claimBatch(bulk: false)
                        fastBacklog = rows.count >= queue.configuration.batch
                        if !rows.isEmpty { await emit(rows, into: sink) }
                    } catch {
                        onProblem("\(error); looking again in \(queue.configuration.poll)")
                    }
                    continue
                }
                try? await Task.sleep(for: .milliseconds(5))
                continue
            }
            fastBacklog = false
            let rows: [PostgresQueue.Claimed]
            // Read before claiming: a NOTIFY after an empty claim still wakes the wait below.
            let notified = queue.notificationCount
            do {
                // First the rows of claims whose answer was lost (they may have committed): taken
                // back now, they are sent once, not claimed again when their lease runs out.
                let recovered = try await recoverUnansweredClaims()
                if !recovered.isEmpty {
                    rows = recovered
                } else if !ahead.isEmpty {
                    rows = try await ahead.removeFirst().value
                } else {
                    rows = try await claimBatch()
                }
                if rows.isEmpty, ahead.isEmpty, drain, !(try await queue.hasWorkLeft(inFlight: book.leases)) { return }
                failures = 0
            } catch {
                failures += 1
                let delay = BackoffPolicy.queueDatabase.bound(afterFailures: failures)
                onProblem("\(error); retrying in \(delay)")
                await queue.waitForNotification(timeout: delay) { stopping(sink) }
                continue
            }
            if rows.isEmpty {
                if ahead.isEmpty {
                    emptyClaims += 1
                    let wait = BackoffPolicy(initial: .milliseconds(5), maximum: queue.configuration.poll).bound(afterFailures: emptyClaims)
                    await queue.waitForNotification(timeout: wait, since: notified) { stopping(sink) }
                }
                continue
            }
            emptyClaims = 0
            // A full batch: more are likely waiting. Claimed rows are in the book as soon as claimed:
            // a batch waiting here (the worker at its limit, the pipeline full) has its leases renewed
            // like the rows in flight, or another worker would take it over once the lease ran out,
            // and both would send it.
            if rows.count >= queue.configuration.batch {
                // (Claims in flight count as full batches: what the worker holds stays under heldLimit plus one batch.)
                while ahead.count < Self.claimsAhead && book.held + ahead.count * queue.configuration.batch < heldLimit {
                    ahead.append(Task { try await claimBatch() })
                }
            }
            await emit(rows, into: sink)
        }
    }

    /// Moves scheduled rows to `notifications` as their time comes (schema 13): every quarter of
    /// a second, at once again while there are more, and when a `NOTIFY` comes (a producer's
    /// rows, some perhaps due already). Any worker's release serves every worker. Ends when
    /// cancelled (``produce(into:)`` returning) or told to stop claiming.
    func releaseScheduled() async {
        var failures = 0
        let stop = { [book] in Task.isCancelled || book.stopRequested.load(ordering: .acquiring) }
        while !stop() {
            let notified = queue.notificationCount
            do {
                let moved = try await queue.releaseDue(limit: Self.releaseBatch)
                failures = 0
                if moved == Self.releaseBatch { continue }
            } catch {
                // Cancelled with its statement under way: the worker is done, and so is this.
                if stop() { return }
                failures += 1
                let delay = BackoffPolicy.queueDatabase.bound(afterFailures: failures)
                onProblem("\(error); retrying in \(delay)")
                try? await Task.sleep(for: delay)
                continue
            }
            await queue.waitForNotification(timeout: Self.releaseInterval, since: notified, stop: stop)
        }
    }

    /// Scheduled rows moved per statement, and how often a worker looks for rows whose time has come.
    static let releaseBatch = 5_000
    static let releaseInterval: Duration = .milliseconds(250)

    /// The pipeline is shutting down, or the worker was told to stop claiming
    /// (``LeaseBook/stopRequested``: a service's intake closed).
    func stopping(_ sink: SourceSink) -> Bool { sink.isStopping || book.stopRequested.load(ordering: .acquiring) }

    /// Claims a batch, never under one of the leases this worker holds, and notes it in the book at
    /// once: from then on its leases are renewed, whether or not it has been emitted yet.
    /// Without `bulk`, none of the bulk lane's new rows.
    func claimBatch(bulk: Bool = true) async throws(QueueError) -> [PostgresQueue.Claimed] {
        let token = queue.nextClaimToken()
        do {
            let claim = try await queue.claim(
                limit: queue.configuration.batch, token: token, bulk: bulk, inFlight: { [book] in book.leases },
                leased: { [book] in book.reserve($0, token: token) })
            return await noted(claim, tokens: [token])
        } catch {
            book.claimUnanswered(token)
            throw error
        }
    }

    /// Notes the rows of the claims with these tokens in the book, and drops the leases they took
    /// over with nothing left to send (if that fails, the book keeps them and the next renewal
    /// drops them). Rows of a lease this worker holds already are not sent again
    /// (``LeaseBook/claim(_:tokens:)``).
    func noted(_ claim: PostgresQueue.Claim, tokens: [Int64]) async -> [PostgresQueue.Claimed] {
        let rows = book.claim(claim.rows, tokens: tokens)
        if rows.count < claim.rows.count {
            // Not expected: this worker's claims pass over the leases it holds (LeaseBook.leases).
            onProblem("a claim took over a lease this worker holds; its \(claim.rows.count - rows.count) rows in flight here are not sent again")
        }
        let empty = claim.emptyLeases.filter { !book.holds($0) }
        if !empty.isEmpty { await drop(empty, book: book, queue: queue, onProblem: onProblem) }
        return rows
    }

    /// The rows of this worker's unanswered claims, noted in the book like a claim's.
    func recoverUnansweredClaims() async throws(QueueError) -> [PostgresQueue.Claimed] {
        let tokens = book.takeUnansweredClaims()
        guard !tokens.isEmpty else { return [] }
        do {
            return await noted(try await queue.recoverClaims(tokens), tokens: tokens)
        } catch {
            for t in tokens { book.claimUnanswered(t) }
            throw error
        }
    }

    /// Emits claimed rows, noted in the book first (each is emitted once, in order, as the next
    /// sequence number); a row that is not a valid request is emitted as invalid.
    func emit(_ rows: [PostgresQueue.Claimed], into sink: SourceSink) async {
        book.hold(rows, from: sink.emitted)
        let now = Duration.sinceEpochMilliseconds
        for row in rows {
            var body = row.body
            switch body.withUTF8({ RequestLine.decode(UnsafeRawBufferPointer($0), decoder: decoder) }) {
            case .request(let request):
                if let expired = request.expiredBeforeSending(nowMilliseconds: now) {
                    await sink.emitDropped(request, line: Int(row.id), reason: expired)
                } else {
                    await sink.emit(request, line: Int(row.id))
                }
            case .invalid(let reason, let id, let token): await sink.emitInvalid(line: Int(row.id), reason: reason, id: id, token: token, lineKey: lineKey)
            }
        }
        // Hand the last partial batch on now: nothing may wait behind an idle source.
        await sink.flush()
    }
}

extension PostgresQueue {
    /// A worker on this queue: the source to run a pipeline from and the
    /// observer to add to its ledger, sharing one ``LeaseBook``.
    public func worker(drain: Bool, onProblem: @escaping @Sendable (String) -> Void = { _ in }) -> (source: PostgresQueueSource, writer: QueueOutcomeWriter) {
        let book = LeaseBook()
        return (PostgresQueueSource(queue: self, book: book, drain: drain, onProblem: onProblem), QueueOutcomeWriter(queue: self, book: book, onProblem: onProblem))
    }
}
