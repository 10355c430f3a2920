import HeraldBinary
import HeraldCore
import Testing

/// The binary delivery machine pointed at a gateway it never reaches (issue 34, item 2).
@Suite("Delivery machine: a gateway never reached")
struct NeverConnectedTests {
    let t0 = Duration.seconds(1_000)

    static func items(_ range: Range<Int>) -> [DeliveryItem] {
        range.map { i in
            DeliveryItem(sequence: UInt64(i), line: i, id: UInt32(i), token: DeviceToken(bytes: [UInt8](repeating: UInt8(i), count: 32)),
                         frame: [1, 2, 3], identifierOffset: nil)
        }
    }

    /// Refuses every connection the machine opens, following its deadlines, until `end`; the outcomes.
    static func refuseAll(_ m: inout DeliveryMachine, from start: Duration, until end: Duration) -> [OutcomeRecord] {
        var now = start
        var outcomes: [OutcomeRecord] = []
        while now < end {
            for case .connect(let c) in m.takeActions() {
                m.closed(c, reason: .transient("cannot connect to the gateway 127.0.0.1:1: connection refused (nothing listens on that port)"), now: now)
            }
            outcomes += m.takeOutcomes()
            guard let next = m.nextDeadline, next > now else { break }
            now = next
            m.timer(now: now)
        }
        return outcomes + m.takeOutcomes()
    }

    static func reason(_ r: OutcomeRecord?) -> OutcomeReason? {
        guard let r, case .failed(let why) = r.outcome else { return nil }
        return why
    }

    @Test("after firstConnectAttempts refusals what is queued fails, naming the endpoint and the refusal, within seconds (not maxOutage); notices say so at once; later notifications get one attempt each, at once")
    func givesUpFast() {
        var m = DeliveryMachine(policy: DeliveryPolicy(), endpoint: "127.0.0.1:1", seed: 1)
        m.enqueue(Self.items(0..<4), now: t0)
        let first = m.takeNotices()
        #expect(first.isEmpty)
        let failed = Self.refuseAll(&m, from: t0, until: t0 + .seconds(600))
        #expect(failed.count == 4)
        let why = Self.reason(failed.first)
        #expect(why?.code == .gatewayUnreachable && why?.message.contains("127.0.0.1:1") == true && why?.message.contains("connection refused") == true
                && why?.message.contains("5 attempts") == true, "\(String(describing: why))")
        #expect(m.statistics.connectFailures == 5)
        let notices = m.takeNotices()
        #expect(notices.first?.contains("connection refused") == true && notices.first?.contains("gives up after 5 attempts") == true, "\(notices)")

        // A later notification: an attempt at once, and its outcome when it fails.
        let later = t0 + .seconds(700)
        m.enqueue(Self.items(10..<11), now: later)
        guard case .connect(let c)? = m.takeActions().first else { Issue.record("no attempt at once"); return }
        m.closed(c, reason: .transient("refused"), now: later)
        #expect(m.takeOutcomes().map(\.id) == [10])

        // A connection at last ends the outage, and says so.
        m.enqueue(Self.items(11..<12), now: later)
        guard case .connect(let c2)? = m.takeActions().first else { Issue.record("no attempt"); return }
        m.connected(c2, now: later)
        #expect(m.takeNotices().contains { $0.hasPrefix("connected to the gateway 127.0.0.1:1 after") })
    }

    @Test("items built straight into the queue (enqueue(now:_:)) are queued in order as an array's are, and fail at once, each, once the machine has failed for good")
    func enqueueBuilding() {
        var m = DeliveryMachine(policy: DeliveryPolicy(), endpoint: "127.0.0.1:1", seed: 1)
        m.enqueue(now: t0) { add in for item in Self.items(0..<3) { add(item) } }
        #expect(m.queuedCount == 3)
        guard case .connect(let c)? = m.takeActions().first else { Issue.record("no connection asked for"); return }
        m.closed(c, reason: .permanent("the gateway refused the certificate"), now: t0)
        let failed = m.takeOutcomes()
        #expect(failed.map(\.id) == [0, 1, 2] && failed.allSatisfy { Self.reason($0)?.code == .tlsRefused }, "\(failed)")
        // Failed for good: what comes later fails at once, in order, nothing queued.
        m.enqueue(now: t0 + .seconds(1)) { add in for item in Self.items(5..<7) { add(item) } }
        #expect(m.queuedCount == 0)
        let later = m.takeOutcomes()
        #expect(later.map(\.id) == [5, 6] && later.allSatisfy { Self.reason($0)?.code == .tlsRefused }, "\(later)")
    }

    @Test("items moved in (enqueue(moving:now:)) are queued in order and leave nothing behind; once failed for good, they fail at once, in order")
    func enqueueMoving() {
        var m = DeliveryMachine(policy: DeliveryPolicy(), endpoint: "127.0.0.1:1", seed: 1)
        m.enqueue(moving: Self.items(0..<4), now: t0)
        #expect(m.queuedCount == 4)
        guard case .connect(let c)? = m.takeActions().first else { Issue.record("no connection asked for"); return }
        m.closed(c, reason: .permanent("the gateway refused the certificate"), now: t0)
        #expect(m.takeOutcomes().map(\.id) == [0, 1, 2, 3])
        m.enqueue(moving: Self.items(7..<10), now: t0 + .seconds(1))
        #expect(m.queuedCount == 0)
        #expect(m.takeOutcomes().map(\.id) == [7, 8, 9])
    }

    @Test("removeAllInOrder hands every element over in order, moved out, and leaves the array empty")
    func removeAllInOrder() {
        for n in [0, 1, 2, 3, 10, 11] {
            var a = (0..<n).map { [String(repeating: "x", count: $0 + 20)] }  // elements with references
            var seen: [[String]] = []
            a.removeAllInOrder { seen.append($0) }
            #expect(a.isEmpty && seen == (0..<n).map { [String(repeating: "x", count: $0 + 20)] })
        }
    }

    @Test("with firstConnectAttempts nil, the machine holds through maxOutage as before; a signal then fails what waits at once, naming the last error")
    func holdsThenSignal() {
        var policy = DeliveryPolicy()
        policy.firstConnectAttempts = nil
        var m = DeliveryMachine(policy: policy, endpoint: "127.0.0.1:1", seed: 1)
        m.enqueue(Self.items(0..<3), now: t0)
        #expect(Self.refuseAll(&m, from: t0, until: t0 + .seconds(30)).isEmpty, "held through the outage")
        m.stop(deadline: t0 + .seconds(60), now: t0 + .seconds(30))
        let failed = m.takeOutcomes()
        #expect(failed.count == 3)
        let why = Self.reason(failed.first)
        #expect(why?.code == .shutdownDeadline && why?.message.contains("stopped by a signal") == true && why?.message.contains("connection refused") == true,
                "\(String(describing: why))")
    }

    @Test("after a connection was made, an outage holds notifications through maxOutage whatever firstConnectAttempts says")
    func afterAConnectionTheOutageRuleHolds() {
        var m = DeliveryMachine(policy: DeliveryPolicy(), endpoint: "127.0.0.1:1", seed: 1)
        m.enqueue(Self.items(0..<1), now: t0)
        guard case .connect(let c)? = m.takeActions().first else { Issue.record("no attempt"); return }
        m.connected(c, now: t0)
        m.closed(c, reason: .transient("reset"), now: t0 + .seconds(1))
        m.enqueue(Self.items(1..<3), now: t0 + .seconds(1))
        let failed = Self.refuseAll(&m, from: t0 + .seconds(1), until: t0 + .seconds(60))
        #expect(!failed.contains { $0.id == 1 || $0.id == 2 }, "held: \(failed)")
    }
}
