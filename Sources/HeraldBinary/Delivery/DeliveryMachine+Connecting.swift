import HeraldCore

/// Opening connections, backing off, and holding notifications through an outage.
extension DeliveryMachine {
    mutating func connectIfNeeded(_ now: Duration) {
        guard case .idle = phase, !queue.isEmpty else {
            checkDrained()
            return
        }
        lastConnection += 1
        phase = .connecting(lastConnection, since: now)
        statistics.connections += 1
        actions.append(.connect(lastConnection))
    }

    /// Waits `failures` backoff steps (none for 0) before the next connection.
    mutating func reconnect(afterFailures failures: Int, now: Duration) {
        let delay = policy.backoff.delay(afterFailures: failures, using: &random)
        if delay > .zero && !queue.isEmpty {
            phase = .waiting(until: now + delay)
        } else {
            phase = .idle
            connectIfNeeded(now)
        }
    }

    mutating func connectFailed(_ reason: CloseReason, now: Duration) {
        statistics.connectFailures += 1
        connectFailures += 1
        phase = .idle
        switch reason {
        case .permanent(let why):
            failEverything(OutcomeReason(.tlsRefused, why))
            return
        case .transient(let why):
            if let why { lastError = why }
        }
        if outageSince == nil {
            notices.append(ConnectNotice.firstFailure(
                lastError ?? "cannot connect to the gateway \(endpoint)", neverConnected: statistics.handshakes == 0,
                firstConnectAttempts: policy.firstConnectAttempts, maxOutage: policy.maxOutage))
        }
        let since = outageSince ?? now
        outageSince = since
        if statistics.handshakes == 0, let attempts = policy.firstConnectAttempts, connectFailures >= attempts {
            // Never connected: a wrong host or port, a service not started. Fail now, and give what
            // comes later one attempt each, at once (no backoff wait in between).
            if !queue.isEmpty {
                failQueue(OutcomeReason(.gatewayUnreachable,
                    "\(lastError ?? "cannot connect to the gateway \(endpoint)") (\(connectFailures) attempts in \(Self.describe(now - since)), "
                        + "no connection ever made: check the transport's host and port)"))
                // Said once, when the rule first applies; later single attempts fail with the same reason.
                if connectFailures == attempts { notices.append(ConnectNotice.gaveUp(on: "the gateway \(endpoint)", attempts: attempts)) }
            }
            checkDrained()
            return
        }
        if now - since >= policy.maxOutage {
            failQueue(OutcomeReason(.gatewayUnreachable,
                "the gateway \(endpoint) could not be reached for \(Self.describe(now - since)) (\(connectFailures) attempts): "
                    + (lastError ?? "unknown error")))
        }
        reconnect(afterFailures: connectFailures, now: now)
    }

    /// A duration in plain words: "1.5 s".
    static func describe(_ d: Duration) -> String {
        let s = d.inSeconds
        return s < 10 ? "\(Double(Int(s * 10)) / 10) s" : "\(Int(s)) s"
    }
}
