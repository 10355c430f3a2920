import Crypto
import HeraldClient
import HeraldCore
import HeraldHTTP2
import HeraldKit
import HeraldSimulator
import Testing

/// The client over the in-memory HTTP/2 transport against the simulator with
/// seeded fault mixes (GOAWAY, 503, 429, 500, resets, lost answers): every
/// `send` returns exactly once, with its own notification's outcome.
@Suite("HeraldClient under seeded fault mixes", .serialized)
struct ClientFaultMixTests {
    static let keyPEMs: (privateKey: String, publicKey: String) = {
        let key = P256.Signing.PrivateKey()
        return (key.pemRepresentation, key.publicKey.pemRepresentation)
    }()

    static func run(seed: UInt64) async throws -> (duplicates: Int, resentUnanswered: Int, faulted: Int) {
        var random = SeededGenerator(seed: seed)
        var config = HTTP2SimulatorConfiguration()
        config.tokenKeyPEM = keyPEMs.publicKey
        config.keyID = "KEY1234567"
        config.teamID = "TEAM123456"
        config.maxConcurrentStreams = 10
        config.faults.seed = seed &+ 7
        config.faults.goAway = Double.random(in: 0...0.05, using: &random)
        config.faults.unavailable = Double.random(in: 0...0.05, using: &random)
        config.faults.tooManyRequests = Double.random(in: 0...0.05, using: &random)
        config.faults.internalError = Double.random(in: 0...0.03, using: &random)
        config.faults.reset = Double.random(in: 0...0.03, using: &random)
        config.faults.lostAnswer = Double.random(in: 0...0.03, using: &random)
        let simulator = try HTTP2Simulator(configuration: config)
        let count = 20 + Int.random(in: 0...40, using: &random)
        var bad = Set<Int>(), dead = Set<Int>()
        for i in 0..<count {
            let r = Double.random(in: 0..<1, using: &random)
            if r < 0.05 { bad.insert(i); simulator.markInvalid(token(i)) }
            else if r < 0.08 { dead.insert(i); simulator.markUnregistered(token(i), at: 1_699_000_000_000) }
        }
        var policy = HTTP2DeliveryPolicy()
        policy.connections = 1 + Int(seed % 2)
        policy.requestTimeout = .milliseconds(50)
        policy.maxAttempts = 12
        policy.backoff = BackoffPolicy(initial: .milliseconds(1), maximum: .milliseconds(20))
        policy.retryLaterDelay = .milliseconds(5)
        let tokens = ProviderTokens(key: try ProviderTokenKey(pem: keyPEMs.privateKey, keyID: "KEY1234567", teamID: "TEAM123456"))
        let transport = HTTP2SimulatorTransport(simulator: simulator, tokens: tokens, policy: policy)
        var options = PipelineOptions()
        options.batchSize = 1 + Int(seed % 16)
        var configuration = HeraldConfiguration()
        configuration.pipeline = options
        let client = try HeraldClient(assembly: HeraldAssembly(configuration: configuration), transport: transport)
        let runner = Task { try await client.run() }
        // Some callers send alone, some in batches.
        let outcomes = try await withThrowingTaskGroup(of: [(Int, SendOutcome)].self) { group in
            var i = 0
            while i < count {
                let n = Int.random(in: 1...4, using: &random), first = i
                let ids = first..<min(count, first + n)
                if ids.count == 1 {
                    group.addTask { [(first, try await client.send(alert(first)))] }
                } else {
                    group.addTask { Array(zip(ids, try await client.send(ids.map { alert($0) }))) }
                }
                i += n
            }
            return try await group.reduce(into: [(Int, SendOutcome)]()) { $0 += $1 }
        }
        client.shutdown()
        try await runner.value
        #expect(outcomes.count == count && Set(outcomes.map(\.0)).count == count, "seed \(seed): one return per send")
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == UInt64(count), "seed \(seed): \(client.ledger.snapshot)")
        for (i, o) in outcomes {
            #expect(o.record.id == UInt32(i), "seed \(seed): caller \(i) got notification \(String(describing: o.record.id))")
            if bad.contains(i) {
                #expect(o.status == Status(http: 400, reason: "BadDeviceToken"), "seed \(seed), \(i): \(o)")
            } else if dead.contains(i) {
                #expect(o.status == Status(http: 410, reason: "Unregistered"), "seed \(seed), \(i): \(o)")
            } else {
                #expect(o.isAccepted, "seed \(seed), \(i): \(o)")
            }
        }
        let counters = simulator.counters
        let stats = await transport.statistics
        #expect(counters.duplicates <= stats.resentUnanswered, "seed \(seed): duplicates only after unanswered sends")
        // Every notification delivered twice tells its caller: SendOutcome.possibleDuplicate.
        let twice = counters.deliveries.duplicated
        let marked = Set(outcomes.filter { $0.1.possibleDuplicate }.compactMap { $0.1.apnsID })
        #expect(twice.isSubset(of: marked), "seed \(seed): delivered twice, not marked: \(twice.subtracting(marked))")
        #expect(marked.count <= stats.resentUnanswered, "seed \(seed)")
        let faulted = counters.goAways + counters.resets + counters.lostAnswers + counters.answers.filter { $0.key != "" && $0.key != "BadDeviceToken" && $0.key != "Unregistered" }.values.reduce(0, +)
        return (counters.duplicates, stats.resentUnanswered, faulted)
    }

    @Test("2,000 seeds: every send returns once with its own outcome; valid ones accepted, 400s and 410s rejected; duplicates only after unanswered sends")
    func seeds() async throws {
        var faulted = 0, duplicates = 0
        for seed in 0..<UInt64(2000) {
            let r = try await Self.run(seed: seed)
            faulted += r.faulted
            duplicates += r.duplicates
        }
        #expect(faulted > 2000, "the mixes injected faults: \(faulted)")
    }
}
