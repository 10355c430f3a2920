import DequeModule
import HeraldCore
import Synchronization

/// Between `send` callers and the client's pipeline: the requests taken and
/// not yet handed to the pipeline (a `RequestQueue`, as `herald serve`'s), the
/// callers waiting for each outcome (by sequence number: the queue numbers
/// requests as it takes them, and the source emits each under its number),
/// and the callers waiting for room.
///
/// At most `capacity` requests are taken and not yet decided: past that,
/// callers wait (their tasks suspend; nothing is dropped), so memory stays
/// bounded however many call at once. The bulk lane fills at most
/// `capacity` less a sixteenth, kept for the fast lane, and fast-lane callers
/// are given room before bulk-lane ones: a campaign in flight does not hold
/// a one-off notification back at the door.
final class ClientIntake: Sendable {
    /// Who is waiting for a sequence number's outcome.
    enum Waiter {
        case one(UnsafeContinuation<SendOutcome, any Error>)
        case batch(BatchWaiter, Int)
        /// A scheduled send's handle (``ScheduledSend``): its outcome kept for whoever asks.
        case promise(OutcomePromise)
    }

    struct State {
        /// Requests taken or with room reserved, and not yet decided.
        var undecided = 0
        var waiters: [UInt64: Waiter] = [:]
        /// Callers waiting for room, by lane (fast first).
        var roomWaiters = (fast: Deque<RoomWaiter>(), bulk: Deque<RoomWaiter>())
        var nextTicket: UInt64 = 0
        var closed = false

        /// Whether `count` more fit now in `lane` (a batch larger than the capacity fits an empty pipeline).
        func fits(_ count: Int, _ lane: Lane, capacity: Int) -> Bool {
            undecided == 0 || undecided + count <= (lane == .fast ? capacity : capacity - capacity / 16)
        }
        /// Whether a caller in `lane` must queue behind others waiting (first come, first served within a lane; the bulk lane after the fast).
        func mustQueue(_ lane: Lane) -> Bool { lane == .fast ? !roomWaiters.fast.isEmpty : !(roomWaiters.fast.isEmpty && roomWaiters.bulk.isEmpty) }
    }

    typealias RoomWaiter = (ticket: UInt64, count: Int, continuation: UnsafeContinuation<Void, any Error>)

    struct Handoff {
        /// The ledger's batches as they came: kept whole (no element is copied on the transport's thread).
        var batches: [[OutcomeRecord]] = []
        var waiting: UnsafeContinuation<Void, Never>?
        var finished = false
    }

    let capacity: Int
    let state = Mutex(State())
    /// The requests taken, numbered, for the pipeline's source.
    let requests = RequestQueue()
    /// Outcomes on their way from the pipeline's observer to the callers (a lock of its own).
    let handoff = Mutex(Handoff())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    // MARK: Callers

    /// Reserves room for `count` more requests in `lane`, waiting (first come,
    /// first served within a lane, the fast lane first) while the pipeline
    /// holds `capacity` undecided. Throws `CancellationError` if the caller is
    /// cancelled while waiting and ``HeraldClientError/shutDown`` once closed:
    /// then nothing was reserved.
    func reserve(_ count: Int, lane: Lane) async throws {
        let ticket = try state.withLock { s -> UInt64? in
            if s.closed { throw HeraldClientError.shutDown }
            if !s.mustQueue(lane) && s.fits(count, lane, capacity: capacity) {
                s.undecided += count
                return nil
            }
            defer { s.nextTicket += 1 }
            return s.nextTicket
        }
        guard let ticket else { return }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (c: UnsafeContinuation<Void, any Error>) in
                let now: (any Error)?? = state.withLock { s in
                    if s.closed { return .some(HeraldClientError.shutDown) }
                    if Task.isCancelled { return .some(CancellationError()) }
                    if !s.mustQueue(lane) && s.fits(count, lane, capacity: capacity) {
                        s.undecided += count
                        return .some(nil)
                    }
                    if lane == .fast { s.roomWaiters.fast.append((ticket, count, c)) } else { s.roomWaiters.bulk.append((ticket, count, c)) }
                    return .none
                }
                switch now {
                case .some(let error?): c.resume(throwing: error)
                case .some(nil): c.resume()
                case .none: break  // `decided`, `close` or the cancellation handler resumes it
                }
            }
        } onCancel: {
            let c = state.withLock { s -> UnsafeContinuation<Void, any Error>? in
                if let i = s.roomWaiters.fast.firstIndex(where: { $0.ticket == ticket }) { return s.roomWaiters.fast.remove(at: i).continuation }
                if let i = s.roomWaiters.bulk.firstIndex(where: { $0.ticket == ticket }) { return s.roomWaiters.bulk.remove(at: i).continuation }
                return nil
            }
            c?.resume(throwing: CancellationError())
        }
    }

    /// ``reserve(_:lane:)``, then `CancellationError` (the room given back) if the caller was
    /// cancelled meanwhile: a caller cancelled before its notification is taken withdraws it.
    func reserveUnlessCancelled(_ count: Int, lane: Lane) async throws {
        try await reserve(count, lane: lane)
        if Task.isCancelled {
            unreserve(count)
            throw CancellationError()
        }
    }

    /// Gives back room reserved and not used.
    func unreserve(_ count: Int) {
        let rooms = state.withLock { s in
            s.undecided -= count
            return grantRoom(&s)
        }
        for c in rooms { c.resume() }
    }

    /// Waiters that fit now, in order (the fast lane's first; the bulk lane's only once none of the
    /// fast lane's waits), with their room reserved.
    private func grantRoom(_ s: inout State) -> [UnsafeContinuation<Void, any Error>] {
        var granted: [UnsafeContinuation<Void, any Error>] = []
        while let first = s.roomWaiters.fast.first, s.fits(first.count, .fast, capacity: capacity) {
            s.roomWaiters.fast.removeFirst()
            s.undecided += first.count
            granted.append(first.continuation)
        }
        while s.roomWaiters.fast.isEmpty, let first = s.roomWaiters.bulk.first, s.fits(first.count, .bulk, capacity: capacity) {
            s.roomWaiters.bulk.removeFirst()
            s.undecided += first.count
            granted.append(first.continuation)
        }
        return granted
    }

    /// Takes `request` (its room reserved) and registers `waiter` for its outcome.
    /// Returns its sequence number, or the error when nothing was taken (the
    /// intake closed meanwhile, or the scheduled sends are at their limit):
    /// the caller then gives its room back.
    func submit(_ request: NotificationRequest, waiter: Waiter) -> Result<UInt64, HeraldClientError> {
        // The waiter is registered as the request is numbered, before the source can take it.
        submit([request], waiter: { _ in waiter }).map(\.lowerBound)
    }

    /// Takes a batch; `waiter(i)` waits for the i-th outcome.
    func submit(_ batch: [NotificationRequest], waiter: (Int) -> Waiter) -> Result<Range<UInt64>, HeraldClientError> {
        let queued = requests.enqueue(batch, numbered: { numbers in
            state.withLock { s in
                for i in batch.indices { s.waiters[numbers.lowerBound + UInt64(i)] = waiter(i) }
            }
        })
        return queued.mapError { refusal in
            if case .scheduleFull(let capacity) = refusal { return .scheduleFull(capacity: capacity) }
            return .shutDown
        }
    }

    /// Takes scheduled request `sequence` back if its time has not come, and records it
    /// `cancelled` in `ledger` (which resumes its waiter); false when it is on its way or decided.
    func cancel(_ sequence: UInt64, ledger: OutcomeLedger) -> Bool {
        requests.cancel(sequence, recordingIn: ledger, reason: "cancelled by ScheduledSend.cancel() before its send-at") != nil
    }

    /// The caller of `sequence` is gone (cancelled): its notification goes on
    /// and ends in one recorded outcome; the caller gets `CancellationError` now.
    func detach(_ sequence: UInt64) {
        let waiter = state.withLock { s -> Waiter? in s.waiters.removeValue(forKey: sequence) }
        switch waiter {
        case .one(let c)?: c.resume(throwing: CancellationError())
        case .batch(let b, _)?: b.cancel()
        case .promise?, nil: break
        }
    }

    // MARK: The pipeline

    /// Outcomes decided, from the pipeline's observer (the ledger's relay task):
    /// handed to ``resumeCallers()``, so the lookups, resumptions and wake-ups run
    /// on another core beside the relay. (Resuming on the relay's task instead
    /// measured 0.92-0.96 of the file path, against 1.01 with this hand-off.)
    func decided(_ records: [OutcomeRecord]) {
        let wake = handoff.withLock { h -> UnsafeContinuation<Void, Never>? in
            h.batches.append(records)
            defer { h.waiting = nil }
            return h.waiting
        }
        wake?.resume()
    }

    /// Resumes callers with the outcomes `decided` hands over, until
    /// ``endResuming()`` and nothing is left. Runs beside the pipeline, in `run()`.
    func resumeCallers() async {
        var batches: [[OutcomeRecord]] = []
        while true {
            let finished = handoff.withLock { h -> Bool in
                swap(&batches, &h.batches)
                return h.finished
            }
            if !batches.isEmpty {
                for records in batches { resume(records) }
                batches.removeAll(keepingCapacity: true)
                continue
            }
            if finished { return }
            await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
                let now = handoff.withLock { h -> Bool in
                    if !h.batches.isEmpty || h.finished { return true }
                    h.waiting = c
                    return false
                }
                if now { c.resume() }
            }
        }
    }

    /// No more outcomes will come: ``resumeCallers()`` returns once it has handed out what it has.
    func endResuming() {
        let wake = handoff.withLock { h -> UnsafeContinuation<Void, Never>? in
            h.finished = true
            defer { h.waiting = nil }
            return h.waiting
        }
        wake?.resume()
    }

    /// Each waiting caller gets its outcome; room is made.
    private func resume(_ records: [OutcomeRecord]) {
        var resumed: [(Waiter, OutcomeRecord)] = []
        resumed.reserveCapacity(records.count)
        let rooms = state.withLock { s in
            for r in records {
                if let w = s.waiters.removeValue(forKey: r.sequence) { resumed.append((w, r)) }
            }
            s.undecided -= records.count
            return grantRoom(&s)
        }
        for (w, r) in resumed {
            switch w {
            case .one(let c): c.resume(returning: SendOutcome(r))
            case .batch(let b, let i): b.fill(i, SendOutcome(r))
            case .promise(let p): p.fulfil(SendOutcome(r))
            }
        }
        for c in rooms { c.resume() }
    }

    /// No new requests: callers waiting for room get ``HeraldClientError/shutDown``; what was taken goes on.
    func close() {
        let rooms = state.withLock { s in
            s.closed = true
            defer { s.roomWaiters = ([], []) }
            return (s.roomWaiters.fast + s.roomWaiters.bulk).map(\.continuation)
        }
        for c in rooms { c.resume(throwing: HeraldClientError.shutDown) }
        requests.close()
    }

}
