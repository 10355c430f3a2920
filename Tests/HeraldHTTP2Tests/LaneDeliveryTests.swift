import DequeModule
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

    /// A campaign through one connection of 1,000 streams to a server slower than its streams
    /// (a request served every `serviceMicros` µs on average, one at a time, then answered 20 ms
    /// later), with a fast-lane request every 10 ms: the fast lane's latencies (submit to answer)
    /// and the campaign's rate, in machine time.
    static func campaign(seed: UInt64, bulkQueueing: Duration?, bulk: Int = 12_000, serviceMicros: Int64 = 100) async -> (fastMs: [Double], bulkPerSecond: Double, limitAtEnd: Int) {
        var policy = HTTP2DeliveryPolicy()
        policy.bulkQueueing = bulkQueueing
        var m = HTTP2DeliveryMachine(policy: policy, seed: seed)
        var g = SeededGenerator(seed: seed)
        let t0 = Duration.seconds(1_700_000_000)
        var now = t0
        func laneItem(_ i: Int, _ lane: Lane) -> HTTP2Item {
            var it = HTTP2Item(sequence: UInt64(i), line: nil, id: UInt32(i), token: DeviceToken(bytes: [UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8), 1]),
                               request: APNsRequest(path: "/3/device/\(i)", headers: [], body: [1], pushType: .alert, apnsID: "id-\(i)"))
            it.lane = lane
            return it
        }
        m.enqueue((0..<bulk).map { laneItem($0, .bulk) }, now: now)
        var answers = Deque<(at: Duration, stream: Int)>()
        var serverFree = now
        var fastSent: [UInt64: Duration] = [:]
        var fastMs: [Double] = []
        var nextFast = t0 + .milliseconds(100)
        var fastN = 0
        var bulkLeft = bulk
        var bulkDone = now
        func perform() {
            // Until none is left: connecting opens streams, their sends come as actions of their own.
            var actions = m.takeActions()
            while !actions.isEmpty {
                defer { actions = m.takeActions() }
                for action in actions {
                switch action {
                case .connect(let c): m.connected(c, maxStreams: 1_000, now: now)
                case .send(_, let stream, _):
                    // Served in arrival order, each for 0.5-1.5 × serviceMicros, then answered 20 ms later.
                    serverFree = max(serverFree, now) + .microseconds(serviceMicros / 2 + Int64.random(in: 0...serviceMicros, using: &g))
                    answers.append((serverFree + .milliseconds(20), stream))
                default: break
                }
                }
            }
            for r in m.takeOutcomes() {
                if let sent = fastSent.removeValue(forKey: r.sequence) {
                    fastMs.append((now - sent).inSeconds * 1000)
                } else {
                    bulkLeft -= 1
                    if bulkLeft == 0 { bulkDone = now }
                }
            }
        }
        perform()
        var events = 0
        while bulkLeft > 0 || !fastSent.isEmpty {
            // Thousands of events in a row: other tests' tasks get the thread now and then (the
            // parallel run has two).
            events += 1
            if events % 2_000 == 0 { await Task.yield() }
            if bulkLeft > 0, answers.first.map({ nextFast <= $0.at }) ?? true {
                now = nextFast
                let it = laneItem(bulk + fastN, .fast)
                fastSent[it.sequence] = now
                fastN += 1
                nextFast += .milliseconds(10)
                m.enqueue([it], now: now)
            } else {
                let (at, stream) = answers.removeFirst()
                now = at
                m.answered(stream, APNsResponse(status: 200), now: now)
            }
            perform()
        }
        return (fastMs.sorted(), Double(bulk) / (bulkDone - t0).inSeconds, m.bulkStreams.limit)
    }

    @Test("a campaign through 1,000 streams to a server that serves 10,000/s (slower than its streams: every stream's request waits its turn), a fast-lane request every 10 ms: the bulk lane holds few enough streams that the fast lane's p99 is under 50 ms, and the campaign keeps at least 0.9 of the server's rate; without the limit the fast lane waits about 100 ms", arguments: 0..<6)
    func slowServer(seed: UInt64) async {
        let limited = await Self.campaign(seed: seed, bulkQueueing: .milliseconds(10))
        let p99 = limited.fastMs[limited.fastMs.count * 99 / 100]
        #expect(p99 < 50, "fast p99 \(p99) ms; the bulk lane's streams at the end: \(limited.limitAtEnd)")
        #expect(limited.bulkPerSecond >= 0.9 * 10_000, "\(limited.bulkPerSecond)/s")
        let unlimited = await Self.campaign(seed: seed, bulkQueueing: nil)
        #expect(unlimited.fastMs[unlimited.fastMs.count / 2] > 80, "the fast lane behind 1,000 streams: \(unlimited.fastMs[unlimited.fastMs.count / 2]) ms")
    }

    @Test("the same campaign to a server that keeps up (its streams are the limit: 1,000 per 20 ms): the bulk lane keeps every stream, so the campaign goes at the streams' rate")
    func fastServer() async {
        let run = await Self.campaign(seed: 1, bulkQueueing: .milliseconds(10), bulk: 100_000, serviceMicros: 2)
        #expect(run.bulkPerSecond >= 0.9 * 50_000, "\(run.bulkPerSecond)/s, limit \(run.limitAtEnd)")
        let p99 = run.fastMs[run.fastMs.count * 99 / 100]
        #expect(p99 < 50, "fast p99 \(p99) ms")
    }
}
