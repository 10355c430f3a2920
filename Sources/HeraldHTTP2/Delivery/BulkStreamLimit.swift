/// How many streams a delivery machine lets the bulk lane hold, so that a
/// fast-lane request never queues behind a campaign *inside* the connection.
///
/// Once a request is on a stream nothing can overtake it: whatever is already
/// written ahead of it (in the socket, at the server) goes first. While the
/// connection's streams are what limits the rate (APNs answering in 20 ms, 1,000
/// streams: 50,000/s), a request on a stream waits only for its answer; when
/// something else limits it first (the CPU at either end, the network), every
/// stream's request waits its turn too: 1,000 streams at 13,000/s is 77 ms each,
/// fast lane or not. So the bulk lane's streams follow the answers' delay, as a
/// delay-based congestion window does (TCP Vegas): the shortest round-trip seen
/// lately is the base; each round (a base round-trip long), if even the
/// quickest answer came more than `target` (or a quarter of the base, whichever
/// is longer) after the base, requests are queueing, and the bulk lane keeps
/// the streams the round's rate needs for half that delay (Little's law: the
/// answers a second × (base + target / 2)); between half and all of the
/// allowed delay it holds; under half, if it used its streams, it takes more
/// (doubling every third round until queueing passes a quarter of the allowed
/// delay, then an eighth a round). It starts at 64. It never
/// goes below ``floor`` streams: the bulk lane is slowed, never stopped. The fast
/// lane is never limited. Sans-I/O: every call carries `now`.
public struct BulkStreamLimit: Sendable, Hashable {
    /// Queueing above the base round-trip that counts as a queue; `nil`: no limit.
    public let target: Duration?
    /// Bulk streams allowed now.
    public private(set) var limit: Int
    /// Still doubling: queueing has not yet passed a quarter of the allowed delay.
    var growingFast = true
    /// The shortest round-trip in this window and the one before (the base is the shorter).
    var windowStart: Duration?
    var windowMin: Duration?
    var previousMin: Duration?
    /// The round under way: when it began and its quickest answer.
    var roundStart: Duration?
    var roundMin: Duration?
    var roundAnswers = 0
    /// While growing fast: rounds since the last doubling (the second round after a change is
    /// the first whose answers all left after it).
    var roundsSinceDoubling = 0

    /// The fewest streams the bulk lane keeps, however long answers take.
    public static let floor = 8
    /// How long a window of the base round-trip lasts.
    static let window = Duration.seconds(10)
    static let ceiling = 1 << 20

    public init(target: Duration?, initial: Int = 64) {
        self.target = target
        limit = target == nil ? Self.ceiling : max(Self.floor, initial)
    }

    /// Whether another bulk-lane request may take a stream, with `bulkInFlight` on streams now.
    @inlinable public func allows(bulkInFlight: Int) -> Bool { bulkInFlight < limit }

    /// The shortest round-trip seen lately.
    var base: Duration? {
        switch (windowMin, previousMin) {
        case let (a?, b?): return min(a, b)
        case let (a, b): return a ?? b
        }
    }

    /// A stream sent at `sentAt` was answered at `now` (any lane's: they wait in the same
    /// queues), with `bulkInFlight` bulk-lane requests on streams.
    public mutating func answered(sentAt: Duration, now: Duration, bulkInFlight: Int) {
        guard let target else { return }
        let rtt = now - sentAt
        if let start = windowStart, now - start < Self.window {
            windowMin = min(windowMin ?? rtt, rtt)
        } else {
            previousMin = windowMin
            windowMin = rtt
            windowStart = now
        }
        roundMin = min(roundMin ?? rtt, rtt)
        roundAnswers += 1
        guard let start = roundStart else {
            roundStart = now
            return
        }
        guard let base, let quickest = roundMin, now - start >= max(base, .milliseconds(1)) else { return }
        let allowed = max(target, base / 4)
        let queueing = quickest - base
        if queueing > allowed {
            // Queueing: down at once to the streams this round's rate needs for half the allowed
            // delay (Little's law), whatever that costs the campaign for a round.
            let rate = Double(roundAnswers) / (now - start).inSeconds
            limit = max(Self.floor, min(limit, Int((rate * (base + allowed / 2).inSeconds).rounded(.up))))
            growingFast = false
        } else if queueing > allowed / (growingFast ? 4 : 2) {
            // Between half and all of the allowed delay: hold (growing fast: from a quarter).
            growingFast = false
        } else if bulkInFlight * 4 >= limit * 3 {
            // It used most of its streams: more may help.
            if !growingFast {
                limit = min(Self.ceiling, limit + max(1, limit / 8))
            } else if roundsSinceDoubling >= 2 {
                limit = min(Self.ceiling, limit * 2)
                roundsSinceDoubling = 0
            } else {
                roundsSinceDoubling += 1
            }
        }
        roundStart = now
        roundMin = nil
        roundAnswers = 0
    }
}
