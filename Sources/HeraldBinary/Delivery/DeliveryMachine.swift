import DequeModule
import HeraldCore

/// The binary interface's delivery rules for one gateway connection slot, as
/// a sans-I/O state machine: events in, actions out, no sockets, no clock.
///
/// The in-memory simulator transport and the TLS gateway transport both drive
/// it, so the rules the fast tests exercise are the rules production runs.
///
/// **Driving it.** A shell owns the connection and the timer:
/// - hand it notifications with ``enqueue(_:now:)``;
/// - perform ``takeActions()`` in order: ``Action/connect(_:)`` opens
///   connection *n* (report ``connected(_:now:)`` when its TLS handshake is
///   done, or ``closed(_:reason:now:)`` if it fails); ``Action/close(_:)``
///   closes it (the machine is already done with it);
/// - while the connection is ready and takes more bytes, call
///   ``pollWrite(into:now:)`` and write what it produced;
/// - pass what the gateway sends with ``read(_:_:now:)``, every byte of it,
///   including bytes that arrive just before a reset, and the end of the
///   connection with ``closed(_:reason:now:)``;
/// - call ``timer(now:)`` at ``nextDeadline``;
/// - record ``takeOutcomes()`` in the ledger.
///
/// **What it decides.** Each notification written gets the connection's next
/// identifier. An error response naming identifier X confirms everything
/// written before X (`accepted`), rejects X with its status, and sends
/// everything after X again on a new connection; status 10 confirms through X.
/// Nothing is ever accepted on the strength of silence: a connection asks for
/// confirmation by writing a *probe* (a notification every gateway rejects)
/// once it holds ``DeliveryPolicy/maxUnconfirmed`` notifications, once its
/// oldest has waited ``DeliveryPolicy/confirmAfter``, or when it has nothing
/// more to write; the probe's answer confirms everything before it.
///
/// A close with no answer leaves what was in flight unknown: all of it becomes
/// *suspect* and is written again (the only possible duplicates, counted in
/// ``DeliveryStatistics/resentAfterSilentClose``), on connections that carry
/// half as many before a probe each time (bisection), so a notification the
/// gateway chokes on ends up alone in flight. Only a notification alone in
/// flight on ``DeliveryPolicy/maxSilentCloses`` silent closes ends `failed`.
/// A probe unanswered for ``DeliveryPolicy/answerTimeout`` is a stall: the
/// connection is closed and treated the same way.
public struct DeliveryMachine: Sendable {
    public enum Action: Sendable, Hashable {
        /// Open connection number `n`.
        case connect(Int)
        /// Close connection number `n`; its later events are ignored.
        case close(Int)
    }

    /// Why a connection ended.
    public enum CloseReason: Sendable, Hashable {
        /// The peer closed or reset it, or an error that another attempt may not repeat.
        case transient(String?)
        /// A problem retrying cannot fix (our certificate refused, an unknown CA):
        /// everything waiting fails with it, and so will later notifications.
        case permanent(String)
    }

    enum Phase: Sendable {
        case idle
        case waiting(until: Duration)
        case connecting(Int, since: Duration)
        case ready(Int)
        case failed(OutcomeReason)
    }

    public let policy: DeliveryPolicy
    /// The gateway's address, for messages.
    public let endpoint: String
    var phase = Phase.idle
    var lastConnection = 0
    var queue = Deque<DeliveryItem>()
    var window = InFlightWindow<DeliveryItem>()
    var responses = ErrorResponseDecoder()
    var outcomes: [OutcomeRecord] = []
    var actions: [Action] = []
    var random: SeededGenerator
    public internal(set) var statistics = DeliveryStatistics()

    /// How many may be in flight on a connection before a probe (adaptive).
    var cap: Int
    /// Notifications confirmed since the last rejection, and the running mean of that distance.
    var confirmedSinceRejection = 0
    var meanGap: Int?
    var probeSentAt: Duration?
    var windowOpenedAt: Duration?
    var lastWriteAt = Duration.zero
    /// Notifications at the front of the queue that were in flight at a close with no answer.
    var suspects = 0
    /// Suspects still to write on this connection before its probe (`nil`: not isolating).
    var budget: Int?
    /// Silent closes in a row that narrowed nothing down, with nothing confirmed since.
    var stuckCloses = 0
    var lastSilentCount = Int.max
    var connectFailures = 0
    /// Answers that confirmed something (error responses, status 10, probes).
    var confirmations = 0
    /// Write a probe alone on the next connection: does the gateway answer at all?
    var healthCheck = false
    var healthCheckInFlight = false
    /// When the current outage began: the first of the connection attempts failing in a row.
    public internal(set) var outageSince: Duration?
    /// When the current run of silent closes that narrow nothing down began.
    var stuckSince: Duration?
    /// The latest connection failure or close with no answer, for errors and probes.
    public internal(set) var lastError: String?
    /// Lines for a person, to log at warning level as they come (``takeNotices()``):
    /// the first failed attempt of an outage, and the connection that ends one.
    var notices: [String] = []
    var drainDeadline: Duration?
    /// Set once draining has finished: nothing queued, nothing in flight.
    public internal(set) var isDrained = false

    public init(policy: DeliveryPolicy = DeliveryPolicy(), endpoint: String, seed: UInt64) {
        self.policy = policy
        self.endpoint = endpoint
        self.random = SeededGenerator(seed: seed)
        self.cap = max(1, policy.maxUnconfirmed)
    }

    /// What a person should read now (log at warning): see ``notices``.
    public mutating func takeNotices() -> [String] {
        defer { notices.removeAll() }
        return notices
    }

    /// Notifications waiting to be written.
    public var queuedCount: Int { queue.count }
    /// Notifications written and not yet confirmed (probes excluded).
    public var inFlightCount: Int { window.inFlight.reduce(0) { $0 + ($1.isProbe ? 0 : 1) } }
    /// Whether a connection is up and may be written to.
    public var isReady: Bool { if case .ready = phase { true } else { false } }

    // MARK: - Events

    /// New notifications to deliver, in order.
    public mutating func enqueue(_ items: some Sequence<DeliveryItem>, now: Duration) {
        enqueue(now: now) { add in for item in items { add(item) } }
    }

    /// New notifications to deliver, in order, moved into the queue: an array handed over is
    /// not copied item by item and then released (``enqueue(_:now:)`` iterates it).
    public mutating func enqueue(moving items: consuming [DeliveryItem], now: Duration) {
        var items = items
        enqueue(now: now) { add in items.removeAllInOrder { add($0) } }
    }

    /// New notifications to deliver, in order: each one `make` hands to its argument goes
    /// straight into the queue (an array of them appended is copied item by item, then freed).
    public mutating func enqueue(now: Duration, _ make: ((consuming DeliveryItem) -> Void) -> Void) {
        if case .failed(let why) = phase {
            make { outcomes.append($0.record(.failed(why))) }
            return
        }
        isDrained = false
        make { queue.append($0) }
        connectIfNeeded(now)
    }

    /// Connection `c` completed its handshake.
    public mutating func connected(_ c: Int, now: Duration) {
        guard case .connecting(c, _) = phase else { return }
        phase = .ready(c)
        statistics.handshakes += 1
        if connectFailures > 0, outageSince != nil {
            notices.append(ConnectNotice.connected(to: "the gateway \(endpoint)", afterFailures: connectFailures))
        }
        connectFailures = 0
        outageSince = nil
        responses = ErrorResponseDecoder()
        _ = window.reset()
        probeSentAt = nil
        windowOpenedAt = nil
        budget = suspects > 0 ? min(cap, suspects) : nil
        checkDrained()
    }

    /// Bytes the gateway sent on connection `c`.
    public mutating func read(_ c: Int, _ bytes: UnsafeRawBufferPointer, now: Duration) {
        guard case .ready(c) = phase else { return }
        responses.feed(bytes)
        do {
            if case .message(let response) = try responses.next() { answered(response, on: c, now: now) }
        } catch {
            lastError = "the gateway \(endpoint) sent something other than an error response (\(error))"
            actions.append(.close(c))
            silentClose(c, now: now, stalled: false)
        }
    }

    /// Connection `c` ended (before or after its handshake).
    public mutating func closed(_ c: Int, reason: CloseReason, now: Duration) {
        switch phase {
        case .connecting(c, _):
            connectFailed(reason, now: now)
        case .ready(c):
            if case .permanent(let why) = reason {
                // Refused after the handshake (TLS 1.3 reports a refused client certificate late).
                let reason = OutcomeReason(.tlsRefused, why)
                outcomes.append(contentsOf: window.connectionLost().filter { !$0.isProbe }.map { $0.record(.failed(reason)) })
                failEverything(reason)
            } else {
                if case .transient(let why?) = reason { lastError = why }
                silentClose(c, now: now, stalled: false)
            }
        default:
            return  // a connection the machine already left
        }
    }

    /// Time passed: reconnect after a backoff, give up on a connection or a
    /// silent gateway, end a drain at its deadline.
    public mutating func timer(now: Duration) {
        switch phase {
        case .waiting(let until) where now >= until:
            phase = .idle
            connectIfNeeded(now)
        case .connecting(let c, let since) where now - since >= policy.connectTimeout:
            actions.append(.close(c))
            connectFailed(.transient("no TLS session with \(endpoint) within \(policy.connectTimeout)"), now: now)
        case .ready(let c):
            if let due = answerDue, now >= due {
                statistics.stalls += 1
                lastError = "the gateway \(endpoint) stopped reading or answering for \(policy.answerTimeout)"
                actions.append(.close(c))
                silentClose(c, now: now, stalled: true)
            }
        default:
            break
        }
        if let deadline = drainDeadline, now >= deadline, !isDrained { drainTimedOut() }
    }

    /// Finish: write everything, have it confirmed, then close. Whatever is
    /// not confirmed by `deadline` fails. ``isDrained`` turns true when done.
    public mutating func drain(deadline: Duration, now: Duration) {
        drainDeadline = min(drainDeadline ?? deadline, deadline)
        connectIfNeeded(now)
        checkDrained()
    }

    /// A signal (the shell's first): drain as ``drain(deadline:now:)`` does, except
    /// that when no connection is up and the attempts are failing (an outage, or
    /// no connection ever made), what is queued fails now, naming the endpoint and
    /// the last error, instead of waiting for a connection until the deadline.
    public mutating func stop(deadline: Duration, now: Duration) {
        if !isReady, outageSince != nil, !queue.isEmpty {
            failQueue(OutcomeReason(.shutdownDeadline,
                "stopped by a signal while the gateway \(endpoint) could not be reached (\(connectFailures) failed attempts): \(lastError ?? "unknown error")"))
            if case .waiting = phase { phase = .idle }
        }
        drain(deadline: deadline, now: now)
    }

    /// When ``timer(now:)`` should next be called.
    public var nextDeadline: Duration? {
        var next = isDrained ? nil : drainDeadline
        func consider(_ t: Duration?) {
            guard let t else { return }
            next = next.map { min($0, t) } ?? t
        }
        switch phase {
        case .waiting(let until): consider(until)
        case .connecting(_, let since): consider(since + policy.connectTimeout)
        case .ready: consider(answerDue)
        default: break
        }
        return next
    }

    /// When ``pollWrite(into:now:)`` will next want to write a probe, if the
    /// connection takes writes then (a shell whose connection is blocked waits
    /// for it to drain instead).
    public var nextWriteDeadline: Duration? {
        guard case .ready = phase, probeSentAt == nil, let opened = windowOpenedAt else { return nil }
        let byAge = opened + policy.confirmAfter
        return queue.isEmpty ? min(byAge, lastWriteAt + policy.idleConfirmAfter) : byAge
    }

    /// When the connection counts as stalled if no answer has come.
    var answerDue: Duration? {
        if let sent = probeSentAt { return sent + policy.answerTimeout }
        // A probe that could not even be written (the gateway stopped reading) still times out.
        return windowOpenedAt.map { $0 + policy.confirmAfter + policy.answerTimeout }
    }

    /// The actions to perform, in order.
    public mutating func takeActions() -> [Action] {
        if actions.isEmpty { return [] }
        defer { actions.removeAll(keepingCapacity: true) }
        return actions
    }

    /// The outcomes decided since the last call.
    public mutating func takeOutcomes() -> [OutcomeRecord] {
        // Nothing to hand over: no new buffer (emptying a shared one allocates one).
        if outcomes.isEmpty { return [] }
        defer { outcomes.removeAll(keepingCapacity: true) }
        return outcomes
    }

    // MARK: - Writing

    /// Appends the next frames to write on the ready connection to `sink`
    /// (about ``DeliveryPolicy/writeBytes``), and a probe when it is time to
    /// ask for confirmation. Returns whether it appended anything.
    public mutating func pollWrite<S: FrameSink>(into sink: inout S, now: Duration) -> Bool {
        guard case .ready = phase, probeSentAt == nil else { return false }
        let start = sink.count
        if healthCheck {
            // Only the probe: if the gateway answers it, the gateway works, and the
            // notification it keeps closing on alone is to blame.
            healthCheck = false
            healthCheckInFlight = true
            let probe = DeliveryItem.probe
            sink.appendFrame(probe.frame, identifier: window.append(probe), at: probe.identifierOffset)
            probeSentAt = now
            windowOpenedAt = now
            statistics.probes += 1
            return true
        }
        while sink.count - start < policy.writeBytes, window.count < cap, budget != 0, let item = queue.popFirst() {
            if let b = budget {
                budget = b - 1
                suspects -= 1
            }
            // Written, then moved into the window (read after it went in, it was copied: a
            // retain and a release of its frame).
            sink.appendFrame(item.frame, identifier: window.nextIdentifier, at: item.identifierOffset)
            window.append(consume item)
            if windowOpenedAt == nil { windowOpenedAt = now }
        }
        if sink.count > start {
            lastWriteAt = now
            statistics.writes += 1
        }
        if shouldProbe(now: now) {
            let probe = DeliveryItem.probe
            sink.appendFrame(probe.frame, identifier: window.append(probe), at: probe.identifierOffset)
            probeSentAt = now
            statistics.probes += 1
        }
        return sink.count > start
    }

    func shouldProbe(now: Duration) -> Bool {
        guard probeSentAt == nil, let opened = windowOpenedAt else { return false }
        if budget == 0 || window.count >= cap || now - opened >= policy.confirmAfter { return true }
        return queue.isEmpty && (drainDeadline != nil || now - lastWriteAt >= policy.idleConfirmAfter)
    }
}
