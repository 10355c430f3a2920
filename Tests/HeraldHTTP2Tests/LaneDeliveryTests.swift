import HeraldCore
import HeraldSimulator
import Testing

@testable import HeraldHTTP2

/// Lanes in the HTTP/2 delivery machine (issue 30): a fast-lane request waits
/// for the next free stream, not behind the bulk lane's queue.
@Suite("Lanes in the HTTP/2 delivery machine")
struct LaneDeliveryTests {
    @Test("1,000 bulk requests queued ahead of 20 fast ones on one connection of 10 streams: the fast ones are answered among the first 40 outcomes (9 in 10 of the streams freed while both wait), in their order; every request once")
    func fastOvertakesBulk() async throws {
        var envelopes = try alertEnvelopes(1_020)
        for i in envelopes.indices { envelopes[i].request.lane = i < 1_000 ? .bulk : .fast }
        let (simulator, tokens) = try tokenAuthSimulator { $0.maxConcurrentStreams = 10 }
        let transport = HTTP2SimulatorTransport(simulator: simulator, tokens: tokens)
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        ledger.enter(envelopes.map(\.sequence), count: envelopes.count)
        try await transport.send(envelopes, outcomes: ledger)
        await transport.finish(outcomes: ledger)
        let order = collector.records.map(\.sequence)
        #expect(order.count == 1_020 && Set(order).count == 1_020 && ledger.snapshot.isBalanced)
        #expect(collector.records.allSatisfy { $0.outcome == .accepted })
        let fast = order.enumerated().filter { $0.element >= 1_000 }
        #expect(fast.map(\.element) == Array(1_000..<1_020), "the fast lane in its order")
        #expect(fast.map(\.offset).max()! < 40, "fast answered at \(fast.map(\.offset))")
        // The bulk lane kept its share while the fast lane waited: some bulk among the first 25.
        #expect(order.prefix(25).contains { $0 < 1_000 })
    }
}
