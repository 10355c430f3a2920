import Crypto
import HeraldCore
import HeraldSimulator
import Testing

@testable import HeraldHTTP2

/// The machine over the in-memory transport against the HTTP/2 simulator (which
/// verifies every JWT and counts every delivery), with seeded fault mixes.
/// Serialized: each case is synchronous work on the cooperative pool, and a
/// hundred at once would starve the timing-checked tests running beside them.
@Suite("HTTP/2 delivery machine under seeded fault mixes", .serialized)
struct HTTP2DeliveryFaultMixTests {
    static func simulator(seed: UInt64, trusting publicKey: P256.Signing.PublicKey, faults: Bool = true) throws -> HTTP2Simulator {
        var config = HTTP2SimulatorConfiguration()
        config.tokenKeyPEM = publicKey.pemRepresentation
        config.keyID = "KEY1234567"
        config.teamID = "TEAM123456"
        config.maxConcurrentStreams = 50
        if faults {
            var random = SeededGenerator(seed: seed)
            config.faults.seed = seed &+ 99
            config.faults.goAway = Double.random(in: 0...0.01, using: &random)
            config.faults.unavailable = Double.random(in: 0...0.02, using: &random)
            config.faults.tooManyRequests = Double.random(in: 0...0.01, using: &random)
            config.faults.internalError = Double.random(in: 0...0.01, using: &random)
            config.faults.reset = Double.random(in: 0...0.01, using: &random)
            config.faults.lostAnswer = Double.random(in: 0...0.005, using: &random)
        }
        return try HTTP2Simulator(configuration: config)
    }

    static func tokens(_ key: P256.Signing.PrivateKey) throws -> ProviderTokens {
        ProviderTokens(key: try ProviderTokenKey(pem: key.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456"))
    }

    @Test("every request ends once; valid ones accepted; 400s and 410s rejected; duplicates only after unanswered sends; one JWT", arguments: 0..<100)
    func faultMix(seed: Int) async throws {
        let key = P256.Signing.PrivateKey()
        let simulator = try Self.simulator(seed: UInt64(seed), trusting: key.publicKey)
        var random = SeededGenerator(seed: UInt64(seed))
        let envelopes = try alertEnvelopes(300 + Int.random(in: 0...300, using: &random))
        var bad = Set<UInt64>(), dead = Set<UInt64>()
        for e in envelopes {
            let r = Double.random(in: 0..<1, using: &random)
            if r < 0.01 { bad.insert(e.sequence); simulator.markInvalid(e.request.token) }
            else if r < 0.015 { dead.insert(e.sequence); simulator.markUnregistered(e.request.token, at: 1_699_000_000_000) }
        }
        var policy = HTTP2DeliveryPolicy()
        policy.connections = 1 + seed % 3
        policy.requestTimeout = .milliseconds(50)
        policy.maxAttempts = 8
        policy.backoff = BackoffPolicy(initial: .milliseconds(1), maximum: .milliseconds(20))
        policy.retryLaterDelay = .milliseconds(5)
        let transport = HTTP2SimulatorTransport(simulator: simulator, tokens: try Self.tokens(key), policy: policy)
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        ledger.enter(envelopes.map(\.sequence), count: envelopes.count)
        try await transport.send(envelopes, outcomes: ledger)

        #expect(ledger.snapshot.isBalanced && collector.records.count == envelopes.count, "one outcome per request")
        for r in collector.records {
            if bad.contains(r.sequence) {
                #expect(r.outcome == .rejected(Status(http: 400, reason: "BadDeviceToken")), "\(r.sequence): \(r.outcome)")
            } else if dead.contains(r.sequence) {
                #expect(r.outcome == .rejected(Status(http: 410, reason: "Unregistered")), "\(r.sequence): \(r.outcome)")
            } else {
                #expect(r.outcome == .accepted, "\(r.sequence): \(r.outcome)")
            }
            #expect(r.apnsID?.count == 36)
        }
        let counters = simulator.counters
        let stats = await transport.statistics
        #expect(counters.duplicates <= stats.resentUnanswered, "duplicates only after unanswered sends")
        // Every notification delivered twice says so in its outcome: possibleDuplicate, and only those resent.
        let twice = counters.deliveries.duplicated
        let marked = Set(collector.records.filter(\.possibleDuplicate).compactMap(\.apnsID))
        #expect(twice.isSubset(of: marked), "delivered twice, not marked: \(twice.subtracting(marked))")
        #expect(marked.count <= stats.resentUnanswered)
        #expect(counters.delivered - counters.duplicates == envelopes.count - bad.count - dead.count)
        #expect(await transport.takeDeadTokens().count == dead.count)
        #expect(await transport.tokensSigned == 1 && counters.providerTokens.count == 1, "exactly one JWT for the run")
    }

    @Test("a refused credential fails what is left once, with the reason, and sends nothing more")
    func credentialRefused() async throws {
        let simulator = try Self.simulator(seed: 1, trusting: P256.Signing.PrivateKey().publicKey, faults: false)  // trusts another key
        let transport = HTTP2SimulatorTransport(simulator: simulator, tokens: try Self.tokens(P256.Signing.PrivateKey()))
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        let envelopes = try alertEnvelopes(50)
        ledger.enter(envelopes.map(\.sequence), count: envelopes.count)
        try await transport.send(envelopes, outcomes: ledger)
        #expect(collector.records.count == 50)
        #expect(await transport.statistics.streams == 1, "one request learns the credential is refused; the rest are not sent")
        #expect(collector.records.allSatisfy {
            if case .failed(let r) = $0.outcome { return r.code == .credentialRejected && r.message.contains("InvalidProviderToken") } else { return false }
        })
    }
}
