import HeraldCore

extension HTTP2DeliveryMachine {
    /// APNs answered stream `stream`.
    public mutating func answered(_ stream: Int, _ response: APNsResponse, now: Duration) {
        guard let f = endStream(stream, now: now) else { return }
        bulkStreams.answered(sentAt: f.sentAt, now: now, bulkInFlight: bulkInFlight)
        latency.record(nanoseconds: UInt64(clamping: (now - f.sentAt).inNanoseconds))
        let status = Status(http: response.status, reason: response.reason)
        // An answer that ends the request reads its item where it lies; only a retry takes a copy, to change.
        switch response.disposition {
        case .accepted:
            outcomes.append(f.item.record(.accepted, response))
            if keepsSpent { spent.append(consume f) }
        case .rejected:
            outcomes.append(f.item.record(.rejected(status), response))
        case .unregistered:
            if f.item.token.count > 0 { deadTokens.append((f.item.token, response.timestamp)) }
            outcomes.append(f.item.record(.rejected(status), response))
        case .credentialRejected:
            let why = OutcomeReason(.credentialRejected, "APNs refused the credential: \(response.status) \(response.reason ?? "")")
            outcomes.append(f.item.record(.failed(why), response))
            fail(why)
        case .retryLater:
            retry(f.item, after: policy.retryLaterDelay, response, now: now)
        case .retryElsewhere:
            if let s = slot(of: f.connection), response.reason == "Shutdown" || response.reason == "IdleTimeout" { retire(s, now: now) }
            retry(f.item, after: policy.backoff.delay(afterFailures: f.item.attempts + 1, using: &random), response, now: now)
        case .newConnection:
            if let s = slot(of: f.connection) { retire(s, now: now) }
            retry(f.item, after: .zero, response, now: now)
        case .refreshToken:
            refreshToken(f.item, sentWith: f.authorization, response, now: now)
        case .tooManyTokenUpdates:
            tokens?.tooManyUpdates(now: Int64(now.components.seconds))
            retry(f.item, after: policy.retryLaterDelay, response, now: now)
        }
        pump(now: now)
    }

    /// Sends `item` again after `delay`, unless it has been tried ``HTTP2DeliveryPolicy/maxAttempts`` times.
    mutating func retry(_ item: consuming HTTP2Item, after delay: Duration, _ response: APNsResponse, now: Duration) {
        if let failure {
            outcomes.append(item.record(.failed(failure), response))
            return
        }
        item.attempts += 1
        guard item.attempts < policy.maxAttempts else {
            let why = "APNs answered \(response.status) \(response.reason ?? "") \(item.attempts) times"
            outcomes.append(item.record(.failed(OutcomeReason(.apnsUnavailable, why)), response))
            return
        }
        statistics.retried += 1
        item.notBefore = now + delay
        if delay == .zero { queue.prepend(item) } else { delayed.append(item) }
    }

    /// `ExpiredProviderToken`: the token rules decide (``ProviderTokens/expired(_:now:)``).
    mutating func refreshToken(_ item: consuming HTTP2Item, sentWith authorization: String?, _ response: APNsResponse, now: Duration) {
        if let failure {
            outcomes.append(item.record(.failed(failure), response))
            return
        }
        // The kept header is asked for again: the token may be replaced now (or was, by another machine).
        bearerCache = nil
        guard let tokens, let sent = authorization?.dropFirst("bearer ".count) else {
            outcomes.append(item.record(.failed(OutcomeReason(.credentialRejected, "APNs wants a provider token and none is configured")), response))
            return
        }
        let action: ProviderTokens.ExpiredAction
        do { action = try tokens.expired(String(sent), now: Int64(now.components.seconds)) } catch {
            let why = OutcomeReason(.credentialRejected, error.description)
            outcomes.append(item.record(.failed(why), response))
            fail(why)
            return
        }
        statistics.retried += 1
        switch action {
        case .resend: queue.prepend(item)
        case .resendAt(let seconds):
            item.notBefore = .seconds(seconds)
            delayed.append(item)
        case .fail(let message):
            let why = OutcomeReason(.credentialRejected, message)
            outcomes.append(item.record(.failed(why), response))
            fail(why)
        }
    }
}
