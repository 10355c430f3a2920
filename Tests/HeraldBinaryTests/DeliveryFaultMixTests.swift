import HeraldBinary
import HeraldCore
import HeraldSimulator
import Testing

/// The delivery machine's invariants over seeded fault mixes, in memory and
/// virtual time: the production rules, thousands of gateways that misbehave
/// as Apple's does.
@Suite struct DeliveryFaultMixTests {
    static func uniqueToken(_ i: Int) -> DeviceToken {
        DeviceToken(bytes: [0xAA, UInt8(truncatingIfNeeded: i >> 16), UInt8(truncatingIfNeeded: i >> 8), UInt8(truncatingIfNeeded: i)]
            + [UInt8](repeating: 7, count: 28))
    }

    /// A fault mix dense enough that a few hundred notifications meet every kind of fault.
    static func denseMix(seed: UInt64) -> FaultPlan {
        FaultPlan(seed: seed, closeProbability: 0.01, partialWriteProbability: 0.05, readDelayProbability: 0.02,
                  shutdownProbability: 0.007, lostAnswerProbability: 0.1, midFrameCloseProbability: 0.01,
                  stallProbability: 0.01, slowHandshakeProbability: 0.05)
    }

    struct Checked {
        var run: SimulatorTransportTests.Run
        var duplicates: Int
        var faults: SimulatorCounters
    }

    /// Sends `count` notifications, `invalid` of them to invalid tokens, and checks every invariant.
    @discardableResult
    static func check(seed: UInt64, count: Int, invalid: Set<Int>, faults: FaultPlan, format: NotificationFormat = .frame,
                      writeBytes: Int = 1024, batch: Int = 100) async throws -> Checked {
        let sim = APNsSimulator(configuration: SimulatorConfiguration(faults: faults))
        for i in invalid { sim.markInvalid(uniqueToken(i)) }
        var p = DeliveryPolicy()
        p.writeBytes = writeBytes
        let r = try await SimulatorTransportTests.run(
            SimulatorTransportTests.envelopes(count, format: format, tokenFor: uniqueToken), simulator: sim,
            options: .init(delivery: p), batch: batch)
        #expect(r.ledger.isBalanced && r.ledger.entered == count && r.outcomes.count == count, "seed \(seed): every request ends once")
        var times = [Int](repeating: 0, count: count)
        for d in r.delivered { times[Int(d)] += 1 }
        var duplicates = 0
        for i in 0..<count {
            if invalid.contains(i) {
                #expect(r.outcomes[UInt64(i)] == .rejected(.invalidToken), "seed \(seed): invalid \(i) ended \(String(describing: r.outcomes[UInt64(i)]))")
                #expect(times[i] == 0)
            } else {
                #expect(r.outcomes[UInt64(i)] == .accepted, "seed \(seed): valid \(i) ended \(String(describing: r.outcomes[UInt64(i)]))")
                #expect(times[i] >= 1, "seed \(seed): valid \(i) accepted but never delivered")
                duplicates += max(0, times[i] - 1)
                // Delivered twice: its outcome says it may have been.
                if times[i] > 1 { #expect(r.possibleDuplicates.contains(UInt64(i)), "seed \(seed): \(i) delivered \(times[i]) times, not marked possibleDuplicate") }
            }
        }
        #expect(duplicates <= r.transport.resentAfterSilentClose, "seed \(seed): duplicates only from closes with no answer")
        #expect(r.possibleDuplicates.count <= r.transport.resentAfterSilentClose, "seed \(seed): marked only when written again after a silent close")
        return Checked(run: r, duplicates: duplicates, faults: sim.counters)
    }

    @Test("2,000 seeded dense fault mixes: nothing lost, nothing valid failed, every invalid rejected(8)")
    func denseMixes() async throws {
        var stats = DeliveryStatistics()
        var midFrame = 0, lost = 0, stalled = 0, slow = 0
        for seed in 0..<2000 as Range<UInt64> {
            let invalid: Set<Int> = [Int(seed % 97), 100 + Int(seed % 89), 250 + Int(seed % 41)]
            let c = try await Self.check(seed: seed, count: 300, invalid: invalid, faults: Self.denseMix(seed: seed))
            await Task.yield()
            stats.add(c.run.transport)
            midFrame += c.faults.midFrameCloses
            lost += c.faults.lostAnswers
            stalled += c.faults.stalledConnections
            slow += c.faults.slowHandshakes
        }
        // The mix reached every path.
        #expect(stats.silentCloses > 0 && stats.shutdowns > 0 && stats.stalls > 0 && stats.resentAfterSilentClose > 0)
        #expect(midFrame > 0 && lost > 0 && stalled > 0 && slow > 0, "mid-frame \(midFrame), lost \(lost), stalled \(stalled), slow \(slow)")
    }

    @Test("the Apple-like plan, every format, larger runs")
    func appleLike() async throws {
        for (k, format) in [NotificationFormat.enhanced, .frame].enumerated() {
            for seed in 0..<10 as Range<UInt64> {
                let invalid = Set((0..<50).map { $0 * 100 + Int(seed) })
                try await Self.check(seed: seed + UInt64(k) * 100, count: 5000, invalid: invalid,
                                     faults: .appleLike(seed: seed), format: format, writeBytes: 4096, batch: 1000)
            }
        }
    }

    @Test("without faults there are no duplicates and no resends after silent closes")
    func cleanRunsHaveNoDuplicates() async throws {
        let c = try await Self.check(seed: 1, count: 2000, invalid: [10, 999], faults: FaultPlan())
        #expect(c.duplicates == 0 && c.run.transport.resentAfterSilentClose == 0)
    }

    @Test("status 10 and error responses alone never cause duplicates")
    func answeredFaultsNeverDuplicate() async throws {
        for seed in 0..<200 as Range<UInt64> {
            let faults = FaultPlan(seed: seed, partialWriteProbability: 0.1, shutdownProbability: 0.01)
            let c = try await Self.check(seed: seed, count: 500, invalid: [3, 250, 499], faults: faults)
            #expect(c.duplicates == 0 && c.run.transport.resentAfterSilentClose == 0, "seed \(seed)")
        }
    }
}
