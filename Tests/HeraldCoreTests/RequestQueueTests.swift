import Metrics
import MetricsTestKit
import Testing
import Synchronization

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

/// Scheduled sends in the in-memory intake (issue 30): held apart until their `send-at`, then in
/// their lane; cancellable until then; at most `scheduleCapacity`.
@Suite("RequestQueue: scheduled sends held until their time, cancellable, bounded")
struct RequestQueueScheduleTests {
    static func request(_ i: Int, at: Int64?, priority: Int? = nil) -> NotificationRequest {
        var r = RequestQueueTests.request(i, priority: priority)
        r.sendAt = at
        return r
    }

    @Test("held until their time, then taken in time order in their lanes, each under the number it got when queued; a past send-at goes at once")
    func heldUntilDue() async throws {
        let clock = Atomic<Int64>(1_000_000)
        let queue = RequestQueue(now: { clock.load(ordering: .relaxed) })
        let numbers = try queue.enqueue([
            Self.request(0, at: 1_000_300), Self.request(1, at: 1_000_100, priority: 5), Self.request(2, at: nil),
            Self.request(3, at: 999_000), Self.request(4, at: 1_000_100),
        ]).get()
        #expect(numbers == 0..<5 && queue.scheduledCount == 3)
        #expect(try #require(await queue.take(max: 10)).map(\.sequence) == [2, 3])
        clock.store(1_000_100, ordering: .relaxed)
        // Both due now: the fast lane's first.
        #expect(try #require(await queue.take(max: 10)).map(\.sequence) == [4, 1])
        #expect(queue.scheduledCount == 1 && queue.isScheduled(0))
        clock.store(1_000_300, ordering: .relaxed)
        #expect(try #require(await queue.take(max: 10)).map(\.sequence) == [0])
        queue.close()
        #expect(await queue.take(max: 10) == nil)
    }

    @Test("cancelled before its time: never taken; after it, nothing to cancel; a batch over the capacity refused whole; what is held at the end failed")
    func cancelAndCapacity() async throws {
        let clock = Atomic<Int64>(5_000)
        let queue = RequestQueue(scheduleCapacity: 3, now: { clock.load(ordering: .relaxed) })
        _ = queue.enqueue([Self.request(0, at: 6_000), Self.request(1, at: 7_000)])
        #expect(queue.enqueue([Self.request(2, at: 8_000), Self.request(3, at: 9_000)]) == .failure(.scheduleFull(capacity: 3)))
        #expect(queue.issued == 2, "a refused batch takes no numbers")
        // Requests to send now are not counted against it.
        #expect(try queue.enqueue([Self.request(2, at: nil), Self.request(3, at: 9_000)]).get() == 2..<4)
        #expect(queue.cancel(0)?.request.id == 0 && queue.cancel(0) == nil && queue.cancel(2) == nil)
        clock.store(7_000, ordering: .relaxed)
        #expect(try #require(await queue.take(max: 10)).map(\.sequence) == [2, 1])
        #expect(queue.cancel(1) == nil)
        let ledger = OutcomeLedger()
        #expect(queue.failQueued(ledger, reason: "stopped") == 1 && queue.scheduledCount == 0)
        #expect(ledger.snapshot.failed == 1 && ledger.snapshot.isBalanced)
    }

    @Test("the longest wait (the operator's page, issue 31): the earlier of the lanes' first requests' queueing times, a scheduled one's from its send-at; none when nothing waits")
    func oldestWaiting() async throws {
        let clock = Atomic<Int64>(1_000_000)
        let queue = RequestQueue(now: { clock.load(ordering: .relaxed) })
        #expect(queue.oldestWaiting == nil)
        _ = queue.enqueue([Self.request(0, at: nil, priority: 5), Self.request(1, at: nil, priority: 5)])
        clock.store(1_000_500, ordering: .relaxed)
        _ = queue.enqueue([Self.request(2, at: nil, priority: 10), Self.request(3, at: 1_002_000)])
        #expect(queue.oldestWaiting == 1_000_000, "the campaign's first, queued first")
        // The fast request, then the bulk lane's first: its second request is now the bulk lane's head.
        #expect(try #require(await queue.take(max: 2)).map(\.sequence) == [2, 0])
        #expect(queue.oldestWaiting == 1_000_000, "request 1 was queued with request 0")
        #expect(try #require(await queue.take(max: 1)).map(\.sequence) == [1])
        #expect(queue.oldestWaiting == nil, "the scheduled one is held, not waiting")
        clock.store(1_005_000, ordering: .relaxed)
        // Its send-at (1,002,000) has come: moved to its lane, it has waited since then.
        let taken = try #require(await queue.take(max: 0))
        #expect(taken.isEmpty && queue.oldestWaiting == 1_002_000, "\(taken.map(\.sequence))")
        #expect(try #require(await queue.take(max: 10)).map(\.sequence) == [3])
        #expect(queue.oldestWaiting == nil)
    }

    @Test("a take waiting on an empty queue wakes at the next scheduled time (wall clock)")
    func wakesAtTheTime() async throws {
        let queue = RequestQueue()
        let start = ContinuousClock.now
        _ = queue.enqueue([Self.request(0, at: Duration.sinceEpochMilliseconds + 300)])
        let got = try #require(await queue.take(max: 10))
        let waited = ContinuousClock.now - start
        #expect(got.map(\.sequence) == [0])
        #expect(waited >= .milliseconds(250) && waited < .seconds(60), "\(waited)")
    }

    @Test("send-at: RFC 3339 in its forms, and epoch milliseconds; what is not one is an error naming the key")
    func decoding() throws {
        let vectors: [(String, Int64?)] = [
            ("1970-01-01T00:00:00Z", 0), ("2026-11-27T18:30:00Z", 1_795_804_200_000), ("2026-11-27t18:30:00.25z", 1_795_804_200_250),
            ("2026-11-27 19:30:00.123456+01:00", 1_795_804_200_123), ("2026-11-27T13:00:00-05:30", 1_795_804_200_000),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000), ("2023-02-29T00:00:00Z", nil), ("2026-13-01T00:00:00Z", nil),
            ("2026-11-27T18:30:00", nil), ("2026-11-27T18:30Z", nil), ("2026-11-27T18:30:00.Z", nil), ("2026-11-27T24:00:00Z", nil),
            ("tomorrow", nil), ("", nil),
        ]
        for (text, want) in vectors { #expect(SendAt.milliseconds(rfc3339: text) == want, "\(text)") }
        let token = String(repeating: "ab", count: 32)
        func decode(_ v: String) throws -> NotificationRequest {
            let line = #"{"token":"\#(token)","alert":"x","send-at":\#(v)}"#
            return try Array(line.utf8).withUnsafeBytes { try RequestDecoder().decode(line: $0) }
        }
        #expect(try decode(#""2026-11-27T18:30:00Z""#).sendAt == 1_795_804_200_000)
        #expect(try decode("1795804200000").sendAt == 1_795_804_200_000)
        #expect(throws: RequestError.self) { try decode("1795804200") }
        #expect(throws: RequestError.self) { try decode("253402300800000") }
        #expect(throws: RequestError.self) { try decode(#""next week""#) }
        #expect(throws: RequestError.self) { try decode("true") }
        let raw = #"{"token":"\#(token)","payload":{"aps":{"alert":"x"}},"send-at":1795804200000}"#
        #expect(try Array(raw.utf8).withUnsafeBytes { try RequestDecoder().decode(line: $0) }.sendAt == 1_795_804_200_000)
    }

    @Test("a scheduled request whose expiry passed while it waited is not sent: dropped, expired; one without a send-at is APNs' to judge")
    func expiredWhileWaiting() {
        var r = Self.request(0, at: 1_000_000)
        r.expiry = 1_500
        #expect(r.expiredBeforeSending(nowMilliseconds: 1_400_000) == nil)
        #expect(r.expiredBeforeSending(nowMilliseconds: 1_600_000)?.code == .expired)
        r.expiry = 0
        #expect(r.expiredBeforeSending(nowMilliseconds: 1_600_000) == nil)
        var now = Self.request(1, at: nil)
        now.expiry = 1_500
        #expect(now.expiredBeforeSending(nowMilliseconds: 1_600_000) == nil)
    }
}
