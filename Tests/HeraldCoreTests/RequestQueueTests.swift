import Metrics
import MetricsTestKit
import Testing

@testable import HeraldCore

/// The in-memory intake by lane (issue 30): `herald serve`'s and `HeraldClient`'s queue.
@Suite("RequestQueue: numbered as queued, taken lane by lane, the bulk lane held to its room")
struct RequestQueueTests {
    static func request(_ i: Int, priority: Int?) -> NotificationRequest {
        var aps = APS()
        aps.alert = Alert(body: "n\(i)")
        var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 32)), aps: aps, id: UInt32(i))
        r.priority = priority.map { Priority(rawValue: UInt8($0)) }
        return r
    }

    @Test("fast-lane requests queued behind a campaign are taken first, each under the number it got when queued; the campaign then follows in order")
    func fastOvertakes() async throws {
        let queue = RequestQueue()
        #expect(try queue.enqueue((0..<100).map { Self.request($0, priority: 5) }).get() == 0..<100)
        #expect(try queue.enqueue((100..<105).map { Self.request($0, priority: 10) }).get() == 100..<105)
        let first = try #require(await queue.take(max: 10))
        #expect(first.map(\.sequence) == Array(100..<105) + Array(0..<5))
        #expect(first.allSatisfy { $0.request.id == UInt32($0.sequence) })
        let rest = try #require(await queue.take(max: 1000))
        #expect(rest.map(\.sequence) == Array(5..<100))
        queue.close()
        #expect(await queue.take(max: 10) == nil)
    }

    @Test("with no room for the bulk lane, a take returns only fast-lane requests; with none, it waits a little for one (returning nothing), and one queued meanwhile is taken at once")
    func bulkRoom() async throws {
        let queue = RequestQueue()
        _ = queue.enqueue((0..<50).map { Self.request($0, priority: 1) })
        let some = try #require(await queue.take(max: 100, bulk: 20))
        #expect(some.map(\.sequence) == Array(0..<20))
        let clock = ContinuousClock()
        var start = clock.now
        #expect(await queue.take(max: 100, bulk: 0, wait: .milliseconds(50))?.isEmpty == true)
        #expect(clock.now - start >= .milliseconds(40))
        // A fast-lane request while the take waits: it ends the wait (the next take has it).
        start = clock.now
        // A lost wake-up would wait out the 600 s; CI's parallel run on 2 cores has delayed tasks
        // by tens of seconds, so the bound is generous.
        let waiting = Task { await queue.take(max: 100, bulk: 0, wait: .seconds(600)) }
        try await Task.sleep(for: .milliseconds(50))
        _ = queue.enqueue([Self.request(7, priority: 10)])
        _ = await waiting.value
        #expect(clock.now - start < .seconds(300))
        #expect(try #require(await queue.take(max: 100, bulk: 0)).map(\.sequence) == [50])
        #expect(queue.depth == 30)
    }

    @Test("the queue left when the pipeline stops is failed under each request's own number, both lanes")
    func failQueued() async throws {
        let queue = RequestQueue()
        _ = queue.enqueue((0..<3).map { Self.request($0, priority: 5) } + (3..<5).map { Self.request($0, priority: 10) })
        let ledger = OutcomeLedger()
        #expect(queue.failQueued(ledger, reason: OutcomeReason(.abandoned, "stopped")) == 5)
        #expect(ledger.snapshot.failed == 5 && ledger.snapshot.isBalanced, "\(ledger.snapshot)")
    }

    @Test("a source emitting lane by lane: each outcome timed by its own batch's entry, whatever the order of the numbers")
    func latencyByRuns() throws {
        let metrics = TestMetrics()
        let tracker = LatencyTracker(timer: Timer(label: "t", factory: metrics))
        let envelopes = [10, 11, 12, 0, 1, 40].map { Envelope(sequence: UInt64($0), request: Self.request($0, priority: nil)) }
        tracker.entered(envelopes)
        tracker.entered([5, 6].map { Envelope(sequence: UInt64($0), request: Self.request($0, priority: nil)) })
        tracker.observe([0, 1, 5, 6, 10, 11, 12, 40, 2, 13].map { OutcomeRecord(sequence: UInt64($0), line: nil, id: nil, token: nil, outcome: .accepted) })
        #expect(try metrics.expectTimer("t").values.count == 8, "2 and 13 never entered: not timed")
    }
}
