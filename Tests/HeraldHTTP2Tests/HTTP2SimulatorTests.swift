import Crypto
import HeraldCore
import HeraldPayload
import HeraldSimulator
import Testing

@testable import HeraldHTTP2

/// Envelopes with built payloads, as the pipeline hands them to a transport.
func alertEnvelopes(_ count: Int, topic: String = "com.example.app") throws -> [Envelope] {
    let builder = APSPayloadBuilder()
    return try (0..<count).map { i in
        var aps = APS()
        aps.alert = Alert(body: "Game \(i) is ready")
        var r = NotificationRequest(token: DeviceToken(bytes: (0..<32).map { $0 < 4 ? UInt8(truncatingIfNeeded: i >> (8 * $0)) : UInt8($0) }), aps: aps, id: UInt32(i), topic: topic)
        var e = Envelope(sequence: UInt64(i), request: r)
        e.payload = try builder.build(&r)
        return e
    }
}

/// A simulator that wants provider tokens from a fresh key (key id KEY1234567, team TEAM123456), and the tokens that key signs.
func tokenAuthSimulator(_ configure: (inout HTTP2SimulatorConfiguration) -> Void = { _ in }) throws -> (HTTP2Simulator, ProviderTokens) {
    let key = P256.Signing.PrivateKey()
    var config = HTTP2SimulatorConfiguration()
    config.tokenKeyPEM = key.publicKey.pemRepresentation
    config.keyID = "KEY1234567"
    config.teamID = "TEAM123456"
    configure(&config)
    let tokens = ProviderTokens(key: try ProviderTokenKey(pem: key.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456"))
    return (try HTTP2Simulator(configuration: config), tokens)
}

@Suite("HTTP/2 simulator and its in-memory transport", .serialized)
struct HTTP2SimulatorTests {
    func tokenAuth(faults: HTTP2SimulatorConfiguration.Faults = .init()) throws -> (HTTP2Simulator, ProviderTokens) {
        try tokenAuthSimulator { $0.faults = faults }
    }

    @Test("100,000 requests: 1% BadDeviceToken, 0.5% Unregistered, GOAWAY ~1/1000, 503 ~1/1000, 429 ~1/2000: nothing lost or duplicated, one JWT, every 410 reported with its timestamp")
    func issueScenario() async throws {
        var faults = HTTP2SimulatorConfiguration.Faults()
        faults.seed = 13
        faults.goAway = 0.001
        faults.unavailable = 0.001
        faults.tooManyRequests = 0.0005
        let (simulator, tokens) = try tokenAuth(faults: faults)
        let envelopes = try alertEnvelopes(100_000)
        var bad = Set<UInt64>(), dead = [UInt64: Int64]()
        for e in envelopes {
            switch e.sequence % 200 {
            case 7, 77: bad.insert(e.sequence); simulator.markInvalid(e.request.token)
            case 123:
                dead[e.sequence] = 1_699_000_000_000 + Int64(e.sequence)
                simulator.markUnregistered(e.request.token, at: dead[e.sequence]!)
            default: break
            }
        }
        var policy = HTTP2DeliveryPolicy()
        policy.connections = 2
        let transport = HTTP2SimulatorTransport(simulator: simulator, tokens: tokens, policy: policy)
        let (ledger, collector) = try await sendAll(envelopes, through: transport)

        let snapshot = ledger.snapshot
        #expect(snapshot.isBalanced && snapshot.entered == 100_000)
        #expect(snapshot.failed == 0 && snapshot.dropped == 0)
        #expect(snapshot.rejected == UInt64(bad.count + dead.count))
        for r in collector.records where r.outcome != .accepted {
            if bad.contains(r.sequence) { #expect(r.outcome == .rejected(Status(http: 400, reason: "BadDeviceToken"))) }
            else { #expect(r.outcome == .rejected(Status(http: 410, reason: "Unregistered")) && dead[r.sequence] != nil) }
        }
        let counters = simulator.counters
        #expect(counters.duplicates == 0 && counters.delivered == 100_000 - bad.count - dead.count)
        #expect(counters.goAways > 50 && counters.answers["ServiceUnavailable", default: 0] > 50 && counters.answers["TooManyRequests", default: 0] > 20)
        #expect(await transport.tokensSigned == 1 && counters.providerTokens.count == 1)
        let reported = await transport.takeDeadTokens()
        let expected = Set(envelopes.filter { dead[$0.sequence] != nil }.map { "\($0.request.token.hex)@\(dead[$0.sequence]!)" })
        #expect(Set(reported.map { "\($0.0.hex)@\($0.1 ?? -1)" }) == expected)
        #expect(collector.records.allSatisfy { $0.apnsID?.count == 36 })
        let stats = await transport.statistics
        #expect(stats.resentUnanswered == 0 && stats.resentUnprocessed > 0)
    }

    @Test("the simulator's checks: each bad request gets Apple's reason", arguments: [
        ("no token", 403, "MissingProviderToken"), ("wrong topic", 400, "DeviceTokenNotForTopic"),
        ("bad push type", 400, "InvalidPushType"), ("bad priority", 400, "BadPriority"), ("empty", 400, "PayloadEmpty"),
        ("too large", 413, "PayloadTooLarge"), ("bad id", 400, "BadMessageId"), ("bad path", 404, "BadPath"),
        ("duplicate header", 400, "DuplicateHeaders"), ("bad expiration", 400, "BadExpirationDate"),
        ("signed by another key", 403, "InvalidProviderToken"), ("an hour old", 403, "ExpiredProviderToken"),
    ])
    func checks(name: String, status: Int, reason: String) throws {
        var (simulator, tokens) = try tokenAuth()
        let now = Duration.seconds(1_700_000_000)
        let good = try APNsRequestBuilder().request(for: try alertEnvelopes(1)[0])
        var r = good
        var auth: String? = "bearer " + (try tokens.token(now: Int64(now.components.seconds)))
        var at = now
        switch name {
        case "no token": auth = nil
        case "wrong topic": r.headers[1].value = "com.example.other"
        case "bad push type": r.headers[0].value = "banner"
        case "bad priority": r.headers.append(.init("apns-priority", "7"))
        case "empty": r.body = []
        case "too large": r.body = Array(repeating: 0x20, count: 4097)
        case "bad id": r.headers[2].value = "42"
        case "bad path": r.path = "/3/devices/00"
        case "duplicate header": r.headers.append(r.headers[1])
        case "bad expiration": r.headers.append(.init("apns-expiration", "soon"))
        case "signed by another key":
            var other = ProviderTokens(key: try ProviderTokenKey(pem: P256.Signing.PrivateKey().pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456"))
            auth = "bearer " + (try other.token(now: 1_700_000_000))
        default: at = now + .seconds(3600)
        }
        #expect(simulator.handle(good, authorization: "bearer " + (try tokens.token(now: 1_700_000_000)), connection: 9, now: now) == .answer(APNsResponse(status: 200, apnsID: good.apnsID)))
        #expect(simulator.handle(r, authorization: auth, connection: 1, now: at) == .answer(APNsResponse(status: status, apnsID: r.apnsID, reason: reason)))
        #expect(simulator.maxStreams(on: 1) == (name == "no token" || name == "signed by another key" || name == "an hour old" ? 1 : 1000))
    }
}

@Suite("410s feed the token store with APNs' timestamp")
struct UnregisteredFeedbackTests {
    @Test("a 410 marks the token dead since its timestamp; a registration after it wins, one before it does not")
    func feedback() {
        let store = InMemoryTokenStore()
        let observer = TokenStoreFeedbackObserver(store: store, clock: { 1_800_000_000 })
        let early = DeviceToken(bytes: [1]), late = DeviceToken(bytes: [2])
        store.registered(early, at: 1_699_999_000)  // before the 410's time: the 410 stands
        store.registered(late, at: 1_700_000_500)  // after it: the registration wins
        let records = [early, late].enumerated().map { i, t in
            OutcomeRecord(sequence: UInt64(i), line: nil, id: nil, token: t, outcome: .rejected(Status(http: 410, reason: "Unregistered")),
                          apnsID: "id", apnsUnregisteredAt: 1_700_000_000_000)
        }
        observer.observe(records)
        #expect(store.isSuppressed(early) && !store.isSuppressed(late))
        #expect(records[0].apnsUnregisteredAt == 1_700_000_000_000)
    }
}
