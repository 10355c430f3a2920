import HeraldCore

extension DeliveryMachine {
    /// The gateway's error response on connection `c`: it confirms, rejects and
    /// discards; the connection is over either way.
    mutating func answered(_ response: ErrorResponse, on c: Int, now: Duration) {
        statistics.errorResponses += 1
        if response.status == .shutdown { statistics.shutdowns += 1 }
        let r = window.resolve(response)
        var acceptedCount = 0
        outcomes.reserveCapacity(outcomes.count + r.accepted.count)
        for i in r.accepted.indices where !r.accepted[i].isProbe {  // read in place, not copied
            outcomes.append(r.accepted[i].record(.accepted))
            acceptedCount += 1
        }
        var confirmed = acceptedCount > 0
        var probeAnswered = false
        var rejectedOne = false
        if let (item, status) = r.rejected {
            if item.isProbe {
                probeAnswered = true
            } else {
                outcomes.append(item.record(.rejected(status)))
                confirmed = true
                rejectedOne = true
            }
        }
        let resend = r.resend.filter { !$0.isProbe }
        actions.append(.close(c))
        phase = .idle
        guard r.identifierMatched else {
            // Nothing in flight can be told apart: as a close with no answer.
            statistics.unmatchedResponses += 1
            lastError = "the gateway \(endpoint) answered \(response) for a notification no longer in flight"
            lost(resend, now: now, stalled: false)
            return
        }
        healthCheckInFlight = false
        if confirmed || probeAnswered {
            confirmations += 1
            stuckCloses = 0
            stuckSince = nil
            lastSilentCount = .max
        }
        adaptCap(accepted: acceptedCount, rejected: rejectedOne, cleanProbe: probeAnswered && resend.isEmpty)
        // Discarded by the gateway, so not delivered here; while isolating, they stay suspects.
        requeue(resend, suspect: budget != nil)
        connectIfNeeded(now)
    }

    /// Sets how far ahead of the gateway the connection writes, from the
    /// distance between rejections seen so far (see ``DeliveryPolicy/minUnconfirmed``).
    mutating func adaptCap(accepted: Int, rejected: Bool, cleanProbe: Bool) {
        confirmedSinceRejection += accepted
        if rejected {
            let gap = confirmedSinceRejection
            confirmedSinceRejection = 0
            let mean = meanGap.map { ($0 * 3 + gap) / 4 } ?? gap
            meanGap = mean
            // While suspects are isolated, the bisection sets the limit.
            guard budget == nil && suspects == 0 else { return }
            // A probe costs a reconnection like an error response does, and a
            // notification written past an error costs one resend: about twice
            // the usual distance between rejections balances the two.
            cap = max(policy.minUnconfirmed, min(policy.maxUnconfirmed, 2 * mean + 1))
        } else if cleanProbe {
            cap = min(policy.maxUnconfirmed, cap * 2)
        }
    }

    /// Connection `c` ended with no answer (closed, reset, stalled or garbled).
    mutating func silentClose(_ c: Int, now: Duration, stalled: Bool) {
        phase = .idle
        lost(window.connectionLost().filter { !$0.isProbe }, now: now, stalled: stalled)
    }

    /// Notifications in flight on a connection that ended with no usable
    /// answer: each may or may not have been taken. They are written again as
    /// suspects, with half as many in flight per connection, so that a
    /// notification the gateway closes on ends up alone.
    mutating func lost(_ items: [DeliveryItem], now: Duration, stalled: Bool) {
        var items = items
        let wasHealthCheck = healthCheckInFlight
        healthCheckInFlight = false
        guard !items.isEmpty else {
            if wasHealthCheck {
                // The gateway closed on a probe alone: it is the gateway that fails. Ask again, backing off.
                healthCheck = true
                statistics.silentCloses += 1
                noteStuckClose(now)
                failIfOutageTooLong(now)
                reconnect(afterFailures: stuckCloses, now: now)
            } else {
                connectIfNeeded(now)
            }
            return
        }
        statistics.silentCloses += 1
        if stalled || items.count >= lastSilentCount { noteStuckClose(now) }
        lastSilentCount = items.count
        cap = max(1, min(cap, items.count) / 2)
        // A stall is the gateway's doing (it stopped reading), not the notification's.
        if items.count == 1 && !stalled {
            items[0].aloneCloses += 1
            let mark = items[0].confirmationsAtFirstAloneClose ?? confirmations
            items[0].confirmationsAtFirstAloneClose = mark
            if items[0].aloneCloses >= policy.maxSilentCloses {
                if confirmations > mark {
                    // The gateway answered for others since: this notification is what it closes on.
                    let why = lastError.map { " (last: \($0))" } ?? ""
                    outcomes.append(items[0].record(.failed(OutcomeReason(.closedWithoutAnswer,
                        "the gateway \(endpoint) closed the connection \(items[0].aloneCloses) times with no answer while only this "
                            + "notification was in flight, and answered for others in between\(why)"))))
                    items.removeAll()
                } else {
                    healthCheck = true
                }
            }
        }
        statistics.resentAfterSilentClose += items.count
        for i in items.indices { items[i].resentAfterSilentClose = true }
        // Alone and closed on: let the other suspects go first, so the gateway shows whether it answers at all.
        requeue(items, suspect: true, at: items.count == 1 ? suspects : 0)
        failIfOutageTooLong(now)
        reconnect(afterFailures: stuckCloses, now: now)
    }

    /// A silent close that narrowed nothing down (or a stall).
    mutating func noteStuckClose(_ now: Duration) {
        stuckCloses += 1
        if stuckSince == nil { stuckSince = now }
    }

    /// Silent closes that narrow nothing down, for longer than ``DeliveryPolicy/maxOutage``: what is queued fails.
    mutating func failIfOutageTooLong(_ now: Duration) {
        guard let since = stuckSince, stuckCloses > policy.maxSilentCloses, now - since >= policy.maxOutage else { return }
        failQueue(OutcomeReason(.gatewayUnreachable,
            "the gateway \(endpoint) ended \(stuckCloses) connections in a row with no answer over \(Self.describe(now - since))"
                + (lastError.map { " (last: \($0))" } ?? "")))
    }

    /// Puts notifications back in the queue, in order, at `index` (the front by default).
    mutating func requeue(_ items: [DeliveryItem], suspect: Bool, at index: Int = 0) {
        guard !items.isEmpty else { return }
        queue.insert(contentsOf: items, at: index)
        statistics.resent += items.count
        if suspect { suspects += items.count }
    }

    /// Every queued notification fails with `reason`.
    mutating func failQueue(_ reason: OutcomeReason) {
        outcomes.append(contentsOf: queue.map { $0.record(.failed(reason)) })
        queue.removeAll()
        suspects = 0
        budget = nil
    }

    /// A permanent problem: everything fails now, and everything enqueued later.
    mutating func failEverything(_ reason: OutcomeReason) {
        failQueue(reason)
        phase = .failed(reason)
        checkDrained()
    }

    mutating func drainTimedOut() {
        // Say what stood in the way: what was written waits for an answer; what
        // was never written waits for a connection (and the last error says why).
        let why = lastError.map { " (last: \($0))" } ?? ""
        let unconfirmed = OutcomeReason(.shutdownDeadline, "written, but not confirmed by the gateway \(endpoint) before the shutdown deadline\(why)")
        outcomes.append(contentsOf: window.connectionLost().filter { !$0.isProbe }.map { $0.record(.failed(unconfirmed)) })
        failQueue(OutcomeReason(.shutdownDeadline, isReady
            ? "not written before the shutdown deadline: the gateway \(endpoint) took too long to read\(why)"
            : "not sent before the shutdown deadline: no connection to the gateway \(endpoint)\(why)"))
        if case .ready(let c) = phase { actions.append(.close(c)) }
        if case .failed = phase {} else { phase = .idle }
        checkDrained()
    }

    mutating func checkDrained() {
        guard drainDeadline != nil, !isDrained, queue.isEmpty, window.isEmpty else { return }
        switch phase {
        case .ready(let c): actions.append(.close(c))
        case .connecting(let c, _): actions.append(.close(c))
        default: break
        }
        if case .failed = phase {} else { phase = .idle }
        isDrained = true
    }
}

extension DeliveryMachine {
    /// Nothing queued and nothing in flight: every notification handed in has its outcome.
    public var isSettled: Bool { queue.isEmpty && window.isEmpty }

    /// Gives up at once (a second signal, a shell that cannot go on): what is
    /// in flight and queued fails with `reason`, and so does everything
    /// enqueued later; the connection is closed.
    public mutating func abandon(_ message: String) {
        let reason = OutcomeReason(.abandoned, message)
        outcomes.append(contentsOf: window.connectionLost().filter { !$0.isProbe }.map { $0.record(.failed(reason)) })
        switch phase {
        case .ready(let c), .connecting(let c, _): actions.append(.close(c))
        default: break
        }
        failEverything(reason)
    }
}

extension DeliveryMachine {
    /// Whether connection `c` is the one the machine is waiting to complete its handshake.
    public func isConnecting(_ c: Int) -> Bool {
        if case .connecting(c, _) = phase { true } else { false }
    }
}
