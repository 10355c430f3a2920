import HeraldCore

/// The machine's internals: opening streams, ending them, resending and failing.
extension HTTP2DeliveryMachine {
    func slot(of c: Int) -> Int? { slots.firstIndex { $0.connection?.id == c } }

    /// Opens connections for waiting work, and fills ready connections' free streams.
    mutating func pump(now: Duration) {
        guard failure == nil else { return }
        if delayed.contains(where: { $0.notBefore <= now }) {
            let due = delayed.filter { $0.notBefore <= now }
            delayed.removeAll { $0.notBefore <= now }
            queue.prepend(contentsOf: due.sorted { $0.sequence < $1.sequence })
        }
        for s in slots.indices {
            if slots[s].connection == nil {
                guard !queue.isEmpty, slots[s].retryAt <= now else { continue }
                lastConnection += 1
                statistics.connections += 1
                slots[s].connection = Connection(id: lastConnection, since: now, lastActivity: now)
                actions.append(.connect(lastConnection))
                continue
            }
            guard slots[s].connection!.ready else { continue }
            let connID = slots[s].connection!.id
            var room = slots[s].connection!.maxStreams - slots[s].connection!.openCount
            while room > 0, let item = bulkStreams.allows(bulkInFlight: bulkInFlight) ? queue.popFirst() : queue.popFast() {
                let authorization: String?
                do { authorization = try bearer(now: now) } catch {
                    queue.prepend(item)
                    fail(OutcomeReason(.credentialRejected, error.description))
                    return
                }
                lastStream += 1
                statistics.streams += 1
                if item.lane == .bulk { bulkInFlight += 1 }
                slots[s].connection!.openCount += 1
                slots[s].connection!.lastActivity = now
                actions.append(.send(connection: connID, stream: lastStream, authorization: authorization))
                // The item's last use: moved into its entry, not copied (the send reads its request there).
                inFlight.insert(InFlight(item: consume item, connection: connID, sentAt: now, deadline: now + policy.requestTimeout, authorization: authorization), at: lastStream)
                room -= 1
            }
        }
    }

    /// The `authorization` header for a request sent at `now` (nil without provider tokens).
    /// The shared tokens (a lock every machine of the transport takes) are asked once a
    /// second, and the header is built once a token, not once a request: a token changes
    /// only when it is refreshed (on the second) or when APNs calls it expired, which
    /// forgets the one kept (``refreshToken(_:sentWith:_:now:)``). A token another machine
    /// signed meanwhile is taken within the second.
    mutating func bearer(now: Duration) throws(ProviderTokenError) -> String? {
        guard let tokens else { return nil }
        let second = Int64(now.components.seconds)
        if let kept = bearerCache, kept.second == second { return kept.header }
        let token = try tokens.token(now: second)
        let header = bearerCache.flatMap { $0.token == token ? $0.header : nil } ?? "bearer " + token
        bearerCache = (token, header, second)
        return header
    }

    /// Stream `stream`'s request, no longer on a stream (the bulk lane's count kept with it).
    mutating func takeInFlight(_ stream: Int) -> InFlight? {
        guard let f = inFlight.remove(stream) else { return nil }
        if f.item.lane == .bulk { bulkInFlight -= 1 }
        return f
    }

    /// Removes a stream from its connection; a retiring connection closes once empty.
    mutating func endStream(_ stream: Int, now: Duration) -> InFlight? {
        guard let f = takeInFlight(stream) else { return nil }
        if let s = slot(of: f.connection) {
            slots[s].connection!.openCount -= 1
            slots[s].connection!.lastActivity = now
        } else if retiring[f.connection] != nil {
            retiring[f.connection]!.openCount -= 1
            if retiring[f.connection]!.openCount == 0 {
                retiring[f.connection] = nil
                actions.append(.close(f.connection))
            }
        }
        return f
    }

    /// Takes slot `s`'s connection out of service (GOAWAY, `Shutdown`…): no new
    /// streams on it, closed once its open streams end; the slot connects again at once.
    mutating func retire(_ s: Int, now: Duration) {
        guard let conn = slots[s].connection else { return }
        slots[s].connection = nil
        slots[s].retryAt = now
        if conn.openCount == 0 { actions.append(.close(conn.id)) } else { retiring[conn.id] = conn }
    }

    mutating func resendOpenStreams(of conn: Connection, now: Duration) {
        let open = conn.openCount == 0 ? [] : inFlight.keys.filter { inFlight.withValue($0) { $0.connection == conn.id } == true }
        for stream in open {
            guard var f = takeInFlight(stream) else { continue }
            resendUnanswered(&f.item, unprocessed: false, why: "the connection ended before an answer", now: now)
        }
    }

    /// A request that ended without an answer goes again; `unprocessed` ones were never seen by APNs.
    mutating func resendUnanswered(_ item: inout HTTP2Item, unprocessed: Bool, why: String, now: Duration) {
        if let failure {
            outcomes.append(item.record(.failed(failure)))
            return
        }
        if unprocessed {
            statistics.resentUnprocessed += 1
            queue.prepend(item)
            return
        }
        item.attempts += 1
        guard item.attempts < policy.maxAttempts else {
            outcomes.append(item.record(.failed(OutcomeReason(.closedWithoutAnswer, "no answer after \(item.attempts) sends: \(why)"))))
            return
        }
        statistics.resentUnanswered += 1
        item.resentUnanswered = true
        queue.prepend(item)
    }

    /// Ends what waits (queued and delayed) with `reason`.
    mutating func failWaiting(_ reason: OutcomeReason) {
        outcomes += queue.removeAll().map { $0.record(.failed(reason)) }
        outcomes += delayed.map { $0.record(.failed(reason)) }
        delayed.removeAll()
    }

    /// Deliveries cannot go on: what waits fails now, and so will anything enqueued later.
    mutating func fail(_ reason: OutcomeReason) {
        if failure == nil { failure = reason }
        failWaiting(failure!)
    }
}
