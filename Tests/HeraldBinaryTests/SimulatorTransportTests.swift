import HeraldBinary
import HeraldCore
import HeraldSimulator
import Testing

/// 0 ..< n as sequence numbers, leaving out `except`.
func seq(_ n: Int, except: Set<UInt64> = []) -> [UInt64] {
    (0..<UInt64(n)).filter { !except.contains($0) }
}

@Suite struct SimulatorTransportTests {
    /// `count` framed envelopes with ids 0…, distinct badges, one token each unless given.
    static func envelopes(_ count: Int, format: NotificationFormat = .frame, tokenFor: (Int) -> DeviceToken = { token(UInt8(truncatingIfNeeded: $0)) }) -> [Envelope] {
        (0..<count).map { i in
            var e = Envelope(sequence: UInt64(i), request: NotificationRequest(token: tokenFor(i), id: UInt32(i)))
            e.payload = bytes("{\"aps\":{\"badge\":\(i)}}")
            e.frame = try! BinaryFramer(format: format).frame(e)
            return e
        }
    }

    struct Run {
        var ledger: LedgerSnapshot
        var outcomes: [UInt64: Outcome]
        var delivered: [UInt64]
        var transport: SimulatorTransport.Statistics
    }

    /// Sends `envelopes` in batches of `batch` and returns what happened.
    static func run(_ envelopes: [Envelope], simulator: APNsSimulator, options: SimulatorTransport.Options = .init(), batch: Int = 100) async throws -> Run {
        let collector = Collector()
        let ledger = OutcomeLedger(observers: [collector])
        let transport = SimulatorTransport(simulator: simulator, options: options)
        var i = 0
        while i < envelopes.count {
            let b = Array(envelopes[i..<min(i + batch, envelopes.count)])
            ledger.enter(b.map(\.sequence), count: b.count)
            try await transport.send(b, outcomes: ledger)
            i += batch
        }
        await transport.finish(outcomes: ledger)
        var outcomes: [UInt64: Outcome] = [:]
        for r in collector.records {
            #expect(outcomes[r.sequence] == nil, "sequence \(r.sequence) ended twice")
            outcomes[r.sequence] = r.outcome
        }
        // The badge is the sequence number: what the simulator delivered, in order.
        let delivered = simulator.deliveries.map { d -> UInt64 in
            let s = String(decoding: d.payload, as: UTF8.self)
            return UInt64(s.split(separator: ":").last!.dropLast(2))!
        }
        return Run(ledger: ledger.snapshot, outcomes: outcomes, delivered: delivered, transport: await transport.statistics)
    }

    @Test(arguments: NotificationFormat.all)
    func everythingAcceptedOnceInOrder(format: NotificationFormat) async throws {
        let sim = APNsSimulator()
        let r = try await Self.run(Self.envelopes(1000, format: format), simulator: sim)
        #expect(r.ledger.isBalanced && r.ledger.accepted == 1000)
        #expect(r.delivered == seq(1000))
        #expect(r.transport.connections == 1)
        // Per-connection identifiers, from 1, regardless of the request ids.
        if format != .simple { #expect(sim.deliveries.map(\.identifier) == (1...1000).map { UInt32($0) }) }
    }

    @Test func rejectedOneAndResendOfWhatFollowed() async throws {
        let sim = APNsSimulator()
        sim.markInvalid(token(77))
        sim.markInvalid(token(200))
        let r = try await Self.run(Self.envelopes(300, tokenFor: { token(UInt8(truncatingIfNeeded: $0)) }), simulator: sim,
                                   options: .init(framesPerWrite: 64), batch: 300)
        // token(77) is used by 77 and (77+256=333, out of range); token(200) by 200.
        #expect(r.outcomes[77] == .rejected(.invalidToken) && r.outcomes[200] == .rejected(.invalidToken))
        #expect(r.ledger.isBalanced && r.ledger.accepted == 298 && r.ledger.rejected == 2)
        #expect(r.delivered == seq(300, except: [77, 200]))
        #expect(r.transport.errorResponses == 2 && r.transport.connections == 3)
        // The rest of each write after the failure: 78…127 (write 64…127), then, the resent
        // ones leading the next connection's writes (78…141, 142…205), 201…205.
        let expectedResent = 50 + 5
        #expect(r.transport.resent == expectedResent)
    }

    @Test func lateErrorResponsesResendEverythingWrittenAfter() async throws {
        let faults = FaultPlan(responseDelayWrites: 2)
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: faults))
        sim.markInvalid(token(10))
        let r = try await Self.run(Self.envelopes(200), simulator: sim, options: .init(framesPerWrite: 8, writesPerCheck: 5), batch: 200)
        #expect(r.outcomes[10] == .rejected(.invalidToken))
        #expect(r.ledger.isBalanced && r.ledger.accepted == 199)
        #expect(r.delivered == seq(200, except: [10]))
        // Written after the failure before the provider read the error: the rest of its write and two more writes.
        let expectedResent = 5 + 16
        #expect(r.transport.resent == expectedResent)
    }

    @Test func shutdownResendsAfterTheLastGoodOneWithoutDuplicates() async throws {
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: FaultPlan(shutdownAfter: [30, 31, 500])))
        let r = try await Self.run(Self.envelopes(600), simulator: sim)
        #expect(r.ledger.isBalanced && r.ledger.accepted == 600)
        #expect(r.delivered == seq(600))
        #expect(r.transport.errorResponses == 3 && sim.counters.injectedShutdowns == 3)
    }

    @Test func abruptClosesResendTheUnknownAtLeastOnce() async throws {
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: FaultPlan(closeAfter: [50, 120])))
        let r = try await Self.run(Self.envelopes(400), simulator: sim, options: .init(framesPerWrite: 16, writesPerCheck: 2))
        #expect(r.ledger.isBalanced && r.ledger.accepted == 400)
        // Everything delivered, in order of first delivery; duplicates only from the unconfirmed window.
        var firstSeen: [UInt64] = []
        var seen = Set<UInt64>()
        for d in r.delivered where seen.insert(d).inserted { firstSeen.append(d) }
        #expect(firstSeen == seq(400))
        let duplicates = r.delivered.count - 400
        #expect(duplicates <= 2 * 32)
        #expect(r.transport.lostConnections == 2 && sim.counters.injectedCloses == 2)
    }

    @Test func partialWritesAndReadDelaysLoseNothing() async throws {
        let faults = FaultPlan(seed: 3, partialWriteProbability: 0.5, readDelayProbability: 0.3, readDelay: .milliseconds(1))
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: faults))
        let r = try await Self.run(Self.envelopes(500), simulator: sim)
        #expect(r.ledger.isBalanced && r.ledger.accepted == 500)
        #expect(r.delivered == seq(500))
        #expect(sim.counters.partialWrites > 0 && sim.counters.readDelays > 0)
    }

    @Test func aGatewayThatAlwaysHangsUpEndsInFailures() async throws {
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: FaultPlan(closeProbability: 1)))
        let r = try await Self.run(Self.envelopes(20), simulator: sim, options: .init(maxAttempts: 3))
        #expect(r.ledger.isBalanced && r.ledger.failed == 20)
        if case .failed(let reason)? = r.outcomes[0] { #expect(reason.contains("3 times")) } else { Issue.record("expected failed") }
    }

    @Test func randomFaultsKeepTheBooks() async throws {
        for seed in 0..<5 as Range<UInt64> {
            let faults = FaultPlan(seed: seed, closeProbability: 0.002, shutdownAfter: [100], responseDelayWrites: 1, partialWriteProbability: 0.2)
            let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: faults))
            sim.markInvalid(token(5))
            let r = try await Self.run(Self.envelopes(1000), simulator: sim, options: .init(framesPerWrite: 32, writesPerCheck: 2))
            #expect(r.ledger.isBalanced && r.ledger.entered == 1000, "seed \(seed)")
            // token(5) is used by 5, 261, 517, 773: each rejected, never delivered.
            let users: [UInt64] = [5, 261, 517, 773]
            for u in users { #expect(r.outcomes[u] == .rejected(.invalidToken)) }
            let delivered = Set(r.delivered)
            #expect(!delivered.contains(5))
            let acceptedButNotDelivered = r.outcomes.filter { $0.value == .accepted && !delivered.contains($0.key) }
            #expect(acceptedButNotDelivered.isEmpty)
        }
    }

    @Test func aBadSimpleFormatNotificationIsIsolated() async throws {
        // The simple format gets no error response: the gateway just hangs up.
        var e = Self.envelopes(100, format: .simple)
        e[40].payload = []
        e[40].frame = try BinaryFramer(format: .simple).frame(e[40])
        let sim = APNsSimulator()
        let r = try await Self.run(e, simulator: sim, options: .init(framesPerWrite: 16, maxAttempts: 3))
        #expect(r.ledger.isBalanced && r.ledger.accepted == 99 && r.ledger.failed == 1)
        if case .failed? = r.outcomes[40] {} else { Issue.record("expected the bad one to fail") }
        var firstSeen: [UInt64] = []
        var seen = Set<UInt64>()
        for d in r.delivered where seen.insert(d).inserted { firstSeen.append(d) }
        #expect(firstSeen == seq(100, except: [40]))
        // Only the window since the last quiet point (4 writes of 16: 0…47) was in doubt;
        // 0…39 had been delivered and are delivered again, once each.
        let duplicates = r.delivered.count - 99
        #expect(duplicates == 40)
    }

    @Test func envelopesWithoutFramesFail() async throws {
        var e = Self.envelopes(2)
        e[1].frame = nil
        let r = try await Self.run(e, simulator: APNsSimulator())
        #expect(r.ledger.isBalanced && r.outcomes[0] == .accepted)
        if case .failed? = r.outcomes[1] {} else { Issue.record("expected failed") }
    }
}
