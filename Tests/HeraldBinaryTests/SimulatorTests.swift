import HeraldBinary
import HeraldCore
import HeraldSimulator
import Testing

@Suite struct SimulatorTests {
    static let alert = bytes(#"{"aps":{"alert":"hi"}}"#)

    func make(_ configuration: SimulatorConfiguration = SimulatorConfiguration(), clock: ManualClock = ManualClock()) -> APNsSimulator {
        APNsSimulator(configuration: configuration, clock: clock.function)
    }

    func response(_ r: GatewayReply) -> ErrorResponse? {
        guard case .message(let m)? = try? { var d = ErrorResponseDecoder(); d.feed(r.response); return try d.next() }() else { return nil }
        return m
    }

    /// Writes `good`, then `bad` with identifier 2, then `good` again: only the first is accepted.
    func expectStatus(_ status: UInt8, bad: [UInt8], simulator: APNsSimulator? = nil, identifier: UInt32 = 2, sourceLocation: SourceLocation = #_sourceLocation) {
        let sim = simulator ?? make()
        let c = sim.openConnection()
        let reply = c.receive(encode(.frame, payload: Self.alert, id: 1) + bad + encode(.frame, payload: Self.alert, id: 3))
        #expect(response(reply) == ErrorResponse(status: Status(rawValue: status), identifier: identifier), sourceLocation: sourceLocation)
        #expect(reply.closed && c.isClosed, sourceLocation: sourceLocation)
        #expect(sim.deliveries.map(\.identifier) == [1], sourceLocation: sourceLocation)
        #expect(sim.counters.rejected[status] == 1, sourceLocation: sourceLocation)
    }

    @Test func acceptsAndRecordsEveryFormat() {
        let sim = make()
        let c = sim.openConnection(topic: "com.example")
        let reply = c.receive(
            encode(.simple, token: token(1), payload: Self.alert)
                + encode(.enhanced, token: token(2), payload: Self.alert, id: 7, expiry: 99)
                + encode(.frame, token: token(3), payload: bytes(#"{"aps":{"content-available":1}}"#), id: 8, expiry: 5, priority: 5))
        #expect(reply == GatewayReply(consumed: reply.consumed))
        let d = sim.deliveries
        #expect(d.map(\.token) == [token(1), token(2), token(3)])
        #expect(d.map(\.identifier) == [nil, 7, 8] && d.map(\.expiry) == [nil, 99, 5] && d.map(\.priority) == [10, 10, 5])
        #expect(d.map(\.format) == [.simple, .enhanced, .frame] && d.allSatisfy { $0.topic == "com.example" && $0.fate == .delivered })
        #expect(d.map(\.sequence) == [0, 1, 2] && d[0].payload == Self.alert)
        #expect(sim.inbox(token(2)).count == 1)
    }

    @Test func missingDeviceToken() {
        expectStatus(2, bad: rawFrame([(2, Self.alert), (3, be32(2))]))
        expectStatus(2, bad: encode(.enhanced, token: DeviceToken(bytes: []), payload: Self.alert, id: 2))
    }

    @Test func invalidTokenSize() {
        expectStatus(5, bad: encode(.frame, token: token(0, count: 31), payload: Self.alert, id: 2))
        expectStatus(5, bad: encode(.enhanced, token: token(0, count: 64), payload: Self.alert, id: 2))
    }

    @Test func missingPayload() {
        expectStatus(4, bad: rawFrame([(1, token().bytes), (3, be32(2))]))
        expectStatus(4, bad: encode(.frame, payload: [], id: 2))
    }

    @Test func invalidPayloadSize() {
        let sim = make(SimulatorConfiguration(payloadLimit: 256))
        let big = bytes("{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 240) + "\"}}")
        #expect(big.count == 260)
        expectStatus(7, bad: encode(.frame, payload: big, id: 2), simulator: sim)
        // Exactly at the limit is fine.
        let fits = bytes("{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 236) + "\"}}")
        let ok = make(SimulatorConfiguration(payloadLimit: 256))
        #expect(!ok.openConnection().receive(encode(.frame, payload: fits, id: 1)).closed)
    }

    @Test func payloadMustBeJSONWithAnAPSObject() {
        expectStatus(1, bad: encode(.frame, payload: bytes(#"{"aps":{"alert":"hi"}"#), id: 2))
        expectStatus(1, bad: encode(.frame, payload: bytes(#"{"alert":"hi"}"#), id: 2))
        expectStatus(1, bad: encode(.frame, payload: bytes(#"{"aps":"hi"}"#), id: 2))
        expectStatus(1, bad: encode(.frame, payload: bytes(#"[1]"#), id: 2))
    }

    @Test func priorityRule() {
        let background = bytes(#"{"aps":{"content-available":1},"acme":"x"}"#)
        expectStatus(1, bad: encode(.frame, payload: background, id: 2, priority: 10))
        expectStatus(1, bad: rawFrame([(1, token().bytes), (2, Self.alert), (3, be32(2)), (5, [7])]))
        // Priority 5 is right for it; alerts may use 10.
        let sim = make()
        let r = sim.openConnection().receive(encode(.frame, payload: background, id: 1, priority: 5) + encode(.frame, payload: Self.alert, id: 2, priority: 10))
        #expect(!r.closed && sim.deliveries.count == 2)
    }

    @Test func invalidToken() {
        let sim = make()
        sim.markInvalid(token(9))
        expectStatus(8, bad: encode(.frame, token: token(9), payload: Self.alert, id: 2), simulator: sim)
        let strict = make(SimulatorConfiguration(unknownTokens: .invalid))
        strict.register(token())
        expectStatus(8, bad: encode(.frame, token: token(4), payload: Self.alert, id: 2), simulator: strict)
    }

    @Test func malformedFramesAndUnknownCommands() {
        expectStatus(1, bad: rawFrame([(3, be32(2)), (9, [0])]))
        expectStatus(255, bad: [42, 0, 0, 0], identifier: 0)
    }

    @Test func discardsEverythingAfterTheError() {
        let sim = make()
        sim.markInvalid(token(9))
        let c = sim.openConnection()
        let tail = (3...50).flatMap { encode(.frame, payload: Self.alert, id: UInt32($0)) }
        let first = c.receive(encode(.frame, payload: Self.alert, id: 1) + encode(.frame, token: token(9), payload: Self.alert, id: 2) + tail)
        #expect(response(first) == ErrorResponse(status: .invalidToken, identifier: 2) && first.closed)
        #expect(first.consumed == 83 * 50)
        let later = c.receive(encode(.frame, payload: Self.alert, id: 51))
        #expect(later == GatewayReply(consumed: 83, closed: true))
        #expect(sim.deliveries.map(\.identifier) == [1])
        #expect(sim.counters.discardedBytes == tail.count)
    }

    @Test func simpleFormatErrorsCloseWithoutAWord() {
        let sim = make()
        let c = sim.openConnection()
        let r = c.receive(encode(.simple, payload: Self.alert) + encode(.simple, payload: []) + encode(.simple, payload: Self.alert))
        #expect(r.closed && r.response.isEmpty)
        #expect(sim.deliveries.count == 1 && sim.counters.rejected[4] == 1)
    }

    @Test func truncatedFrameAtEndOfInputIsDropped() {
        let sim = make()
        let c = sim.openConnection()
        let f = encode(.frame, payload: Self.alert, id: 1)
        #expect(!c.receive(f + f.prefix(10)).closed)
        let end = c.endOfInput()
        #expect(end.closed && end.response.isEmpty && sim.deliveries.count == 1 && sim.counters.discardedBytes == 10)
    }

    // MARK: store and forward, feedback

    @Test func storeAndForwardKeepsTheLastPerAppAndHonoursExpiry() {
        let clock = ManualClock(1_000)
        let sim = make(clock: clock)
        sim.register(token(1), online: false)
        let c = sim.openConnection(topic: "app")
        let other = sim.openConnection(topic: "other")
        _ = c.receive(
            encode(.enhanced, token: token(1), payload: bytes(#"{"aps":{"badge":1}}"#), id: 1, expiry: 2_000)
                + encode(.enhanced, token: token(1), payload: bytes(#"{"aps":{"badge":2}}"#), id: 2, expiry: 1_500)
                + encode(.enhanced, token: token(1), payload: bytes(#"{"aps":{"badge":3}}"#), id: 3, expiry: 0)
                + encode(.enhanced, token: token(1), payload: bytes(#"{"aps":{"badge":4}}"#), id: 4, expiry: 999))
        _ = other.receive(encode(.frame, token: token(1), payload: bytes(#"{"aps":{"badge":9}}"#), id: 1, expiry: 3_000))
        #expect(sim.deliveries.map(\.fate) == [.stored, .stored, .notStored, .notStored, .stored])
        #expect(sim.stored(for: token(1), topic: "app")?.identifier == 2)
        #expect(sim.counters.replaced == 1 && sim.inbox(token(1)).isEmpty)

        clock.set(1_600)  // past the app's stored expiry, not the other's
        let forwarded = sim.setOnline(token(1), true)
        #expect(forwarded.map(\.topic) == ["other"] && forwarded.map(\.fate) == [.forwarded])
        #expect(sim.inbox(token(1)).map(\.payload) == [bytes(#"{"aps":{"badge":9}}"#)])
        #expect(sim.counters.expired == 1 && sim.stored(for: token(1), topic: "app") == nil)

        // Online now: delivered at once.
        _ = c.receive(encode(.frame, token: token(1), payload: Self.alert, id: 5, expiry: 0))
        #expect(sim.inbox(token(1)).count == 2 && sim.deliveries.last?.fate == .delivered)
    }

    @Test func storedNotificationDeliveredWhenOnlineInTime() {
        let clock = ManualClock(100)
        let sim = make(clock: clock)
        sim.register(token(2), online: false)
        _ = sim.openConnection().receive(encode(.frame, token: token(2), payload: Self.alert, id: 1, expiry: 200))
        clock.set(200)
        #expect(sim.setOnline(token(2), true).map(\.identifier) == [1])
        #expect(sim.inbox(token(2)).map(\.identifier) == [1] && sim.stored(for: token(2)) == nil)
    }

    @Test func uninstalledAppsFeedTheFeedbackList() throws {
        let clock = ManualClock(1_700_000_000)
        let sim = make(clock: clock)
        sim.uninstall(token(5))
        sim.uninstall(token(6))
        let c = sim.openConnection()
        let r = c.receive(encode(.frame, token: token(5), payload: Self.alert, id: 1))
        clock.advance(by: 10)
        _ = c.receive(encode(.frame, token: token(6), payload: Self.alert, id: 2) + encode(.frame, token: token(5), payload: Self.alert, id: 3))
        #expect(!r.closed && sim.deliveries.map(\.fate) == [.failed, .failed, .failed] && sim.counters.failedDeliveries == 3)
        #expect(sim.inbox(token(5)).isEmpty)
        let tuples = sim.takeFeedbackTuples()
        let entries = try decodeAll(FeedbackParser.self, chunks: [tuples])
        #expect(entries == [FeedbackEntry(token: token(5), timestamp: 1_700_000_010), FeedbackEntry(token: token(6), timestamp: 1_700_000_010)])
        #expect(sim.takeFeedback().isEmpty && sim.takeFeedbackTuples().isEmpty)
    }

    // MARK: faults

    @Test func closeAfterNNotifications() {
        let sim = make(SimulatorConfiguration(faults: FaultPlan(closeAfter: [3])))
        let c = sim.openConnection()
        let r = c.receive((1...5).flatMap { encode(.frame, payload: Self.alert, id: UInt32($0)) })
        #expect(r.closed && r.response.isEmpty && sim.deliveries.map(\.identifier) == [1, 2, 3])
        #expect(sim.counters.injectedCloses == 1 && sim.counters.discardedBytes == 2 * 83)
        // It fires once: a new connection carries on.
        #expect(!sim.openConnection().receive(encode(.frame, payload: Self.alert, id: 1)).closed)
    }

    @Test func shutdownNamesTheLastGoodIdentifier() {
        let sim = make(SimulatorConfiguration(faults: FaultPlan(shutdownAfter: [2])))
        let r = sim.openConnection().receive((11...14).flatMap { encode(.frame, payload: Self.alert, id: UInt32($0)) })
        #expect(response(r) == ErrorResponse(status: .shutdown, identifier: 12) && r.closed)
        #expect(sim.deliveries.map(\.identifier) == [11, 12] && sim.counters.injectedShutdowns == 1)
    }

    @Test func responsesAreDelayed() {
        let sim = make(SimulatorConfiguration(faults: FaultPlan(responseDelayWrites: 2)))
        sim.markInvalid(token(9))
        let c = sim.openConnection()
        let r1 = c.receive(encode(.frame, token: token(9), payload: Self.alert, id: 1))
        #expect(r1 == GatewayReply(consumed: 83))
        let r2 = c.receive(encode(.frame, payload: Self.alert, id: 2))
        #expect(r2 == GatewayReply(consumed: 83) && !c.isClosed)
        let r3 = c.receive(encode(.frame, payload: Self.alert, id: 3))
        #expect(response(r3) == ErrorResponse(status: .invalidToken, identifier: 1) && r3.closed)
        #expect(sim.deliveries.isEmpty && sim.counters.discardedBytes == 166)
        // Or at once, when the provider waits for it.
        let other = sim.openConnection()
        _ = other.receive(encode(.frame, token: token(9), payload: Self.alert, id: 4))
        #expect(response(other.flush()) == ErrorResponse(status: .invalidToken, identifier: 4) && other.isClosed)
    }

    @Test func partialWritesAreReproducible() {
        func run(seed: UInt64) -> ([Int], [UInt32?]) {
            let sim = make(SimulatorConfiguration(faults: FaultPlan(seed: seed, partialWriteProbability: 0.7)))
            let c = sim.openConnection()
            let all = (1...20).flatMap { encode(.frame, payload: Self.alert, id: UInt32($0)) }
            var offset = 0
            var consumed: [Int] = []
            while offset < all.count {
                let r = c.receive(Array(all[offset...]))
                #expect(r.consumed >= 1 && !r.closed)
                consumed.append(r.consumed)
                offset += r.consumed
            }
            #expect(sim.counters.partialWrites > 0)
            return (consumed, sim.deliveries.map(\.identifier))
        }
        let a = run(seed: 7)
        #expect(a.1 == (1...20).map { UInt32($0) })
        #expect(a.0.count > 1)
        #expect(run(seed: 7) == a)
        #expect(run(seed: 8).0 != a.0)
    }

    @Test func randomClosesAndReadDelaysAreReproducible() {
        func run(seed: UInt64) -> [Int] {
            let faults = FaultPlan(seed: seed, closeProbability: 0.1, readDelayProbability: 0.5, readDelay: .milliseconds(3))
            let sim = make(SimulatorConfiguration(faults: faults))
            var accepted: [Int] = []
            var delays = 0
            for _ in 0..<10 {
                let c = sim.openConnection()
                let r = c.receive((1...30).flatMap { encode(.frame, payload: Self.alert, id: UInt32($0)) })
                if let d = r.readDelay { #expect(d == .milliseconds(3)); delays += 1 }
                accepted.append(c.acceptedCount)
            }
            #expect(delays == sim.counters.readDelays)
            return accepted + [delays]
        }
        let a = run(seed: 1)
        #expect(a.dropLast().contains { $0 < 30 })
        #expect(run(seed: 1) == a)
    }
}
