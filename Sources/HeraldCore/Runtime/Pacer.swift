import DequeModule
import HeapModule

/// Pacing (issue 30), sans-I/O: what may go to the transport now, given a rate for the whole
/// transport (an app: a token bucket) and a least interval between two notifications to one
/// device token (APNs answers 429 `TooManyRequests` to bursts at one device). Envelopes in,
/// envelopes out; the caller gives the time and sends what comes out. What waits keeps its
/// order: per device token first in, first out, then across tokens in the order each became
/// free to go. With ``Rules/collapse``, a notification waiting for its token's turn is
/// replaced by a newer one to the same token with the same `collapse-id` (the device would
/// show only the newer): the older comes out as collapsed, to be recorded `dropped`.
package struct Pacer: Sendable {
    package struct Rules: Sendable, Hashable {
        /// Notifications a second for the whole transport; nil: no limit.
        package var perSecond: Double?
        /// How many may go at once after a quiet spell (the bucket's size).
        package var burst: Int
        /// The least time between two notifications to one device token; nil: no limit.
        package var perToken: Duration?
        /// Replace a waiting notification by a newer one with the same token and `collapse-id`.
        package var collapse: Bool
        package init(perSecond: Double? = nil, burst: Int? = nil, perToken: Duration? = nil, collapse: Bool = false) {
            self.perSecond = perSecond
            self.burst = max(1, burst ?? perSecond.map { Int($0.rounded(.up)) } ?? 1)
            self.perToken = perToken
            self.collapse = collapse
        }
        package var isNone: Bool { perSecond == nil && perToken == nil }
    }

    /// What an offer or a release gave: envelopes to send now, and envelopes replaced while they
    /// waited (to be recorded `dropped`, collapsed).
    package struct Output: Sendable {
        package var send: [Envelope] = []
        package var collapsed: [Envelope] = []
    }

    /// A device token's next turn, for the heap of tokens with notifications waiting.
    struct Turn: Comparable {
        var at: ContinuousClock.Instant
        var token: DeviceToken
        static func < (a: Turn, b: Turn) -> Bool { a.at < b.at }
        static func == (a: Turn, b: Turn) -> Bool { a.at == b.at && a.token == b.token }
    }

    package let rules: Rules
    /// The bucket: notifications that may go now, as of `filledAt`.
    var bucket: Double
    var filledAt: ContinuousClock.Instant?
    /// Notifications free to go as far as their tokens go, waiting for the bucket.
    var waitingForRate = Deque<Envelope>()
    /// Each device token's next turn (entries in the past are forgotten from time to time).
    var nextTurn: [DeviceToken: ContinuousClock.Instant] = [:]
    /// Notifications waiting for their token's turn, by token, and the tokens' turns.
    var waitingForToken: [DeviceToken: Deque<Envelope>] = [:]
    var turns = Heap<Turn>()
    /// Tokens with a notification waiting for the rate: the token's next turn is counted from when
    /// that one goes, so nothing else of the token goes before it, or too soon after it.
    var busy = Set<DeviceToken>()
    /// Notifications in `waitingForToken`, counted as they come and go (``held`` is read on every send).
    var tokenWaiting = 0
    /// Turns remembered after the last sweep (the sweep runs when the map has doubled).
    var sweptAt = 1024
    /// Counts: held for the rate, held for a token, collapsed.
    package private(set) var heldForRate = 0
    package private(set) var heldForToken = 0
    package private(set) var collapsedCount = 0

    package init(rules: Rules) {
        self.rules = rules
        bucket = Double(rules.burst)
    }

    /// Notifications held now.
    package var held: Int { waitingForRate.count + tokenWaiting }

    /// Takes `batch` at `now`: what may go now comes out in order; the rest waits.
    package mutating func offer(_ batch: [Envelope], now: ContinuousClock.Instant) -> Output {
        var out = Output()
        refill(now)
        for e in batch {
            guard let interval = rules.perToken, e.outcome == nil, !e.request.isBroadcast else {
                admit(e, into: &out)
                continue
            }
            let token = e.request.token
            if var queue = waitingForToken[token] {
                if rules.collapse, let id = e.request.collapseID, let i = queue.lastIndex(where: { $0.request.collapseID == id }) {
                    out.collapsed.append(queue[i])
                    collapsedCount += 1
                    queue[i] = e
                } else {
                    queue.append(e)
                    heldForToken += 1
                    tokenWaiting += 1
                }
                waitingForToken[token] = queue
            } else if busy.contains(token) {
                // Its turn is set when the one waiting for the rate goes.
                waitingForToken[token] = [e]
                heldForToken += 1
                tokenWaiting += 1
            } else if let turn = nextTurn[token], turn > now {
                waitingForToken[token] = [e]
                turns.insert(Turn(at: turn, token: token))
                heldForToken += 1
                tokenWaiting += 1
            } else {
                go(e, token: token, interval: interval, now: now, into: &out)
            }
        }
        sweep(now)
        return out
    }

    /// What may go at `now` of what waits, and when to look again (nil: nothing waits).
    package mutating func release(now: ContinuousClock.Instant) -> (out: Output, next: ContinuousClock.Instant?) {
        var out = Output()
        refill(now)
        if let interval = rules.perToken {
            while let first = turns.min, first.at <= now {
                turns.removeMin()
                guard !busy.contains(first.token), var queue = waitingForToken[first.token], let e = queue.popFirst() else { continue }
                tokenWaiting -= 1
                waitingForToken[first.token] = queue.isEmpty ? nil : queue
                go(e, token: first.token, interval: interval, now: now, into: &out)
            }
        }
        drainBucket(now: now, into: &out)
        var next = turns.min?.at
        if !waitingForRate.isEmpty, let rate = rules.perSecond, let filled = filledAt {
            let refillAt = filled + .seconds((1 - bucket) / rate)
            next = min(next ?? refillAt, refillAt)
        }
        return (out, next)
    }

    /// Everything waiting, taken out (abandoned: the caller records it failed).
    package mutating func removeAll() -> [Envelope] {
        var all = Array(waitingForRate)
        for (_, q) in waitingForToken { all += q }
        waitingForRate.removeAll()
        waitingForToken.removeAll()
        tokenWaiting = 0
        turns = Heap()
        busy.removeAll()
        return all.sorted { $0.sequence < $1.sequence }
    }

    /// `e`, its token's turn come: it goes now (its token's next turn an interval from now, when
    /// more of the token wait), or waits for the rate (the token busy until it goes).
    mutating func go(_ e: Envelope, token: DeviceToken, interval: Duration, now: ContinuousClock.Instant, into out: inout Output) {
        if admit(e, into: &out) {
            sent(token, interval: interval, now: now)
        } else {
            busy.insert(token)
        }
    }

    /// A notification to `token` went at `now`: its next turn.
    mutating func sent(_ token: DeviceToken, interval: Duration, now: ContinuousClock.Instant) {
        nextTurn[token] = now + interval
        if waitingForToken[token] != nil { turns.insert(Turn(at: now + interval, token: token)) }
    }

    /// Lets `e` go if the bucket has room and nothing waits for it ahead (true); else it waits.
    @discardableResult
    mutating func admit(_ e: Envelope, into out: inout Output) -> Bool {
        guard rules.perSecond != nil, e.outcome == nil else {
            out.send.append(e)
            return true
        }
        if waitingForRate.isEmpty && bucket >= 1 {
            bucket -= 1
            out.send.append(e)
            return true
        }
        waitingForRate.append(e)
        heldForRate += 1
        return false
    }

    mutating func drainBucket(now: ContinuousClock.Instant, into out: inout Output) {
        while bucket >= 1, let e = waitingForRate.popFirst() {
            bucket -= 1
            out.send.append(e)
            if let interval = rules.perToken, e.outcome == nil, !e.request.isBroadcast, busy.remove(e.request.token) != nil {
                sent(e.request.token, interval: interval, now: now)
            }
        }
    }

    mutating func refill(_ now: ContinuousClock.Instant) {
        guard let rate = rules.perSecond else { return }
        if let filled = filledAt {
            let seconds = Double((now - filled).components.seconds) + Double((now - filled).components.attoseconds) / 1e18
            bucket = min(Double(rules.burst), bucket + max(0, seconds) * rate)
        }
        filledAt = now
    }

    /// Forgets turns in the past of tokens with nothing waiting, once the map has doubled.
    mutating func sweep(_ now: ContinuousClock.Instant) {
        guard nextTurn.count >= 2 * sweptAt else { return }
        nextTurn = nextTurn.filter { $0.value > now || waitingForToken[$0.key] != nil }
        sweptAt = max(1024, nextTurn.count)
    }
}
