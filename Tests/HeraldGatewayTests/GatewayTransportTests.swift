import Foundation
import HeraldBinary
import HeraldCore
import HeraldSimulator
import HeraldGateway
import HeraldTestSupport
import HeraldOpenSSL
import HeraldTesting
import Synchronization
import Testing


/// A run of N notifications through the gateway transport over TLS to the simulator.
struct GatewayRun {
    var count = 100_000
    var invalidFraction = 0.01
    var connections = 2
    var seed: UInt64 = 42
    var faults = FaultPlan()
    var batchSize = 256
    var receiveBuffer: Int? = Int(ProcessInfo.processInfo.environment["RCVBUF"] ?? "")
    var sendBuffer: Int? = Int(ProcessInfo.processInfo.environment["SNDBUF"] ?? "")
    var high: Int? = Int(ProcessInfo.processInfo.environment["HIGHWATER"] ?? "")
    var tweak: @Sendable (inout GatewayConfiguration) -> Void = { _ in }

    struct Result {
        var snapshot: LedgerSnapshot
        var records: [OutcomeRecord]
        var deliveries: [Delivery]
        var invalid: Set<DeviceToken>
        var tokens: [DeviceToken]
        var statistics: GatewayStatistics
        var simulatorCounters: SimulatorCounters
        var seconds: Double
    }

    static func token(_ i: Int) -> DeviceToken {
        var b = [UInt8](repeating: 0, count: 32)
        var x = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 | 1
        for k in 0..<32 { b[k] = UInt8(truncatingIfNeeded: x >> (8 * UInt64(k % 8))); if k % 8 == 7 { x = x &* 6364136223846793005 &+ 1 } }
        b[0] = UInt8(truncatingIfNeeded: i)
        b[1] = UInt8(truncatingIfNeeded: i >> 8)
        b[2] = UInt8(truncatingIfNeeded: i >> 16)
        return DeviceToken(bytes: b)
    }

    /// Sends one framed notification per token (request id = index), in batches, then finishes; returns the seconds taken.
    static func send(_ tokens: [DeviceToken], through transport: any Transport, ledger: OutcomeLedger, batchSize: Int) async throws -> Double {
        let framer = BinaryFramer(format: .frame)
        let payload = Array(#"{"aps":{"alert":"Hello from Herald","badge":1}}"#.utf8)
        let start = Date()
        var batch: [Envelope] = []
        batch.reserveCapacity(batchSize)
        for (i, token) in tokens.enumerated() {
            var e = Envelope(sequence: UInt64(i), request: NotificationRequest(token: token, id: UInt32(i)))
            e.payload = payload
            e.frame = try framer.frame(e)
            batch.append(e)
            if batch.count == batchSize || i == tokens.count - 1 {
                ledger.enter(batch.map(\.sequence), count: batch.count)
                try await transport.send(batch, outcomes: ledger)
                batch.removeAll(keepingCapacity: true)
            }
        }
        await transport.finish(outcomes: ledger)
        return Date().timeIntervalSince(start)
    }

    func run() async throws -> Result {
        let certs = sharedCertificates
        let simulator = APNsSimulator(configuration: SimulatorConfiguration(faults: faults))
        var generator = SeededGenerator(seed: seed)
        let tokens = (0..<count).map(Self.token)
        var invalid = Set<DeviceToken>()
        let invalidCount = Int(Double(count) * invalidFraction)
        while invalid.count < invalidCount {
            invalid.insert(tokens[Int(generator.next() % UInt64(count))])
        }
        for t in invalid { simulator.markInvalid(t) }

        let serverTLS = try TLSContext(.server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey),
                                               clientCA: .caFile(certs.caCertificate)))
        let server = try await SimulatorServer.start(simulator: simulator, tls: serverTLS, receiveBuffer: receiveBuffer)
        var config = GatewayConfiguration(
            host: "127.0.0.1", port: server.gatewayPort,
            tls: .client(identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), trust: .caFile(certs.caCertificate)),
            serverName: "localhost", connections: connections)
        // The drain's deadline counts from the last batch handed over, with the whole send window
        // still to confirm: a loaded CI run (about 100 s for this test) once left 741 unconfirmed at
        // 20 s. A gateway that stops answering for good still fails the run, at this deadline at the
        // latest: nothing may fail.
        config.drainTimeout = .seconds(300)
        config.socketSendBuffer = sendBuffer
        if let high { config.writeBufferHigh = high; config.writeBufferLow = high / 4 }
        tweak(&config)
        let transport = try GatewayTransport(configuration: config)
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        let seconds = try await Self.send(tokens, through: transport, ledger: ledger, batchSize: batchSize)
        await server.stop()
        return Result(snapshot: ledger.snapshot, records: collector.records, deliveries: simulator.deliveries, invalid: invalid,
                      tokens: tokens, statistics: transport.statistics, simulatorCounters: simulator.counters, seconds: seconds)
    }
}

extension GatewayRun.Result {
    /// Every invalid token rejected with status 8, every valid one accepted, the books balanced.
    func checkOutcomes() {
        #expect(snapshot.isBalanced, "\(snapshot)")
        #expect(snapshot.entered == UInt64(tokens.count))
        #expect(snapshot.failed == 0, "\(records.filter { $0.outcome.kind == .failed }.prefix(3))")
        #expect(snapshot.rejected == UInt64(invalid.count))
        #expect(snapshot.accepted == UInt64(tokens.count - invalid.count))
        var wrong = 0
        for r in records {
            let bad = invalid.contains(r.token!)
            switch r.outcome {
            case .rejected(let s): if !bad || s != .invalidToken { wrong += 1 }
            case .accepted: if bad { wrong += 1 }
            default: wrong += 1
            }
        }
        #expect(wrong == 0)
    }

    /// How often the simulator recorded each valid token.
    func deliveryCounts() -> [DeviceToken: Int] {
        var counts: [DeviceToken: Int] = [:]
        for d in deliveries { counts[d.token, default: 0] += 1 }
        return counts
    }

    /// Each valid notification arrived exactly once; no invalid one was recorded.
    func checkExactlyOnce() {
        let counts = deliveryCounts()
        #expect(deliveries.count == tokens.count - invalid.count, "\(deliveries.count) deliveries")
        #expect(counts.count == tokens.count - invalid.count)
        #expect(counts.values.allSatisfy { $0 == 1 })
        #expect(invalid.allSatisfy { counts[$0] == nil })
    }
}

@Suite("Gateway transport over TLS against the simulator", .serialized)
struct GatewayTransportTests {
    @Test("100,000 notifications, 1% invalid tokens: each valid one arrives exactly once, each invalid one is rejected with status 8")
    func invalidTokens() async throws {
        let r = try await GatewayRun().run()
        r.checkOutcomes()
        r.checkExactlyOnce()
        #expect(r.statistics.errorResponses >= r.invalid.count)
        #expect(r.statistics.probes >= 1)
        #expect(r.simulatorCounters.rejected[8] == r.invalid.count)
        // Reconnections after error responses resume the TLS session.
        #expect(r.statistics.resumedHandshakes * 10 >= r.statistics.handshakes * 9, "\(r.statistics.resumedHandshakes) of \(r.statistics.handshakes)")
    }

    @Test("the same with status 10 (shutdown) at random points: everything after the named identifier is resent, exactly once")
    func shutdowns() async throws {
        var g = SeededGenerator(seed: 7)
        let points = (0..<25).map { _ in Int(g.next() % 95_000) }
        let r = try await GatewayRun(seed: 7, faults: FaultPlan(seed: 7, shutdownAfter: points)).run()
        r.checkOutcomes()
        r.checkExactlyOnce()
        #expect(r.statistics.shutdowns == Set(points).count)
        #expect(r.statistics.resentAfterSilentClose == 0)
    }

    @Test("the same with slow reads and late error responses: backpressure, nothing lost, exactly once")
    func slowReads() async throws {
        let faults = FaultPlan(seed: 11, responseDelayWrites: 2, readDelayProbability: 0.05, readDelay: .milliseconds(2))
        let r = try await GatewayRun(seed: 11, faults: faults).run()
        r.checkOutcomes()
        r.checkExactlyOnce()
        #expect(r.simulatorCounters.readDelays > 0)
    }

    @Test("the same with random disconnects (no error response): every valid one arrives, duplicates only from what was in flight")
    func randomDisconnects() async throws {
        let faults = FaultPlan(seed: 13, closeProbability: 0.0005)
        let r = try await GatewayRun(seed: 13, faults: faults).run()
        r.checkOutcomes()
        let counts = r.deliveryCounts()
        #expect(counts.count == r.tokens.count - r.invalid.count, "every valid notification arrived")
        #expect(r.invalid.allSatisfy { counts[$0] == nil })
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        #expect(r.simulatorCounters.injectedCloses > 10)
        #expect(r.statistics.silentCloses == r.simulatorCounters.injectedCloses)
        // At least once: only notifications in flight at a silent close can arrive twice.
        #expect(duplicates <= r.statistics.resentAfterSilentClose, "\(duplicates) duplicates, \(r.statistics.resentAfterSilentClose) resent after silent closes")
        // The other runs have no silent closes, so nothing was resent that way there.
    }

    @Test("Apple-like faults over TLS (silent closes, status 10, lost answers, mid-frame cuts, stalls, slow handshakes): nothing lost, nothing valid failed")
    func appleLike() async throws {
        // HERALD_LONG=1 runs the million of docs/protocol.md.
        let count = ProcessInfo.processInfo.environment["HERALD_LONG"] != nil ? 1_000_000 : 100_000
        var faults = FaultPlan.appleLike(seed: 21)
        faults.handshakeDelay = .milliseconds(30)
        // The plan's 0.2% of connections came to no stall at all in one CI run of about 2,200
        // connections (which draws come out depends on timing): 0.5% makes about 11, and none at all
        // a one-in-50,000 chance, so the check below that every fault kind happened holds.
        faults.stallProbability = 0.005
        let r = try await GatewayRun(count: count, seed: 21, faults: faults, tweak: { c in
            c.delivery.answerTimeout = .milliseconds(400)
            c.delivery.confirmAfter = .milliseconds(100)
        }).run()
        r.checkOutcomes()
        let counts = r.deliveryCounts()
        #expect(counts.count == r.tokens.count - r.invalid.count, "every valid notification delivered")
        #expect(r.invalid.allSatisfy { counts[$0] == nil })
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        #expect(duplicates <= r.statistics.resentAfterSilentClose)
        let c = r.simulatorCounters
        #expect(c.injectedCloses > 0 && c.injectedShutdowns > 0 && c.lostAnswers > 0 && c.stalledConnections > 0 && c.slowHandshakes > 0)
        print("apple-like over TLS: \(count) in \(r.seconds) s; duplicates \(duplicates) of \(r.statistics.resentAfterSilentClose) possible; "
            + "closes \(c.injectedCloses), shutdowns \(c.injectedShutdowns), lost answers \(c.lostAnswers), mid-frame \(c.midFrameCloses), "
            + "stalls \(c.stalledConnections), slow handshakes \(c.slowHandshakes); \(r.statistics.delivery)")
    }
}


@Suite("Gateway transport under random fault mixes", .serialized)
struct GatewayFaultMixTests {
    /// For many seeds: a random mix of invalid tokens, silent closes, status 10,
    /// late and lost error responses, mid-frame cuts, stalls, slow handshakes,
    /// partial reads and read pauses. Whatever the mix:
    /// the books balance, nothing fails, every invalid token is rejected with
    /// status 8 and never delivered, every valid one is delivered, and only a
    /// silent close can cause a duplicate (none without one).
    @Test(arguments: 1...16)
    func invariantsHold(seed: UInt64) async throws {
        var g = SeededGenerator(seed: seed &* 7919)
        let count = 1_500 + Int(g.next() % 2_500)
        let faults = FaultPlan(
            seed: seed,
            closeProbability: g.chance(0.5) ? [0.0005, 0.002, 0.01][Int(g.next() % 3)] : 0,
            shutdownAfter: (0..<Int(g.next() % 4)).map { _ in 1 + Int(g.next() % UInt64(count)) },
            responseDelayWrites: Int(g.next() % 3),
            partialWriteProbability: g.chance(0.5) ? 0.2 : 0,
            readDelayProbability: g.chance(0.5) ? 0.05 : 0,
            readDelay: .milliseconds(1),
            shutdownProbability: g.chance(0.5) ? 0.002 : 0,
            lostAnswerProbability: g.chance(0.5) ? 0.05 : 0,
            midFrameCloseProbability: g.chance(0.5) ? 0.01 : 0,
            stallProbability: g.chance(0.3) ? 0.02 : 0,
            slowHandshakeProbability: g.chance(0.3) ? 0.05 : 0,
            handshakeDelay: .milliseconds(20))
        let run = GatewayRun(
            count: count, invalidFraction: Double(g.next() % 4) / 100, connections: 1 + Int(g.next() % 3), seed: seed,
            faults: faults, batchSize: 64 + Int(g.next() % 512), tweak: { c in
                c.delivery.answerTimeout = .milliseconds(300)
                c.delivery.confirmAfter = .milliseconds(50)
            })
        let r = try await run.run()
        r.checkOutcomes()
        let counts = r.deliveryCounts()
        #expect(counts.count == r.tokens.count - r.invalid.count, "every valid notification delivered (seed \(seed))")
        #expect(r.invalid.allSatisfy { counts[$0] == nil })
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        #expect(duplicates <= r.statistics.resentAfterSilentClose)
        if r.statistics.resentAfterSilentClose == 0 { #expect(duplicates == 0) }
    }
}
