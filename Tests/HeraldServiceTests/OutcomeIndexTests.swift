import HeraldCore
import Metrics
import Testing

@testable import HeraldService

/// `GET /v1/notifications/{id}`'s memory (`OutcomeIndex`) when ids are decided out of order: lanes
/// (issue 30) decide a fast-lane request numbered after a queued campaign before the campaign.
@Suite("OutcomeIndex: pending, decided and forgotten ids, decided in any order")
struct OutcomeIndexTests {
    static func record(_ id: UInt64) -> OutcomeRecord { OutcomeRecord(sequence: id, line: nil, id: nil, token: nil, outcome: .accepted) }

    @Test("a campaign's ids still queued stay pending while fast-lane ids numbered after them are decided and forgotten")
    func outOfOrder() {
        let index = OutcomeIndex(capacity: 10, metrics: NOOPMetricsHandler.instance)
        // Ids 0..<1000: a campaign, queued; 1000..<1100: fast-lane sends, decided (and most forgotten).
        index.observe((1000..<1100).map(Self.record))
        guard case .pending = index.lookup(5, issued: 1100) else { Issue.record("id 5 not decided: pending, not \(index.lookup(5, issued: 1100))"); return }
        guard case .forgotten = index.lookup(1000, issued: 1100) else { Issue.record("id 1000 decided and pushed out: forgotten"); return }
        guard case .decided = index.lookup(1099, issued: 1100) else { Issue.record("id 1099 among the last 10"); return }
        guard case .unknown = index.lookup(1100, issued: 1100) else { Issue.record("id 1100 never given"); return }
        index.observe((0..<1000).map(Self.record))
        guard case .forgotten = index.lookup(5, issued: 1100) else { Issue.record("id 5 decided and pushed out: forgotten"); return }
    }

    @Test("DecidedIDs against a plain set: random orders over 300 seeds, every id asked", arguments: 0..<300)
    func decidedIDs(seed: UInt64) {
        var g = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1
        func next(_ n: UInt64) -> UInt64 {
            g ^= g << 13; g ^= g >> 7; g ^= g << 17
            return g % n
        }
        let span = 50 + next(2000)
        // Mostly in order, some far ahead (a fast lane), some late (retries).
        var ids = Array(0..<span)
        for i in ids.indices where next(4) == 0 {
            let j = Int(next(UInt64(ids.count)))
            ids.swapAt(i, j)
        }
        var decided = DecidedIDs(), model = Set<UInt64>()
        for (k, id) in ids.prefix(Int(next(span + 1))).enumerated() {
            decided.insert(id)
            model.insert(id)
            if k % 97 == 0 { decided.insert(id) }  // twice: no change
        }
        for id in 0..<(span + 70) where decided.contains(id) != model.contains(id) {
            Issue.record("seed \(seed): id \(id): \(decided.contains(id)) against \(model.contains(id))")
            return
        }
        #expect(decided.low == (0...span).first { !model.contains($0) })
    }
}
