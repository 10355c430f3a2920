import Crypto
import HeraldCore
import Testing

@testable import HeraldHTTP2

func item(_ i: Int) -> HTTP2Item {
    HTTP2Item(sequence: UInt64(i), line: nil, id: UInt32(i), token: DeviceToken(bytes: [UInt8(i), 1]),
              request: APNsRequest(path: "/3/device/\(i)", headers: [], body: [1], pushType: .alert, apnsID: "id-\(i)"))
}

extension HTTP2DeliveryMachine {
    /// Enqueues `items`, connects connection 1 with `maxStreams`, and returns the streams opened.
    mutating func start(_ items: [HTTP2Item], maxStreams: Int = 10, now: Duration) -> [(connection: Int, stream: Int, authorization: String?)] {
        enqueue(items, now: now)
        _ = takeActions()
        connected(1, maxStreams: maxStreams, now: now)
        return sends()
    }

    /// The streams the last actions opened, by stream number.
    mutating func sends() -> [(connection: Int, stream: Int, authorization: String?)] {
        takeActions().compactMap { if case .send(let c, let s, let a) = $0 { return (c, s, a) } else { return nil } }
    }
}

@Suite("HTTP/2 delivery machine: one rule at a time")
struct HTTP2DeliveryMachineTests {
    let t0 = Duration.seconds(1_700_000_000)

    func machine(connections: Int = 1, tokens: Bool = true) throws -> HTTP2DeliveryMachine {
        var p = HTTP2DeliveryPolicy()
        p.connections = connections
        let key = try ProviderTokenKey(pem: P256.Signing.PrivateKey().pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        return HTTP2DeliveryMachine(policy: p, tokens: tokens ? ProviderTokens(key: key) : nil)
    }

    @Test("one stream until SETTINGS raise the limit, then as many as allowed; the limit can drop again")
    func streamLimit() throws {
        var m = try machine()
        m.enqueue((0..<10).map(item), now: t0)
        #expect(m.takeActions() == [.connect(1)])
        m.connected(1, maxStreams: 1, now: t0)
        let first = m.sends()
        #expect(first.count == 1 && first[0].authorization?.hasPrefix("bearer ") == true)
        m.settingsChanged(1, maxStreams: 4, now: t0)
        #expect(m.sends().count == 3)
        m.settingsChanged(1, maxStreams: 2, now: t0)
        m.answered(first[0].stream, APNsResponse(status: 200), now: t0)
        #expect(m.sends().isEmpty, "four open, limit two: nothing new")
    }

    @Test("GOAWAY: no new streams there; unprocessed ones go out on a new connection; the old one closes when empty")
    func goAway() throws {
        var m = try machine()
        let s = m.start((0..<3).map(item), now: t0)
        #expect(s.count == 3)
        m.goAway(1, reason: "Shutdown", now: t0)
        m.answered(s[0].stream, APNsResponse(status: 200), now: t0)
        m.streamFailed(s[1].stream, unprocessed: true, reason: "above the last stream id", now: t0)
        let actions = m.takeActions()
        #expect(actions == [.connect(2)], "\(actions)")
        m.streamFailed(s[2].stream, unprocessed: true, reason: "above the last stream id", now: t0)
        #expect(m.takeActions() == [.close(1)])
        m.connected(2, maxStreams: 10, now: t0)
        let again = m.sends()
        #expect(again.map(\.connection) == [2, 2] && m.statistics.resentUnprocessed == 2 && m.statistics.resentUnanswered == 0)
        for x in again { m.answered(x.stream, APNsResponse(status: 200), now: t0) }
        #expect(m.takeOutcomes().map(\.outcome) == [.accepted, .accepted, .accepted] && m.isSettled)
        #expect(m.statistics.lastGoAwayReason == "Shutdown")
    }

    @Test("ExpiredProviderToken: signed again once, resent, accepted")
    func expiredToken() throws {
        var m = try machine()
        let s = m.start([item(0)], now: t0)
        m.answered(s[0].stream, APNsResponse(status: 403, reason: "ExpiredProviderToken"), now: t0 + .seconds(5))
        let again = m.sends()
        #expect(again.count == 1 && again[0].authorization != s[0].authorization && m.tokens?.signed == 2)
        m.answered(again[0].stream, APNsResponse(status: 200, apnsID: "id-0"), now: t0 + .seconds(6))
        #expect(m.takeOutcomes().map(\.outcome) == [.accepted])
    }

    @Test("the authorization header: asked of the shared tokens once a second; an expired answer resends with the new token in the same second; a token another machine signed is taken from the next second")
    func bearerHeader() throws {
        let key = try ProviderTokenKey(pem: P256.Signing.PrivateKey().pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        let shared = SharedProviderTokens(ProviderTokens(key: key))
        var a = HTTP2DeliveryMachine(sharedTokens: shared), b = HTTP2DeliveryMachine(sharedTokens: shared)
        let s = a.start((0..<3).map(item), now: t0)
        let first = try #require(s.first?.authorization)
        #expect(s.count == 3 && s.allSatisfy { $0.authorization == first } && first.hasPrefix("bearer ") && shared.signed == 1)
        #expect(b.start([item(5)], now: t0).first?.authorization == first)

        a.answered(s[0].stream, APNsResponse(status: 403, reason: "ExpiredProviderToken"), now: t0)
        let again = a.sends()
        let second = try #require(again.first?.authorization)
        #expect(again.count == 1 && second != first && shared.signed == 2, "resent at once with the token signed for it")

        b.enqueue([item(6)], now: t0 + .milliseconds(500))
        #expect(b.sends().first?.authorization == first, "within the second, the header it holds")
        b.enqueue([item(7)], now: t0 + .seconds(1))
        #expect(b.sends().first?.authorization == second, "the next second, the token the other machine signed")
        #expect(shared.signed == 2)
    }

    @Test("with keepsSpent, accepted requests are kept for the shell to free elsewhere, each once, and taken together; without it none are kept")
    func spentRequests() throws {
        for keeps in [false, true] {
            var m = try machine(tokens: false)
            m.keepsSpent = keeps
            let s = m.start((0..<4).map(item), now: t0)
            m.answered(s[0].stream, APNsResponse(status: 200), now: t0)
            m.answered(s[1].stream, APNsResponse(status: 400, reason: "BadDeviceToken"), now: t0)
            m.answered(s[2].stream, APNsResponse(status: 503, reason: "ServiceUnavailable"), now: t0)  // retried: its item lives on
            m.answered(s[3].stream, APNsResponse(status: 200), now: t0)
            #expect(m.spentCount == (keeps ? 2 : 0))
            let spent = m.takeSpent()
            #expect(spent.entries.map(\.item.sequence) == (keeps ? [0, 3] : []))
            #expect(m.spentCount == 0 && m.takeOutcomes().count == 3)
        }
    }

    @Test("429 TooManyRequests waits retryLaterDelay; 410 reports the dead token with its timestamp")
    func retryLaterAnd410() throws {
        var m = try machine()
        let s = m.start([item(0), item(1)], now: t0)
        m.answered(s[0].stream, APNsResponse(status: 429, reason: "TooManyRequests"), now: t0)
        m.answered(s[1].stream, APNsResponse(status: 410, reason: "Unregistered", timestamp: 1_699_000_000_000), now: t0)
        #expect(m.sends().isEmpty && m.nextDeadline == t0 + m.policy.retryLaterDelay)
        m.timer(now: t0 + m.policy.retryLaterDelay)
        let again = m.sends()
        #expect(again.count == 1)
        m.answered(again[0].stream, APNsResponse(status: 200), now: t0 + .seconds(3))
        let outcomes = m.takeOutcomes()
        #expect(outcomes.map(\.outcome) == [.rejected(Status(http: 410, reason: "Unregistered")), .accepted])
        let dead = m.takeDeadTokens()
        #expect(dead.count == 1 && dead[0].0 == item(1).token && dead[0].1 == 1_699_000_000_000)
    }

    @Test("a request unanswered past the timeout is cancelled and sent again, counted as a possible duplicate")
    func timeout() throws {
        var m = try machine(tokens: false)
        let s = m.start([item(0)], now: t0)
        #expect(s[0].authorization == nil)
        m.timer(now: t0 + m.policy.requestTimeout)
        let actions = m.takeActions()
        #expect(actions.first == .cancel(connection: s[0].connection, stream: s[0].stream) && actions.count == 2)
        #expect(m.statistics.timeouts == 1 && m.statistics.resentUnanswered == 1)
    }

    @Test("an idle connection gets a PING; an unanswered PING ends it")
    func ping() throws {
        var m = try machine(tokens: false)
        let s = m.start([item(0)], now: t0)
        m.answered(s[0].stream, APNsResponse(status: 200), now: t0)
        #expect(m.nextDeadline == t0 + m.policy.idlePing)
        m.timer(now: t0 + m.policy.idlePing)
        #expect(m.takeActions() == [.ping(1)])
        m.timer(now: t0 + m.policy.idlePing + m.policy.pingTimeout)
        #expect(m.takeActions() == [.close(1)])
    }

    @Test("no connection for maxOutage: what waits fails as gateway-unreachable")
    func outage() throws {
        var m = try machine(tokens: false)
        m.enqueue([item(0), item(1)], now: t0)
        var now = t0
        while let d = m.nextDeadline, d < t0 + m.policy.maxOutage + .seconds(60) {
            for a in m.takeActions() { if case .connect(let c) = a { m.closed(c, reason: .transient("refused"), now: now) } }
            now = max(now, d)
            m.timer(now: now)
            if m.isSettled { break }
        }
        let outcomes = m.takeOutcomes()
        #expect(outcomes.count == 2 && outcomes.allSatisfy { if case .failed(let r) = $0.outcome { return r.code == .gatewayUnreachable } else { return false } })
    }
}

@Suite("HTTP/2 delivery machine: an endpoint never reached (issue 34, item 2)")
struct HTTP2NeverConnectedTests {
    let t0 = Duration.seconds(1_700_000_000)

    /// Fails every connection attempt the machine asks for, following its deadlines; the outcomes.
    static func refuseAll(_ m: inout HTTP2DeliveryMachine, from start: Duration, until end: Duration) -> [OutcomeRecord] {
        var now = start
        var outcomes: [OutcomeRecord] = []
        while now < end {
            for case .connect(let c) in m.takeActions() {
                m.closed(c, reason: .transient("cannot connect to api.example:443: connection refused (nothing listens on that port)"), now: now)
            }
            outcomes += m.takeOutcomes()
            guard let next = m.nextDeadline, next > now else { now += .milliseconds(100); m.timer(now: now); continue }
            now = next
            m.timer(now: now)
        }
        return outcomes + m.takeOutcomes()
    }

    @Test("never connected: after firstConnectAttempts failures what waits fails naming the refusal, in seconds not maxOutage; the first failure and the giving up are notices; a later request gets one attempt at once; a connection ends the outage with a notice")
    func givesUpFast() {
        var m = HTTP2DeliveryMachine(policy: HTTP2DeliveryPolicy(), tokens: nil)
        m.enqueue((0..<3).map(item), now: t0)
        let failed = Self.refuseAll(&m, from: t0, until: t0 + .seconds(60))
        #expect(failed.count == 3)
        let reason = failed.first.flatMap { if case .failed(let r) = $0.outcome { r } else { nil } }
        #expect(reason?.code == .gatewayUnreachable && reason?.message.contains("connection refused") == true && reason?.message.contains("5 attempts") == true,
                "\(String(describing: reason))")
        let notices = m.takeNotices()
        #expect(notices.first?.contains("connection refused") == true && notices.first?.contains("gives up after 5 attempts") == true, "\(notices)")
        #expect(notices.contains { $0.contains("gave up") }, "\(notices)")

        // One attempt, at once, for what comes later.
        let later = t0 + .seconds(61)
        m.enqueue([item(9)], now: later)
        let actions = m.takeActions()
        guard case .connect(let c)? = actions.first else { Issue.record("no attempt at once: \(actions)"); return }
        m.closed(c, reason: .transient("refused again"), now: later)
        #expect(m.takeOutcomes().map(\.id) == [9])

        m.enqueue([item(10)], now: later)
        guard case .connect(let c2)? = m.takeActions().first else { Issue.record("no attempt"); return }
        m.connected(c2, maxStreams: 10, now: later)
        #expect(m.takeNotices().contains { $0.hasPrefix("connected to APNs after") })
    }

    @Test("a signal while no connection can be made: what waits fails at once naming the last error, not at the drain deadline")
    func signalDuringRetries() {
        var policy = HTTP2DeliveryPolicy()
        policy.firstConnectAttempts = nil
        var m = HTTP2DeliveryMachine(policy: policy, tokens: nil)
        m.enqueue((0..<2).map(item), now: t0)
        _ = Self.refuseAll(&m, from: t0, until: t0 + .seconds(2))
        #expect(m.takeOutcomes().isEmpty, "held through the outage")
        m.stop(deadline: t0 + .seconds(32), now: t0 + .seconds(2))
        let failed = m.takeOutcomes()
        #expect(failed.count == 2 && failed.allSatisfy {
            if case .failed(let r) = $0.outcome { r.message.contains("stopped by a signal") && r.message.contains("connection refused") } else { false }
        }, "\(failed)")
    }
}
