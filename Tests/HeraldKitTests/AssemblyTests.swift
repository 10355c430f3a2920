import Foundation
import HeraldCore
@testable import HeraldKit
import HeraldTestSupport
import Testing

let goodToken = String(repeating: "ab", count: 32)

@Suite("Assembly, configuration and JSON Lines ingest")
struct AssemblyTests {
    /// Drops requests whose body contains a word; used as a custom stage.
    struct Censor: EnvelopeStage {
        let word: String
        func apply(_ e: inout Envelope) throws(StageFailure) {
            if e.request.aps.alert?.body?.contains(word) == true { e.outcome = .dropped("censored") }
        }
    }

    func run(_ lines: [String], assembly: HeraldAssembly = HeraldAssembly()) async throws -> (LedgerSnapshot, [OutcomeRecord]) {
        let path = try temporaryFile(lines.joined(separator: "\n") + "\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let collector = OutcomeCollector()
        let pipeline = try assembly.makePipeline(source: JSONLinesSource(path: path), ledger: OutcomeLedger(observers: [collector]))
        let snapshot = try await pipeline.run()
        return (snapshot, collector.records)
    }

    @Test("malformed lines are dropped with their line numbers; the rest carries on")
    func malformedLines() async throws {
        let lines = [
            #"{"id":1,"token":"\#(goodToken)","alert":"one"}"#,
            #"{"id":2,"token":"\#(goodToken)","alert":"two""#,
            "",
            #"{"id":4,"token":"xyz","alert":"bad token"}"#,
            #"{"id":5,"token":"\#(goodToken)","alert":"five","colour":"red"}"#,
            #"[1,2]"#,
            #"{"id":7,"token":"\#(goodToken)","alert":"seven"}"#,
        ]
        let (s, records) = try await run(lines)
        #expect(s.entered == 6)
        #expect(s.accepted == 2)
        #expect(s.dropped == 4)
        #expect(s.isBalanced)
        let dropped = records.filter { $0.outcome.kind == .dropped }
        #expect(dropped.map(\.line) == [2, 4, 5, 6])
        guard dropped.count == 4 else { return }
        #expect(dropped[0].outcome == .dropped(OutcomeReason(.invalidRequest, "line 2: invalid JSON at line 1, column 97: unexpected end of input in object")))
        #expect(dropped[1].id == 4)
        #expect(dropped[2].outcome == .dropped(OutcomeReason(.invalidRequest, "line 5: unknown key \"colour\"")))
        #expect(dropped[3].outcome == .dropped(OutcomeReason(.invalidRequest, "line 6: request must be a JSON object, got array")))
        let accepted = records.filter { $0.outcome == .accepted }.compactMap(\.id)
        #expect(accepted == [1, 7])
    }

    @Test("a custom stage inserted by code runs after its position")
    func customStageByCode() async throws {
        var assembly = HeraldAssembly()
        assembly.insert(NamedStage("censor", Censor(word: "secret")), after: .localize)
        #expect(try assembly.stages().map(\.name) == ["ingest", "localize", "censor", "payload", "size", "frame"])
        #expect(try assembly.stages().filter(\.traced).map(\.name) == ["localize", "censor", "payload"], "a traced notification's stage spans: the built-in stages that do work, and every custom one")
        let (s, records) = try await run(
            [#"{"id":1,"token":"\#(goodToken)","alert":"a secret"}"#, #"{"id":2,"token":"\#(goodToken)","alert":"public"}"#],
            assembly: assembly)
        #expect(s.dropped == 1 && s.accepted == 1)
        #expect(records.first { $0.id == 1 }?.outcome == .dropped("censored"))
    }

    @Test("a custom stage registered by name is selected by the configuration file")
    func customStageByConfiguration() async throws {
        let registry = HeraldRegistry.standard()
        registry.registerStage("censor") { options in
            guard let word = try options.string("word") else { throw options.error("word", "required") }
            return Censor(word: word)
        }
        let config = try temporaryFile(
            #"{"stages":[{"type":"censor","after":"ingest","word":"spoiler"},{"type":"filter-topic","topics":["com.paused"]}]}"#,
            suffix: ".json")
        let assembly = HeraldAssembly(configuration: try HeraldConfiguration.load(path: config), registry: registry)
        #expect(try assembly.stages().map(\.name) == ["ingest", "censor", "localize", "payload", "size", "frame", "filter-topic"])
        let (s, records) = try await run(
            [
                #"{"id":1,"token":"\#(goodToken)","alert":"spoiler alert"}"#,
                #"{"id":2,"token":"\#(goodToken)","alert":"fine","topic":"com.paused"}"#,
                #"{"id":3,"token":"\#(goodToken)","alert":"fine","topic":"com.live"}"#,
            ], assembly: assembly)
        #expect(s.dropped == 2 && s.accepted == 1)
        #expect(records.first { $0.id == 2 }?.outcome == .dropped("topic is filtered: com.paused"))
    }

    @Test("configuration errors name the file and the key", arguments: [
        (#"{"pipeline":{"batchSize":0}}"#, "pipeline.batchSize: must be from 1 to 65536, got 0"),
        (#"{"payload":{"profile":"huge"}}"#, "payload.profile: unknown profile"),
        (#"{"payload":{"policy":"maybe"}}"#, "payload.policy: must be one of"),
        (#"{"stages":[{"type":"nope"}]}"#, "stages[0].type: unknown stage \"nope\""),
        (#"{"stages":[{"type":"filter-topic","topics":["a"],"after":"nowhere"}]}"#, "stages[0].after: must be one of"),
        (#"{"transport":{"type":"pigeon"}}"#, "transport.type: unknown transport \"pigeon\""),
        (#"{"transprot":{}}"#, "transprot: unknown key"),
        (#"{"transport":{"type":"simulator","colour":1}}"#, "transport.colour: unknown key"),
        (#"{"pipeline":[]}"#, "pipeline: must be an object"),
        (#"{"pipeline":"#, "invalid JSON at line 1"),
    ])
    func configurationErrors(text: String, message: String) async throws {
        let path = try temporaryFile(text, suffix: ".json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let configuration = try HeraldConfiguration.load(path: path)
            _ = try HeraldAssembly(configuration: configuration).makePipeline(source: InMemorySource([]))
            Issue.record("expected an error for \(text)")
        } catch {
            let description = "\(error)"
            #expect(description.hasPrefix(path + ": "), "\(description)")
            #expect(description.contains(message), "\(description)")
        }
    }

    @Test("a missing configuration file is an error naming it")
    func missingFile() {
        #expect(throws: ConfigError.self) { try HeraldConfiguration.load(path: "/nonexistent/herald.json") }
    }

    @Test("outcome lines follow the JSON Lines contract")
    func outcomeLines() throws {
        let t = try DeviceToken(hex: goodToken)
        let rejected = OutcomeRecord(sequence: 0, line: 3, id: 42, token: t, outcome: .rejected(.invalidToken))
        #expect(
            String(decoding: OutcomeWriter.line(rejected), as: UTF8.self)
                == #"{"id":42,"line":3,"token":"\#(goodToken)","outcome":"rejected","status":8,"reason":"invalid token"}"#)
        let dropped = OutcomeRecord(sequence: 1, line: nil, id: nil, token: nil, outcome: .dropped("say \"why\""))
        #expect(String(decoding: OutcomeWriter.line(dropped), as: UTF8.self) == #"{"outcome":"dropped","reason":"say \"why\""}"#)
    }

    @Test("the bundled example runs on the embedded default and balances")
    func bundledExample() async throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../examples/requests.jsonl").path
        let collector = OutcomeCollector()
        let pipeline = try HeraldAssembly().makePipeline(source: JSONLinesSource(path: path), ledger: OutcomeLedger(observers: [collector]))
        let s = try await pipeline.run()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").count
        #expect(s.entered == UInt64(lines))
        #expect(s.isBalanced)
        #expect(s.accepted >= 4)
        #expect(collector.records.count == lines)
    }
}

@Suite("Feedback loop in an assembled pipeline")
struct FeedbackLoopTests {
    @Test("after a status 8, later requests to the same token are suppressed")
    func statusEightSuppresses() async throws {
        let bad = String(repeating: "cd", count: 32)
        let config = try temporaryFile(#"{"transport":{"type":"simulator","invalidTokens":["\#(bad)"]},"pipeline":{"batchSize":1}}"#, suffix: ".json")
        let store = InMemoryTokenStore()
        let assembly = HeraldAssembly(configuration: try HeraldConfiguration.load(path: config), tokenStore: store)
        let lines = (0..<3).map { #"{"id":\#($0),"token":"\#(bad)","alert":"x"}"# } + [#"{"id":9,"token":"\#(goodToken)","alert":"x"}"#]
        let input = try temporaryFile(lines.joined(separator: "\n"))
        let collector = OutcomeCollector()
        let s = try await assembly.makePipeline(source: JSONLinesSource(path: input), ledger: OutcomeLedger(observers: [collector])).run()
        #expect(s.isBalanced)
        #expect(s.rejected >= 1)
        #expect(s.accepted == 1)
        #expect(s.rejected + s.suppressed == 3)
        #expect(store.isSuppressed(try DeviceToken(hex: bad)))
    }
}
