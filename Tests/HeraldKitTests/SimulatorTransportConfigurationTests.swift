import HeraldCore
import HeraldJSON
import HeraldKit
@testable import HeraldSimulator
import Synchronization
import Testing

@Suite("The simulator transport from configuration")
struct SimulatorTransportConfigurationTests {
    static func configuration(_ json: String) throws -> HeraldConfiguration {
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: "test", key: "", message: "not an object") }
        return try HeraldConfiguration.parse(ConfigNode(file: "test.json", object: o))
    }

    static let tokens = (0..<4).map { i in DeviceToken(bytes: [UInt8](repeating: UInt8(0x10 + i), count: 32)) }

    static func requests(_ n: Int) -> [NotificationRequest] {
        (0..<n).map { i in
            var aps = APS()
            aps.alert = Alert(body: "hello \(i)")
            return NotificationRequest(token: tokens[i % 4], aps: aps, id: UInt32(i))
        }
    }

    @Test("invalid tokens are rejected, faults are survived, the books balance")
    func faultsAndRejections() async throws {
        let json = """
            {"frame": {"format": "enhanced"},
             "transport": {"type": "simulator", "invalidTokens": ["\(Self.tokens[3].hex)"], "uninstalledTokens": ["\(Self.tokens[2].hex)"],
                           "writeBytes": 1024, "maxUnconfirmed": 64, "minUnconfirmed": 16,
                           "faults": {"seed": 9, "shutdownAfter": [40], "closeAfter": [90], "responseDelayWrites": 1, "partialWriteProbability": 0.3}}}
            """
        let assembly = HeraldAssembly(configuration: try Self.configuration(json))
        let collector = OutcomeCollector()
        let pipeline = try assembly.makePipeline(source: InMemorySource(Self.requests(200)), ledger: OutcomeLedger(observers: [collector]))
        let snapshot = try await pipeline.run()
        #expect(snapshot.isBalanced && snapshot.entered == 200)
        #expect(snapshot.rejected == 50 && snapshot.accepted == 150)
        for r in collector.records where r.token == Self.tokens[3] { #expect(r.outcome == .rejected(.invalidToken)) }
    }

    @Test("shards: the pipeline's threads without faults, 1 with faults (a seed reproduces), or as configured")
    func shardCounts() throws {
        func shards(_ json: String) throws -> Int {
            let transport = try HeraldAssembly(configuration: try Self.configuration(json)).transport()
            if transport is SimulatorTransport { return 1 }
            return try #require(transport as? ShardedSimulatorTransport).shards.count
        }
        #expect(try shards(#"{"pipeline":{"threads":4},"transport":{"type":"simulator"}}"#) == 4)
        #expect(try shards(#"{"pipeline":{"threads":1},"transport":{"type":"simulator"}}"#) == 1)
        #expect(try shards(#"{"pipeline":{"threads":4},"transport":{"type":"simulator","faults":{"seed":3}}}"#) == 1)
        #expect(try shards(#"{"pipeline":{"threads":1},"transport":{"type":"simulator","shards":3}}"#) == 3)
        #expect(throws: ConfigError.self) { try shards(#"{"transport":{"type":"simulator","shards":0}}"#) }
    }

    @Test("5 shards record what 1 records, in the same order: invalid, uninstalled and offline tokens, 3,000 requests over 60 tokens")
    func shardsRecordWhatOneRecords() async throws {
        let tokens = (0..<60).map { i in DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i &* 13) }) }
        let requests = (0..<3000).map { i in
            var aps = APS()
            aps.alert = Alert(body: "hello \(i)")
            return NotificationRequest(token: tokens[i % 60], aps: aps, id: UInt32(i))
        }
        func run(shards: Int) async throws -> [OutcomeRecord] {
            let json = """
                {"frame": {"format": "enhanced"}, "pipeline": {"batchSize": 100},
                 "transport": {"type": "simulator", "shards": \(shards), "invalidTokens": ["\(tokens[3].hex)", "\(tokens[41].hex)"],
                               "uninstalledTokens": ["\(tokens[7].hex)"], "offlineTokens": ["\(tokens[8].hex)"]}}
                """
            let collector = OutcomeCollector()
            let pipeline = try HeraldAssembly(configuration: try Self.configuration(json))
                .makePipeline(source: InMemorySource(requests), ledger: OutcomeLedger(observers: [collector]))
            let snapshot = try await pipeline.run()
            // Two invalid tokens of 60: rejected, or suppressed once a rejection came back (uninstalled
            // tokens are accepted: the binary interface reports them through the feedback service).
            #expect(snapshot.isBalanced && snapshot.entered == 3000)
            #expect(snapshot.rejected + snapshot.suppressed == 100 && snapshot.accepted == 2900)
            return collector.records
        }
        let one = try await run(shards: 1), five = try await run(shards: 5)
        // What the transport recorded comes in input order either way (suppressed records come from a stage, whenever it decides).
        let sent = { (r: [OutcomeRecord]) in r.filter { $0.outcome != .suppressed }.map(\.sequence) }
        #expect(sent(one) == sent(one).sorted() && sent(five) == sent(five).sorted())
        let byOne = Dictionary(uniqueKeysWithValues: one.map { ($0.sequence, $0) }), byFive = Dictionary(uniqueKeysWithValues: five.map { ($0.sequence, $0) })
        #expect(byOne.count == 3000 && byFive.count == 3000)
        for (sequence, a) in byOne {
            let b = try #require(byFive[sequence])
            #expect(a.token == b.token)
            if a.outcome == .suppressed || b.outcome == .suppressed {
                #expect(Set([a.outcome, b.outcome]).isSubset(of: [.suppressed, .rejected(.invalidToken)]), "sequence \(sequence)")
            } else {
                #expect(a.outcome == b.outcome, "sequence \(sequence)")
            }
        }
    }

    /// Notes the order records come in, taking a little while over each batch (as writing an outcome
    /// line does), so that batches finishing meanwhile find a recorder at work.
    final class OrderCheck: OutcomeObserver {
        let seen = Mutex<(last: UInt64?, inversions: Int, count: Int)>((nil, 0, 0))
        func observe(_ records: [OutcomeRecord]) {
            seen.withLock { s in
                for r in records {
                    if let last = s.last, r.sequence <= last { s.inversions += 1 }
                    s.last = r.sequence
                    s.count += 1
                }
            }
            let until = ContinuousClock.now + .microseconds(20)
            while ContinuousClock.now < until {}
        }
    }

    @Test("batches delivered out of order on many threads are recorded in the order they were sent: one recorder at a time")
    func shardedRecordsInOrder() async throws {
        var inversions = 0
        for round in 0..<6 {
            let transport = ShardedSimulatorTransport(shards: (0..<4).map { _ in SimulatorTransport() })
            let check = OrderCheck(), ledger = OutcomeLedger(observers: [check])
            let batches = 3000
            // As if `batches` sends had each taken a ticket: batch i holds sequence i.
            transport.state.withLock { s in
                s.nextTicket = batches
                s.outstanding = batches
            }
            transport.gate.add(batches)
            ledger.enter(0..<UInt64(batches), count: batches)
            // Deliveries finish in no particular order, on every thread at once.
            var order = Array(0..<batches)
            var generator = SeededGenerator(seed: 29 &+ UInt64(round))
            order.shuffle(using: &generator)
            let finishing = order
            await withTaskGroup(of: Void.self) { group in
                for part in 0..<8 {
                    group.addTask {
                        for ticket in stride(from: part, to: batches, by: 8).map({ finishing[$0] }) {
                            let record = OutcomeRecord(sequence: UInt64(ticket), line: ticket + 1, id: nil, token: nil, outcome: .accepted)
                            transport.delivered(ticket, [record], ledger)
                        }
                    }
                }
            }
            let seen = check.seen.withLock { $0 }
            #expect(seen.count == batches, "round \(round): \(seen.count) of \(batches) recorded")
            inversions += seen.inversions
            #expect(ledger.snapshot.isBalanced)
            await transport.finish(outcomes: ledger)  // returns: nothing outstanding
        }
        #expect(inversions == 0, "\(inversions) batches recorded after a later one")
    }

    @Test("bad options name the key")
    func badOptions() throws {
        #expect(throws: ConfigError.self) {
            _ = try HeraldAssembly(configuration: try Self.configuration(#"{"transport":{"type":"simulator","faults":{"closeProbability":2}}}"#)).transport()
        }
        #expect(throws: ConfigError.self) {
            _ = try HeraldAssembly(configuration: try Self.configuration(#"{"transport":{"type":"simulator","invalidTokens":["zz"]}}"#)).transport()
        }
        let assembly = HeraldAssembly(configuration: try Self.configuration(#"{"transport":{"type":"simulator","faults":{"sed":1}}}"#))
        #expect(throws: ConfigError.self) { _ = try assembly.makePipeline(source: InMemorySource([])) }
    }
}
