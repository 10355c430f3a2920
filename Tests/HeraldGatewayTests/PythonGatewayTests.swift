import Foundation
import HeraldBinary
import HeraldCore
import HeraldTestSupport
import HeraldGateway
import HeraldOpenSSL
import HeraldTesting
import Testing

/// The gateway transport against a binary-interface gateway written outside
/// this project (`Tests/Interop/apns_gateway.py`, Python's `ssl`): it answers
/// an error and closes at once with the provider's later frames unread (a
/// reset), closes silently, answers status 10, loses answers, stalls.
@Suite("Gateway transport against an independent gateway (Python ssl)", .serialized,
       .enabled(if: ExternalServer.which("python3") != nil, "needs python3"))
struct PythonGatewayTests {
    struct Scenario {
        var count = 20_000
        var invalidEvery = 100
        var connections = 2
        var gatewayFlags: [String] = []
        var tweak: @Sendable (inout GatewayConfiguration) -> Void = { _ in }
    }

    struct Outcome {
        var snapshot: LedgerSnapshot
        var statistics: GatewayStatistics
        var duplicates: Int
        var seconds: Double
        var gateway: [String: Any]
    }

    static func run(_ s: Scenario) async throws -> Outcome {
        let certs = sharedCertificates
        let dir = temporaryDirectory()
        let tokens = (0..<s.count).map(GatewayRun.token)
        let invalid = Set(stride(from: s.invalidEvery / 2, to: s.count, by: s.invalidEvery).map { tokens[$0] })
        try invalid.map(\.hex).joined(separator: "\n").write(toFile: dir + "/invalid.txt", atomically: true, encoding: .utf8)
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/apns_gateway.py").path
        let gateway = try await ExternalServer.start(ExternalServer.which("python3")!, [
            script, "--cert", certs.serverCertificate, "--key", certs.serverKey, "--ca", certs.caCertificate,
            "--invalid-tokens", dir + "/invalid.txt", "--log", dir + "/delivered.log", "--max-seconds", "300",
        ] + s.gatewayFlags)
        let port = gateway.ready["port"] as! Int
        var config = gatewayConfig(port: port, identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), ca: certs.caCertificate)
        config.connections = s.connections
        config.drainTimeout = .seconds(60)
        s.tweak(&config)
        let transport = try GatewayTransport(configuration: config)
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        let seconds = try await GatewayRun.send(tokens, through: transport, ledger: ledger, batchSize: 512)
        let counters = await gateway.stop()

        // What the gateway says it took, per token.
        var delivered: [String: Int] = [:]
        let log = try String(contentsOfFile: dir + "/delivered.log", encoding: .utf8)
        for line in log.split(separator: "\n") {
            delivered[String(line.split(separator: " ")[0]), default: 0] += 1
        }
        var lost = 0, validFailed = 0, invalidWrong = 0, duplicates = 0
        for r in collector.records {
            let hex = r.token!.hex
            let times = delivered[hex] ?? 0
            if invalid.contains(r.token!) {
                if r.outcome != .rejected(.invalidToken) || times != 0 { invalidWrong += 1 }
            } else {
                if r.outcome != .accepted { validFailed += 1 }
                if times == 0 { lost += 1 }
                duplicates += max(0, times - 1)
            }
        }
        let snapshot = ledger.snapshot
        let stats = transport.statistics
        #expect(snapshot.isBalanced && snapshot.entered == UInt64(s.count), "\(snapshot)")
        #expect(lost == 0, "valid notifications never delivered")
        #expect(validFailed == 0, "\(collector.records.filter { $0.outcome.kind == .failed }.prefix(3))")
        #expect(invalidWrong == 0, "every invalid one rejected(8), never delivered")
        #expect(duplicates <= stats.resentAfterSilentClose, "\(duplicates) duplicates, \(stats.resentAfterSilentClose) resent after closes with no answer")
        return Outcome(snapshot: snapshot, statistics: stats, duplicates: duplicates, seconds: seconds, gateway: counters)
    }

    @Test("1% invalid, errors answered then reset: nothing lost, no duplicates")
    func clean() async throws {
        let o = try await Self.run(Scenario())
        #expect(o.duplicates == 0 && o.statistics.resentAfterSilentClose == 0)
        #expect(o.statistics.errorResponses >= 200)
    }

    @Test("100,000 with a silent close every 997, status 10 every 1,499, one answer in 50 lost")
    func appleLike() async throws {
        let o = try await Self.run(Scenario(count: 100_000, gatewayFlags: [
            "--close-every", "997", "--shutdown-every", "1499", "--lose-answer-every", "50",
        ]))
        #expect(o.statistics.shutdowns > 0 && o.statistics.silentCloses > 0)
        print("python gateway, apple-like: \(o.seconds) s, duplicates \(o.duplicates), possible \(o.statistics.resentAfterSilentClose), \(o.statistics.delivery)")
    }

    @Test("a stalled first connection and slow handshakes: the answer timeout moves the work on")
    func stallAndSlowHandshake() async throws {
        let o = try await Self.run(Scenario(count: 3_000, connections: 1,
                                            gatewayFlags: ["--stall-connections", "1", "--handshake-delay", "0.2"]) { c in
            c.delivery.answerTimeout = .milliseconds(500)
            c.delivery.confirmAfter = .milliseconds(100)
        })
        #expect(o.statistics.stalls >= 1)
    }
}
