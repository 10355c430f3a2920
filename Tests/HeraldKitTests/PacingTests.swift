import HeraldCore
import HeraldJSON
import HeraldKit
import Synchronization
import Testing

/// Pacing from configuration (issue 30): a `transport` section's `pacing`, through a pipeline to
/// the HTTP/2 simulator. The rules over simulated time (1/s, 100 notifications): `PacerTests`.
@Suite("Pacing from configuration: a pipeline to the HTTP/2 simulator")
struct PacingTests {
    /// Each outcome with when it was recorded.
    final class TimedOutcomes: OutcomeObserver {
        let storage = Mutex<[(OutcomeRecord, ContinuousClock.Instant)]>([])
        func observe(_ records: [OutcomeRecord]) {
            let now = ContinuousClock.now
            storage.withLock { s in s += records.map { ($0, now) } }
        }
        var all: [(OutcomeRecord, ContinuousClock.Instant)] { storage.withLock { $0 } }
    }

    static func configuration(_ pacing: String) throws -> HeraldConfiguration {
        let json = #"{"transport":{"type":"http2-simulator","bundleID":"com.example.app","pacing":\#(pacing)}}"#
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: "test", key: "", message: "not an object") }
        return try HeraldConfiguration.parse(ConfigNode(file: "test.json", object: o))
    }

    static let token = DeviceToken(bytes: [UInt8](repeating: 0x42, count: 32))

    static func requests(_ n: Int, collapse: String? = nil, others: Int = 0) -> [NotificationRequest] {
        (0..<(n + others)).map { i in
            var aps = APS()
            aps.alert = Alert(body: "n\(i)")
            var r = NotificationRequest(
                token: i < n ? token : DeviceToken(bytes: [UInt8](repeating: UInt8(i % 200), count: 31) + [1]), aps: aps, id: UInt32(i))
            r.topic = "com.example.app"
            r.collapseID = i < n ? collapse : nil
            return r
        }
    }

    @Test("perTokenSeconds 0.05: 40 notifications to one device at once go out 50 ms apart, 40 to others at once; all accepted, none lost")
    func perToken() async throws {
        let outcomes = TimedOutcomes()
        let assembly = HeraldAssembly(configuration: try Self.configuration(#"{"perTokenSeconds":0.05}"#))
        let start = ContinuousClock.now
        let pipeline = try assembly.makePipeline(source: InMemorySource(Self.requests(40, others: 40)), ledger: OutcomeLedger(observers: [outcomes]))
        let snapshot = try await pipeline.run()
        #expect(snapshot.isBalanced && snapshot.accepted == 80, "\(snapshot)")
        let one = outcomes.all.filter { $0.0.token == Self.token }.map(\.1)
        let others = outcomes.all.filter { $0.0.token != Self.token }.map(\.1)
        #expect(one.count == 40 && others.count == 40)
        #expect(one.last! - start >= .milliseconds(1_900), "the one device's 40 took \(one.last! - start)")
        #expect(others.max()! - start < one.last! - start, "the other devices' notifications waited for the one device's pace")
    }

    @Test("with collapse: 40 to one device with one collapse-id: the first and the last accepted, 38 dropped collapsed; the summary's counters say so")
    func collapse() async throws {
        let outcomes = TimedOutcomes()
        let assembly = HeraldAssembly(configuration: try Self.configuration(#"{"perTokenSeconds":0.5,"collapse":true}"#))
        let transport = try assembly.transport()
        let pipeline = try assembly.makePipeline(
            source: InMemorySource(Self.requests(40, collapse: "score")), ledger: OutcomeLedger(observers: [outcomes]), transport: transport)
        let snapshot = try await pipeline.run()
        #expect(snapshot.isBalanced && snapshot.accepted == 2 && snapshot.dropped == 38, "\(snapshot)")
        let ids = outcomes.all.filter { $0.0.outcome == .accepted }.compactMap(\.0.id).sorted()
        #expect(ids == [0, 39])
        #expect(outcomes.all.allSatisfy { r in
            if case .dropped(let why) = r.0.outcome { return why.code == .collapsed }
            return true
        })
        let counters = Dictionary(uniqueKeysWithValues: await (transport as! any TransportReporting).counters.map { ($0.name, $0.value) })
        #expect(counters["collapsed"] == 38 && counters["paced_by_token"] == 1, "\(counters)")
    }

    @Test("configuration mistakes name the key: no limit given, collapse without perTokenSeconds, a rate of 0")
    func mistakes() throws {
        for (pacing, key) in [("{}", "perSecond"), (#"{"perSecond":10,"collapse":true}"#, "collapse"), (#"{"perSecond":0}"#, "perSecond"), (#"{"perTokenSeconds":-1}"#, "perTokenSeconds")] {
            #expect {
                _ = try HeraldAssembly(configuration: try Self.configuration(pacing)).transport()
            } throws: { error in
                "\(error)".contains(key)
            }
        }
    }
}
