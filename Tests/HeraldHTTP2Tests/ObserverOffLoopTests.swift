import Foundation
import HeraldCore
import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldPayload
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldHTTP2

/// An outcome observer that blocks (a slow disk, a busy database) the first
/// time it is called, for `seconds`, and counts what it saw.
final class BlockingObserver: OutcomeObserver {
    let seconds: Double
    let state = Mutex<(calls: Int, records: Int, blocked: Double)>((0, 0, 0))
    init(seconds: Double) { self.seconds = seconds }
    func observe(_ records: [OutcomeRecord]) {
        let first = state.withLock { s -> Bool in
            s.calls += 1
            s.records += records.count
            return s.calls == 1
        }
        guard first else { return }
        let start = ContinuousClock.now
        Thread.sleep(forTimeInterval: seconds)
        state.withLock { $0.blocked = (ContinuousClock.now - start).inSeconds }
    }
}

/// Requests paced over time, as an app sends them when events happen.
struct PacedSource: NotificationSource {
    let count: Int
    let every: Duration
    func produce(into sink: SourceSink) async throws {
        for i in 0..<count {
            var aps = APS()
            aps.alert = Alert(body: "Event \(i)")
            let token = DeviceToken(bytes: (0..<32).map { $0 < 4 ? UInt8(truncatingIfNeeded: i >> (8 * $0)) : UInt8($0) })
            await sink.emit(NotificationRequest(token: token, aps: aps, id: UInt32(i), topic: "com.example.app"))
            await sink.flush()
            try await Task.sleep(for: every)
        }
    }
}

/// `Tests/Interop/h2_ping_server.py` (Python h2) on loopback, PINGing every `pingInterval`
/// seconds, and a transport configuration for it: one connection, TLS trusting the shared CA.
func startPingServer(pingInterval: String, maxSeconds: String = "300") async throws -> (ExternalServer, HTTP2TransportConfiguration) {
    let python = try await interopPython()
    let certs = sharedCertificates
    let server = try await ExternalServer.start(python, [
        repositoryRoot().appendingPathComponent("Tests/Interop/h2_ping_server.py").path,
        "--cert", certs.serverCertificate, "--key", certs.serverKey, "--host", "127.0.0.1", "--port", "0",
        "--ping-interval", pingInterval, "--max-seconds", maxSeconds,
    ])
    let port = (server.ready["port"] as? NSNumber)?.intValue ?? -1
    var config = HTTP2TransportConfiguration(
        host: "127.0.0.1", port: port, tls: .client(identity: nil, trust: .caFile(certs.caCertificate)))
    config.serverName = "localhost"
    config.defaultTopic = "com.example.app"
    config.delivery.connections = 1
    config.fastLaneConnection = false  // one connection (StreamOrderTests reads its order)
    return (server, config)
}

/// Its bounds are wall-clock ones (a PING answered within 1 s, requests within
/// 1.5 s), which a fully loaded 2-core parallel run stretches: `.ci/run` runs
/// it apart, after the parallel run (`HERALD_TIMING_APART=1` skips it there).
@Suite("Observers off the event loop: a blocking outcome observer against a server that PINGs (Python h2)",
       .serialized, .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"),
       .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
struct ObserverOffLoopTests {
    @Test("an observer blocks 2 s: the connection keeps answering PINGs within 1 s, every request is accepted, none times out")
    func blockingObserver() async throws {
        var (server, config) = try await startPingServer(pingInterval: "0.05")
        // Short enough that a request held up behind a blocked event loop (2 s) would time out.
        config.delivery.requestTimeout = .milliseconds(1500)

        let observer = BlockingObserver(seconds: 2)
        let collector = OutcomeCollector()
        let count = 120
        let run = await catching { () async throws -> (LedgerSnapshot, HTTP2TransportStatistics) in
            let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
            let pipeline = Pipeline(
                source: PacedSource(count: count, every: .milliseconds(25)),
                stages: [NamedStage("payload", BuildPayloadStage(APSPayloadBuilder()))],
                transport: transport, ledger: OutcomeLedger(observers: [observer, collector]),
                options: PipelineOptions(batchSize: 16))
            let snapshot = try await pipeline.run()
            return (snapshot, transport.statistics)
        }
        let report = await server.stop(interrupt: true)
        let (snapshot, statistics) = try run.get()

        let seen = observer.state.withLock { $0 }
        #expect(seen.blocked >= 1.9, "the observer blocked for \(seen.blocked) s")
        #expect(seen.records == count && collector.records.count == count, "every outcome reached the observers: \(seen.records)")
        #expect(snapshot.isBalanced && snapshot.accepted == UInt64(count), "\(snapshot)")
        #expect(statistics.timeouts == 0 && statistics.resentUnanswered == 0, "\(statistics)")
        // PINGs went on while the observer blocked, each answered at once (the old code, observers on
        // the loop: one waited the observer's 2 s, 2,115 ms, and two requests timed out and were resent).
        let pings = (report["acks"] as? NSNumber)?.intValue ?? 0
        let slowest = (report["max_ack_ms"] as? NSNumber)?.doubleValue ?? .infinity
        let unanswered = (report["unanswered_ping_ms"] as? NSNumber)?.doubleValue ?? .infinity
        #expect(pings >= 20, "\(report)")
        #expect(slowest < 1000 && unanswered < 1000, "\(report)")
        #expect((report["answered"] as? NSNumber)?.intValue == count, "\(report)")
    }
}
