import HeraldCore

/// APNs' HTTP/2 delivery rules for a set of connections, as a sans-I/O state
/// machine: events in, actions out, no sockets, no clock (every event carries
/// `now`, the time since 1970, which also dates provider tokens).
///
/// **Driving it.** A shell owns the connections and the timer:
/// - hand it requests with ``enqueue(_:now:)``;
/// - perform ``takeActions()`` in order: ``Action/connect(_:)`` opens connection
///   *n* (report ``connected(_:maxStreams:now:)`` once HTTP/2 is up, or
///   ``closed(_:reason:now:)``); ``Action/send(connection:stream:authorization:)``
///   opens a stream for the request ``withRequest(ofStream:_:)`` lends; ``Action/cancel(connection:stream:)`` resets one; ``Action/ping(_:)``;
///   ``Action/close(_:)``;
/// - report each stream's end: ``answered(_:_:now:)`` with APNs' answer, or
///   ``streamFailed(_:unprocessed:reason:now:)`` (`unprocessed`: GOAWAY above
///   its stream id, or `REFUSED_STREAM`: APNs never saw it);
/// - report ``settingsChanged(_:maxStreams:now:)``, ``goAway(_:reason:now:)``,
///   ``pong(_:now:)``; call ``timer(now:)`` at ``nextDeadline``;
/// - record ``takeOutcomes()``, and ``takeDeadTokens()`` in the token store.
///
/// **What it decides.** Each connection carries at most its
/// `SETTINGS_MAX_CONCURRENT_STREAMS` streams (a token-auth connection starts at
/// 1). An answer decides a request by ``APNsDisposition``: accepted, rejected
/// (410s also reported as dead tokens with their timestamp), or sent again
/// (429 after a delay, 500/503/`Shutdown` with backoff, an expired provider
/// token once re-signed). A GOAWAY stops new streams on its connection; what
/// APNs did not process goes out on another. A stream that ends without an
/// answer after APNs may have read it is sent again and counted
/// (``HTTP2Statistics/resentUnanswered``): the only possible duplicates. A
/// credential APNs refuses ends the run's deliveries with one reason.
public struct HTTP2DeliveryMachine: Sendable {
    public enum Action: Sendable, Hashable {
        case connect(Int)
        /// Open stream `stream` on `connection` for its request (``withRequest(ofStream:_:)``: kept
        /// by the machine, not copied into the action). A stream the machine has ended since
        /// (its connection closed while the actions waited) has no request: nothing to send.
        case send(connection: Int, stream: Int, authorization: String?)
        case cancel(connection: Int, stream: Int)
        case ping(Int)
        case close(Int)
    }

    /// Why a connection ended.
    public enum CloseReason: Sendable, Hashable {
        /// Worth another connection.
        case transient(String?)
        /// Another connection would end the same way (TLS refused our certificate…).
        case permanent(String)
    }

    struct Connection: Sendable {
        var id: Int
        var ready = false
            var since: Duration
        var maxStreams = 1
        /// Streams open on it. Which ones is in ``inFlight`` (their `connection`), searched only when
        /// the connection ends: a set kept here cost a hash insert and removal on every request.
        var openCount = 0
        var lastActivity: Duration
        var pingSentAt: Duration?
    }

    struct Slot: Sendable {
        var connection: Connection?
        var retryAt: Duration = .zero
        var failures = 0
    }

    struct InFlight: Sendable {
        var item: HTTP2Item
        var connection: Int
        var sentAt: Duration
        var deadline: Duration
        var authorization: String?
    }

    public let policy: HTTP2DeliveryPolicy
    /// The team's provider token, shared with every other machine of the same transport.
    public let tokens: SharedProviderTokens?
    /// The current token's `authorization` header and the second it was read at (``bearer(now:)``).
    var bearerCache: (token: String, header: String, second: Int64)?
    var slots: [Slot]
    /// Connections after GOAWAY (or an answer that retires them) with streams still open:
    /// out of their slot, which opens a replacement at once.
    var retiring: [Int: Connection] = [:]
    var lastConnection = 0
    var lastStream = 0
    /// What waits for a stream, by lane (the fast lane first, the bulk lane's share kept).
    var queue = LaneQueue<HTTP2Item>()
    var delayed: [HTTP2Item] = []
    /// Open streams by number, oldest first (the first to time out).
    var inFlight = StreamTable<InFlight>()
    /// Bulk-lane requests on streams, and how many the lane may have (``BulkStreamLimit``).
    var bulkInFlight = 0
    public internal(set) var bulkStreams: BulkStreamLimit
    var outcomes: [OutcomeRecord] = []
    /// With ``keepsSpent``: the entries of requests that ended with their answer, for the shell to
    /// free on another thread (``takeSpent()``).
    var spent: [InFlight] = []
    /// Whether ended requests are kept for ``takeSpent()`` rather than freed where they end: freeing
    /// each request's strings and arrays was the largest single part of an event loop's own work
    /// per answer (perf, `herald bench http2 --url`).
    public var keepsSpent = false
    var actions: [Action] = []
    var deadTokens: [(DeviceToken, Int64?)] = []
    var random: SeededGenerator
    /// Set when deliveries cannot go on (a refused credential, a permanent TLS failure): everything ends with it.
    public internal(set) var failure: OutcomeReason?
    /// Since when no connection has been ready (machine time).
    public internal(set) var outageSince: Duration?
    /// The latest failed connection attempt, in words (for outcomes, `/readyz`, the log).
    public internal(set) var lastError: String?
    /// Whether any connection has been ready yet, and attempts failed in a row since the last ready one.
    var everConnected = false
    var failedAttemptsInRow = 0
    /// Lines for a person, to log at warning level as they come (``takeNotices()``).
    var notices: [String] = []
    var drainDeadline: Duration?
    public internal(set) var statistics = HTTP2Statistics()
    /// Time from each answered stream's opening to its answer.
    package internal(set) var latency = LatencyHistogram()

    public init(policy: HTTP2DeliveryPolicy = HTTP2DeliveryPolicy(), tokens: ProviderTokens? = nil, seed: UInt64 = 0) {
        self.init(policy: policy, sharedTokens: tokens.map(SharedProviderTokens.init), seed: seed)
    }

    /// A machine whose provider tokens are shared with other machines (one transport's event loops).
    public init(policy: HTTP2DeliveryPolicy = HTTP2DeliveryPolicy(), sharedTokens tokens: SharedProviderTokens?, seed: UInt64 = 0) {
        self.policy = policy
        self.tokens = tokens
        slots = Array(repeating: Slot(), count: max(1, policy.connections))
        random = SeededGenerator(seed: seed)
        bulkStreams = BulkStreamLimit(target: policy.bulkQueueing)
    }

    // MARK: events

    public mutating func enqueue(_ items: consuming [HTTP2Item], now: Duration) {
        if let failure {
            outcomes += items.map { $0.record(.failed(failure)) }
            return
        }
        queue.append(moving: items)
        if outageSince == nil && !slots.contains(where: { $0.connection?.ready == true }) { outageSince = now }
        pump(now: now)
    }

    public mutating func connected(_ c: Int, maxStreams: Int, now: Duration) {
        guard let s = slot(of: c) else { return }
        slots[s].connection!.ready = true
        slots[s].connection!.maxStreams = max(1, maxStreams)
        slots[s].connection!.lastActivity = now
        slots[s].failures = 0
        if failedAttemptsInRow > 0 {
            notices.append(ConnectNotice.connected(to: "APNs", afterFailures: failedAttemptsInRow))
        }
        everConnected = true
        failedAttemptsInRow = 0
        lastError = nil  // the outage it described is over (/readyz reads it while attempts fail)
        outageSince = nil
        pump(now: now)
    }

    /// What a person should read now (log at warning): the first failed attempt of an
    /// outage, giving up before any connection, and the connection that ends an outage.
    public mutating func takeNotices() -> [String] {
        defer { notices.removeAll() }
        return notices
    }

    /// A signal: like ``drain(deadline:)``, but when no connection is ready and attempts are
    /// failing, what waits fails now, naming the last error, rather than at the deadline.
    public mutating func stop(deadline: Duration, now: Duration) {
        if outageSince != nil, failedAttemptsInRow > 0, hasWaitingWork {
            failWaiting(OutcomeReason(.shutdownDeadline,
                "stopped by a signal while no connection to APNs could be made (\(failedAttemptsInRow) failed attempts): \(lastError ?? "unknown error")"))
        }
        drain(deadline: deadline)
    }

    public mutating func settingsChanged(_ c: Int, maxStreams: Int, now: Duration) {
        guard let s = slot(of: c) else { return }
        slots[s].connection!.maxStreams = max(1, maxStreams)
        pump(now: now)
    }

    public mutating func pong(_ c: Int, now: Duration) {
        guard let s = slot(of: c) else { return }
        slots[s].connection!.pingSentAt = nil
        slots[s].connection!.lastActivity = now
    }

    /// APNs will take no new streams on `c`; streams above its last id are reported unprocessed.
    public mutating func goAway(_ c: Int, reason: String?, now: Duration) {
        guard let s = slot(of: c) else { return }
        statistics.goAways += 1
        statistics.lastGoAwayReason = reason
        retire(s, now: now)
        pump(now: now)
    }

    public mutating func streamFailed(_ stream: Int, unprocessed: Bool, reason: String, now: Duration) {
        guard var f = endStream(stream, now: now) else { return }
        resendUnanswered(&f.item, unprocessed: unprocessed, why: reason, now: now)
        pump(now: now)
    }

    public mutating func closed(_ c: Int, reason: CloseReason, now: Duration) {
        if let conn = retiring.removeValue(forKey: c) {
            resendOpenStreams(of: conn, now: now)
            pump(now: now)
            return
        }
        guard let s = slot(of: c) else { return }
        let conn = slots[s].connection!
        slots[s].connection = nil
        if !conn.ready { statistics.connectFailures += 1 }
        resendOpenStreams(of: conn, now: now)
        switch reason {
        case .permanent(let why):
            fail(OutcomeReason(.tlsRefused, why))
        case .transient(let why):
            slots[s].failures += 1
            slots[s].retryAt = now + policy.backoff.delay(afterFailures: slots[s].failures, using: &random)
            if !conn.ready {
                failedAttemptsInRow += 1
                if let why { lastError = why }
                if failedAttemptsInRow == 1 {
                    notices.append(ConnectNotice.firstFailure(
                        lastError ?? "cannot connect to APNs", neverConnected: !everConnected,
                        firstConnectAttempts: policy.firstConnectAttempts, maxOutage: policy.maxOutage))
                }
                if !everConnected, let attempts = policy.firstConnectAttempts, failedAttemptsInRow >= attempts {
                    if hasWaitingWork {
                        failWaiting(OutcomeReason(.gatewayUnreachable,
                            "\(lastError ?? "cannot connect to APNs") (\(failedAttemptsInRow) attempts, no connection ever made: check the transport's host and port)"))
                        // Said once, when the rule first applies, as the binary machine does.
                        if failedAttemptsInRow == attempts { notices.append(ConnectNotice.gaveUp(on: "APNs", attempts: attempts)) }
                    }
                    // What comes later: one attempt each, at once.
                    for k in slots.indices { slots[k].retryAt = now }
                }
            }
        }
        if outageSince == nil && !slots.contains(where: { $0.connection?.ready == true }) { outageSince = now }
        pump(now: now)
    }

    public mutating func timer(now: Duration) {
        // Deadlines follow the streams' order: the oldest open stream is the first due.
        while let stream = inFlight.firstKey, let (deadline, connection) = inFlight.withValue(stream, { ($0.deadline, $0.connection) }),
              deadline <= now {
            statistics.timeouts += 1
            actions.append(.cancel(connection: connection, stream: stream))
            streamFailed(stream, unprocessed: false, reason: "no answer in \(policy.requestTimeout)", now: now)
        }
        for s in slots.indices {
            guard let conn = slots[s].connection else { continue }
            if !conn.ready && now - conn.since >= policy.connectTimeout {
                actions.append(.close(conn.id))
                closed(conn.id, reason: .transient("not ready after \(policy.connectTimeout)"), now: now)
            } else if let sent = conn.pingSentAt, now - sent >= policy.pingTimeout {
                actions.append(.close(conn.id))
                closed(conn.id, reason: .transient("PING unanswered for \(policy.pingTimeout)"), now: now)
            } else if conn.ready && conn.openCount == 0 && conn.pingSentAt == nil && now - conn.lastActivity >= policy.idlePing {
                slots[s].connection!.pingSentAt = now
                statistics.pings += 1
                actions.append(.ping(conn.id))
            }
        }
        if let since = outageSince, now - since >= policy.maxOutage, hasWaitingWork {
            failWaiting(OutcomeReason(.gatewayUnreachable, "no connection to APNs was ready for \(policy.maxOutage)" + (lastError.map { ": \($0)" } ?? "")))
        }
        if let d = drainDeadline, now >= d {
            let noConnection = outageSince != nil ? (lastError.map { "; no connection to APNs was ready (last: \($0))" } ?? "; no connection to APNs was ready") : ""
            abandon(OutcomeReason(.shutdownDeadline, "shutting down: no answer before the drain deadline" + noConnection), now: now)
        }
        pump(now: now)
    }

    /// Shutdown: what is queued still goes; at `deadline` what is left fails.
    public mutating func drain(deadline: Duration) { drainDeadline = deadline }

    /// Gives up on everything at once: queued, delayed and in flight.
    public mutating func abandon(_ reason: OutcomeReason, now: Duration) {
        for (stream, f) in inFlight.removeAll() {
            actions.append(.cancel(connection: f.connection, stream: stream))
            outcomes.append(f.item.record(.failed(reason)))
        }
        bulkInFlight = 0
        for s in slots.indices { slots[s].connection?.openCount = 0 }
        for c in retiring.keys { retiring[c]!.openCount = 0 }
        failWaiting(reason)
    }

    // MARK: outputs

    public mutating func takeActions() -> [Action] { defer { actions.removeAll() }; return actions }

    /// `body` on the request of open stream `stream` (a ``Action/send(connection:stream:authorization:)``'s),
    /// where the machine keeps it, with what the transport prepared of it (``HTTP2Item/prepared``);
    /// false (and `body` not called) when the stream has ended.
    /// `mutating` only so that a shell keeping the machine in a class reads it in place (a
    /// non-mutating call copied the whole machine first); `body` must not touch the machine.
    public mutating func withRequest(ofStream stream: Int, _ body: (borrowing APNsRequest, (any AnyObject & Sendable)?) -> Void) -> Bool {
        // Through the table's in-place access: unwrapping a read of its optional slot copied the entry.
        inFlight.update(stream) { body($0.item.carried.request, $0.item.prepared) } != nil
    }
    public mutating func takeOutcomes() -> [OutcomeRecord] { defer { outcomes.removeAll() }; return outcomes }
    /// Tokens APNs answered 410 for, with its timestamp (milliseconds since 1970), for the token store.
    public mutating func takeDeadTokens() -> [(DeviceToken, Int64?)] { defer { deadTokens.removeAll() }; return deadTokens }
    /// Requests ended since the last ``takeSpent()`` (kept with ``keepsSpent``).
    public var spentCount: Int { spent.count }
    /// What ended requests held, to be freed by whoever releases it: nothing in it is read again.
    public struct Spent: Sendable { var entries: [InFlight] }
    public mutating func takeSpent() -> Spent {
        var taken: [InFlight] = []
        swap(&taken, &spent)
        return Spent(entries: taken)
    }

    /// Nothing queued, waiting or in flight.
    public var isSettled: Bool { queue.isEmpty && delayed.isEmpty && inFlight.isEmpty }
    var hasWaitingWork: Bool { !queue.isEmpty || !delayed.isEmpty }

    /// When ``timer(now:)`` is next due.
    public var nextDeadline: Duration? {
        var d: [Duration] = delayed.map(\.notBefore)
        if let first = inFlight.firstKey, let deadline = inFlight.withValue(first, { $0.deadline }) { d.append(deadline) }
        for slot in slots {
            if let c = slot.connection {
                if !c.ready { d.append(c.since + policy.connectTimeout) }
                else if let p = c.pingSentAt { d.append(p + policy.pingTimeout) }
                else if c.openCount == 0 { d.append(c.lastActivity + policy.idlePing) }
            } else if !queue.isEmpty {
                d.append(slot.retryAt)
            }
        }
        if let since = outageSince, hasWaitingWork { d.append(since + policy.maxOutage) }
        if let drainDeadline { d.append(drainDeadline) }
        return d.min()
    }

}
