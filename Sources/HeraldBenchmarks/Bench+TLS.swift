import ArgumentParser
import Foundation
import HeraldBinary
import HeraldCore
import HeraldGateway
import HeraldJSON
import HeraldOpenSSL
import HeraldSimulator
import HeraldTesting

/// `herald bench tls`: notifications per second through the gateway transport
/// over real TLS to the simulator served on loopback, both ends in this
/// process, over one and over several connections; with the in-memory
/// simulator transport (same framing, same validation, no TLS, no sockets) as
/// the baseline in the same run.
struct BenchTLS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "Notifications per second over TLS to the simulator on loopback, over 1 and N connections, both ends included."
    )

    @Option(help: "Notifications per run.")
    var count = 2_000_000

    @Option(help: "Connections for the parallel run.")
    var connections = 4

    @Option(help: "Notifications per batch handed to the transport.")
    var batchSize = 1024

    @Option(help: "Notifications in flight per connection before a probe confirms them (DeliveryPolicy.maxUnconfirmed).")
    var maxUnconfirmed = DeliveryPolicy().maxUnconfirmed

    @Option(help: "The newest TLS version both ends negotiate: 1.2 or 1.3.")
    var tlsMax = "1.3"

    @Option(help: "Spare connections kept ready per connection (GatewayConfiguration.spareConnections).")
    var spareConnections = GatewayConfiguration(host: "", port: 0, tls: .client(identity: nil)).spareConnections

    @Option(help: "Fraction of invalid tokens (rejected with status 8, forcing reconnects and resends). Above 0, the run is repeated at 0 and 0.001 on the same connections, and the report gives each rate and the ratio to the clean one.")
    var invalidFraction = 0.0

    struct RunResult {
        var seconds: Double
        var snapshot: LedgerSnapshot
        var statistics: GatewayStatistics?
        var simulatorAccepted: Int
    }

    static let payload = Array(#"{"aps":{"alert":"Hello from Herald","badge":1,"sound":"default"}}"#.utf8)

    func run() async throws {
        guard let version = TLSVersion(tlsMax) else { throw ValidationError("--tls-max must be 1.2 or 1.3") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-tls-\(UUID().uuidString)").path
        let certs = try ThrowawayCertificates.make(in: dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let tokens = (0..<1024).map { i in DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ i &* 7 &+ 1) }) }
        let invalidEvery = invalidFraction > 0 ? max(2, Int(1 / invalidFraction)) : 0
        let invalidToken = DeviceToken(bytes: [UInt8](repeating: 0xEE, count: 32))

        func makeSimulator() -> APNsSimulator {
            let s = APNsSimulator(configuration: SimulatorConfiguration(recordsDeliveries: false))
            s.markInvalid(invalidToken)
            return s
        }

        func drive(_ transport: any Transport, invalidEvery: Int, count: Int) async throws -> (Double, LedgerSnapshot) {
            let ledger = OutcomeLedger(tracksIdentity: false)
            let framer = BinaryFramer(format: .frame)
            let payload = Self.payload
            var batch: [Envelope] = []
            batch.reserveCapacity(batchSize)
            let seconds = try await measure {
                for i in 0..<count {
                    let token = invalidEvery > 0 && i % invalidEvery == invalidEvery / 2 ? invalidToken : tokens[i & 1023]
                    var e = Envelope(sequence: UInt64(i), request: NotificationRequest(token: token, id: UInt32(truncatingIfNeeded: i)))
                    e.payload = payload
                    e.frame = try framer.frame(e)
                    batch.append(e)
                    if batch.count == batchSize || i == count - 1 {
                        ledger.enter(EmptyCollection(), count: batch.count)
                        try await transport.send(batch, outcomes: ledger)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
                await transport.finish(outcomes: ledger)
            }
            return (seconds, ledger.snapshot)
        }

        func overTLS(connections: Int, invalidEvery: Int, count: Int = count, minUnconfirmed: Int? = nil) async throws -> RunResult {
            let simulator = makeSimulator()
            var serverConfig = TLSConfiguration.server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey),
                                                       clientCA: .caFile(certs.caCertificate))
            serverConfig.maximumVersion = version
            let serverTLS = try TLSContext(serverConfig)
            let server = try await SimulatorServer.start(simulator: simulator, tls: serverTLS)
            var config = GatewayConfiguration(
                host: "127.0.0.1", port: server.gatewayPort,
                tls: .client(identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), trust: .caFile(certs.caCertificate)),
                serverName: "localhost", connections: connections)
            config.maxQueued = max(config.maxQueued, 4 * batchSize * connections)
            config.delivery.maxUnconfirmed = maxUnconfirmed
            if let minUnconfirmed { config.delivery.minUnconfirmed = minUnconfirmed }
            config.tls.maximumVersion = version
            config.spareConnections = spareConnections
            let transport = try GatewayTransport(configuration: config)
            let (seconds, snapshot) = try await drive(transport, invalidEvery: invalidEvery, count: count)
            await server.stop()
            return RunResult(seconds: seconds, snapshot: snapshot, statistics: transport.statistics,
                             simulatorAccepted: simulator.counters.accepted)
        }

        let one = try await overTLS(connections: 1, invalidEvery: invalidEvery)
        let many = connections == 1 ? one : try await overTLS(connections: connections, invalidEvery: invalidEvery)

        // Baseline: the in-memory simulator transport, same frames and validation, no TLS or sockets.
        let memorySimulator = makeSimulator()
        let (memorySeconds, memorySnapshot) = try await drive(SimulatorTransport(simulator: memorySimulator), invalidEvery: invalidEvery, count: count)

        let expectedRejected = invalidEvery > 0 ? UInt64((0..<count).filter { $0 % invalidEvery == invalidEvery / 2 }.count) : 0
        func ok(_ r: RunResult) -> Bool {
            r.snapshot.isBalanced && r.snapshot.failed == 0 && r.snapshot.rejected == expectedRejected
                && r.snapshot.accepted == UInt64(count) - expectedRejected
        }

        var report = JSONLine()
        report.add("benchmark", "tls")
        report.add("notifications", count)
        report.add("payload_bytes", Self.payload.count)
        report.add("frame_bytes", Self.payload.count + 54)
        report.add("invalid_fraction", invalidFraction, places: 4)
        report.add("batch_size", batchSize)
        report.add("max_unconfirmed", maxUnconfirmed)
        report.add("spare_connections", spareConnections)
        report.add("tls_protocol", one.statistics?.protocolVersion ?? "none")
        report.add("connections_1_seconds", one.seconds, places: 3)
        report.add("connections_1_notifications_per_second", Double(count) / one.seconds, places: 0)
        if connections != 1 {
            report.add("connections_\(connections)_seconds", many.seconds, places: 3)
            report.add("connections_\(connections)_notifications_per_second", Double(count) / many.seconds, places: 0)
        }
        report.add("baseline_in_memory_simulator_notifications_per_second", Double(count) / memorySeconds, places: 0)
        let runs = connections == 1 ? [one] : [one, many]
        report.add("handshakes", runs.reduce(0) { $0 + ($1.statistics?.handshakes ?? 0) })
        report.add("resumed_handshakes", runs.reduce(0) { $0 + ($1.statistics?.resumedHandshakes ?? 0) })
        report.add("resent", runs.reduce(0) { $0 + ($1.statistics?.resent ?? 0) })
        report.add("simulator_accepted", runs.reduce(0) { $0 + $1.simulatorAccepted })
        var sweepCorrect = true
        if invalidFraction > 0 {
            // The same connections at 0 and 0.1% invalid: what error responses cost, measured in this run.
            var rates: [(Double, Double)] = []
            for fraction in [0.0, 0.001] {
                let every = fraction > 0 ? Int(1 / fraction) : 0
                let r = try await overTLS(connections: connections, invalidEvery: every)
                sweepCorrect = sweepCorrect && r.snapshot.isBalanced && r.snapshot.failed == 0
                rates.append((fraction, Double(count) / r.seconds))
            }
            rates.append((invalidFraction, Double(count) / many.seconds))
            for (fraction, rate) in rates {
                report.add("invalid_\(String(format: "%g", fraction * 100))_percent_notifications_per_second", rate, places: 0)
            }
            report.add("ratio_invalid_to_clean", rates[2].1 / rates[0].1, places: 3)
            report.add("goal_ratio_invalid_to_clean", 0.25, places: 2)
            // Every notification invalid, one written per connection: nothing but reconnections.
            // Each invalid notification ends its connection (the binary interface's rule), so the
            // rate at a fraction f of invalid ones can never pass reconnections per second / f.
            let pure = try await overTLS(connections: connections, invalidEvery: 1, count: min(count, 20_000), minUnconfirmed: 1)
            let reconnects = Double(pure.statistics?.errorResponses ?? 0) / pure.seconds
            sweepCorrect = sweepCorrect && pure.snapshot.isBalanced && pure.snapshot.failed == 0
            report.add("reconnections_per_second", reconnects, places: 0)
            report.add("ceiling_ratio_invalid_to_clean", reconnects / invalidFraction / rates[0].1, places: 3)
        }
        report.add("all_outcomes_correct", ok(one) && ok(many) && memorySnapshot.isBalanced && sweepCorrect)
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.add("goal_notifications_per_second", 300_000)
        report.print()
    }
}
