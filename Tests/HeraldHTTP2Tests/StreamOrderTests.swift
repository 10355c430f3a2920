import Foundation
import HeraldCore
import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldPayload
import HeraldTestSupport
import Testing

@testable import HeraldHTTP2

/// The order a connection's requests reach the server complete. swift-nio-http2
/// sends the DATA frames of one flush in the order of a `Set`; a server that
/// answers as bodies complete (APNs) then closes the streams in no order, and
/// each close out of order moves the later streams of both ends' stream maps
/// (at 1,000 streams, a third of each end's event loop). The transport flushes
/// each stream into the HTTP/2 handler as it writes it, and the socket once a
/// step: the server (Python h2, code not Herald's) sees every body complete in
/// stream order.
@Suite("Stream order: a connection's request bodies complete in stream order (Python h2 server)",
       .serialized, .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct StreamOrderTests {
    @Test("600 requests in batches of 200 on one connection: every body completes after the one before it")
    func bodiesInOrder() async throws {
        var (server, config) = try await startPingServer(pingInterval: "600", maxSeconds: "900")
        // A parallel test run can slow the Python server to a few dozen answers a second: no
        // request times out (a resend would rightly come out of order) and the drain waits.
        config.delivery.requestTimeout = .seconds(600)
        config.drainTimeout = .seconds(600)

        let count = 600
        let requests = (0..<count).map { i in
            var aps = APS()
            aps.alert = Alert(body: "Order \(i)")
            let token = DeviceToken(bytes: (0..<32).map { $0 < 4 ? UInt8(truncatingIfNeeded: i >> (8 * $0)) : UInt8($0) })
            return NotificationRequest(token: token, aps: aps, id: UInt32(i), topic: "com.example.app")
        }
        let collector = OutcomeCollector()
        let run = await catching { () async throws -> LedgerSnapshot in
            let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
            let pipeline = Pipeline(
                source: InMemorySource(requests),
                stages: [NamedStage("payload", BuildPayloadStage(APSPayloadBuilder()))],
                transport: transport, ledger: OutcomeLedger(observers: [collector]),
                options: PipelineOptions(batchSize: 200))
            return try await pipeline.run()
        }
        let report = await server.stop(interrupt: true)
        let snapshot = try run.get()
        let failures = Dictionary(grouping: collector.records.filter { $0.outcome != .accepted }, by: { "\($0.outcome)" }).mapValues(\.count)
        #expect(snapshot.isBalanced && snapshot.accepted == UInt64(count), "\(snapshot): \(failures)")
        #expect((report["answered"] as? NSNumber)?.intValue == count, "\(report)")
        #expect((report["connections"] as? NSNumber)?.intValue == 1, "\(report)")
        // One flush for a step's streams sent their bodies in a Set's order: most out of order (2,836 of 3,000).
        #expect((report["out_of_order"] as? NSNumber)?.intValue == 0, "\(report)")
    }
}
