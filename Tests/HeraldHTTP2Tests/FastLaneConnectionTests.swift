import Foundation
import HeraldCore
@testable import HeraldHTTP2Transport
import HeraldTestSupport
import HeraldTesting
import Testing

/// `fastLaneConnection`: the fast lane's notifications on a connection of their own, so that one
/// sent while a campaign holds every stream of its connection waits for nothing but its answer.
@Suite("The HTTP/2 transport's fast-lane connection", .serialized)
struct FastLaneConnectionTests {
    /// The simulator answering `answerDelay` late, and a transport of one configured connection of
    /// two streams, with or without the fast-lane connection. The caller stops the server.
    func twoStreams(answerDelay: Duration, ownConnection: Bool) async throws -> (TLSSimulatorSetup, HTTP2Transport) {
        let setup = try await TLSSimulatorSetup.start(answerDelay: answerDelay)
        var c = setup.configuration(connections: 1)
        c.maxStreamsPerConnection = 2
        c.fastLaneConnection = ownConnection
        return (setup, try HTTP2Transport(configuration: c, group: http2TestGroup))
    }

    /// Twelve bulk notifications queue for both streams of the campaign's connection (answers come
    /// 1 s late, so the campaign holds them about 6 s); once two are on them, a fast-lane one is sent.
    /// With its own connection, a first fast-lane notification opens it (its handshake, which a
    /// loaded machine can stretch past a second, is outside what is measured) and the measured one
    /// follows while the campaign still holds both streams. Its time to its outcome, how long after
    /// the campaign it was sent, the campaign's outcomes by then, and the handshakes.
    func fastBehindCampaign(ownConnection: Bool) async throws -> (fastSeconds: Double, afterCampaign: Double, campaignDone: Int, handshakes: Int) {
        let (setup, transport) = try await twoStreams(answerDelay: .seconds(1), ownConnection: ownConnection)
        defer { Task { await setup.server.stop() } }
        let campaignSize = 12
        var envelopes = try alertEnvelopes(campaignSize + 2)
        for i in 0..<campaignSize { envelopes[i].request.lane = .bulk }
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        let campaign = Array(envelopes[0..<campaignSize])
        ledger.enter(campaign.map(\.sequence), count: campaign.count)
        let campaignSent = ContinuousClock.now
        try await transport.send(campaign, outcomes: ledger)
        #expect(transport.health == .ready)
        // Until the campaign holds both streams (under load, its connection can take a while).
        try? await waitUntil(seconds: 20) { transport.statistics.delivery.streams >= 2 }
        // The fast-lane connection was never opened for the campaign.
        #expect(transport.statistics.handshakes == 1)

        /// Sends one fast-lane notification and waits for its outcome: the seconds it took.
        func sendFast(_ envelope: Envelope) async throws -> Double {
            ledger.enter([envelope.sequence], count: 1)
            let sent = ContinuousClock.now
            try await transport.send([envelope], outcomes: ledger)
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if collector.records.contains(where: { $0.sequence == envelope.sequence }) { return (ContinuousClock.now - sent).inSeconds }
                try await Task.sleep(for: .milliseconds(5))
            }
            return .infinity
        }
        if ownConnection { _ = try await sendFast(envelopes[campaignSize]) }
        let sent = ContinuousClock.now
        let campaignDone = collector.records.filter { $0.sequence < UInt64(campaignSize) }.count
        let fastSeconds = try await sendFast(envelopes[campaignSize + 1])
        await transport.finish(outcomes: ledger)
        let books = ledger.snapshot
        #expect(books.isBalanced && books.accepted == (ownConnection ? campaignSize + 2 : campaignSize + 1), "\(books)")
        #expect(setup.simulator.counters.duplicates == 0)
        return (fastSeconds, (sent - campaignSent).inSeconds, campaignDone, transport.statistics.handshakes)
    }

    // Wall-clock bounds: run apart by .ci/run.
    @Test("behind a campaign holding every stream of its connection, a fast-lane notification on its own (open) connection is answered in its answer's time (under 1.7 s for 1 s answers); on the shared connection it waits for a stream first (2 s after the campaign began, at least); the fast-lane connection opens only for the fast lane",
          .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func fastLaneOwnConnection() async throws {
        let own = try await fastBehindCampaign(ownConnection: true)
        // Sent while the campaign still held both streams, with more of it queued behind them.
        #expect(own.campaignDone <= 8, "the campaign had \(own.campaignDone) of 12 outcomes when the fast-lane notification was sent")
        #expect(own.fastSeconds < 1.7, "the fast-lane notification took \(own.fastSeconds) s on its own connection")
        #expect(own.handshakes == 2)

        let shared = try await fastBehindCampaign(ownConnection: false)
        print("a fast-lane notification behind a campaign: \(own.fastSeconds) s on its own connection (sent \(own.afterCampaign) s after it), \(shared.fastSeconds) s on the campaign's (sent \(shared.afterCampaign) s after it)")
        // A stream frees 1 s after the campaign's were opened at the earliest, and its answer takes
        // 1 s more: 2 s after the campaign was sent, less the time the fast one was sent after it.
        #expect(shared.fastSeconds >= 1.95 - shared.afterCampaign, "the fast-lane notification took \(shared.fastSeconds) s on the campaign's connection, sent \(shared.afterCampaign) s after it")
        #expect(shared.handshakes == 1)
    }

    @Test("a fast-lane batch larger than what the fast-lane connection's streams hold: it takes that many, the rest go out on the bulk lane's connection, each answered once; emptied, the fast-lane connection takes the next one again")
    func spillsOntoBulkConnections() async throws {
        let (setup, transport) = try await twoStreams(answerDelay: .milliseconds(100), ownConnection: true)
        defer { Task { await setup.server.stop() } }
        let envelopes = try alertEnvelopes(11)
        #expect(envelopes.allSatisfy { $0.request.effectiveLane == .fast })
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        ledger.enter(envelopes.map(\.sequence), count: envelopes.count)
        try await transport.send(Array(envelopes[0..<10]), outcomes: ledger)
        let fastDriver = try #require(transport.fastDriver)
        try? await waitUntil(seconds: 20) { collector.records.count >= 10 && fastDriver.queuedCount.load(ordering: .relaxed) == 0 }
        /// Streams opened by each driver: the bulk lane's, then the fast lane's.
        func streams() -> [Int] { transport.drivers.map { d in d.published.withLock { $0.delivery.streams } } }
        #expect(streams() == [8, 2])
        try await transport.send([envelopes[10]], outcomes: ledger)
        await transport.finish(outcomes: ledger)
        #expect(streams() == [8, 3])
        let books = ledger.snapshot
        #expect(books.isBalanced && books.accepted == 11, "\(books)")
        #expect(transport.statistics.handshakes == 2)
        #expect(setup.simulator.counters.duplicates == 0)
    }

    @Test("fastLaneConnection: on by default; a transport with it has one more driver, of one connection, and the bulk lane's drivers keep every configured connection")
    func configured() throws {
        let setupless = HTTP2TransportConfiguration(host: "127.0.0.1", port: 1, tls: .client(identity: nil))
        #expect(setupless.fastLaneConnection)
        var c = setupless
        c.delivery.connections = 3
        c.fastLaneConnection = true
        let transport = try HTTP2Transport(configuration: c, group: http2TestGroup)
        #expect(transport.drivers.count == 3 && transport.bulkDrivers.count == 2)
        #expect(transport.fastDriver === transport.drivers.last && transport.fastDriver?.configuration.delivery.connections == 1)
        #expect(transport.bulkDrivers.map(\.configuration.delivery.connections).reduce(0, +) == 3)
    }
}
