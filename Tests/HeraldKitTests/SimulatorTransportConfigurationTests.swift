import HeraldCore
import HeraldJSON
import HeraldKit
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
