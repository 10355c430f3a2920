import Crypto
import HeraldClient
import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldKit
import HeraldSimulator
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@Suite("HeraldClient: awaited sends, one outcome each, backpressure, cancellation, shutdown")
struct HeraldClientTests {
    static func gated(maxUndecided: Int = 65_536) throws -> (HeraldClient, GateTransport) {
        let gate = GateTransport()
        return (try HeraldClient(assembly: HeraldAssembly(), transport: gate, options: .init(maxUndecided: maxUndecided)), gate)
    }

    @Test("2,000 concurrent callers through the in-memory HTTP/2 simulator: each gets its own notification's outcome (accepted, 400 BadDeviceToken, 410 with its timestamp); a token answered 410 is suppressed at the next send; the books balance")
    func concurrentCallers() async throws {
        let simulator = try HTTP2Simulator()
        for i in stride(from: 0, to: 2000, by: 97) { simulator.markInvalid(token(i)) }
        for i in stride(from: 5, to: 2000, by: 101) { simulator.markUnregistered(token(i), at: 1_700_000_000_000) }
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: HTTP2SimulatorTransport(simulator: simulator))
        let runner = Task { try await client.run() }
        let outcomes = try await withThrowingTaskGroup(of: (Int, SendOutcome).self) { group in
            for i in 0..<2000 { group.addTask { (i, try await client.send(alert(i))) } }
            return try await group.reduce(into: [Int: SendOutcome]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.count == 2000)
        for (i, o) in outcomes {
            #expect(o.record.id == UInt32(i) && o.record.token == token(i), "caller \(i) got another notification's outcome")
            if i % 97 == 0 {
                #expect(o.status == Status(http: 400, reason: "BadDeviceToken"), "\(i): \(o)")
            } else if i % 101 == 5 {
                #expect(o.status == Status(http: 410, reason: "Unregistered") && o.unregisteredAt == 1_700_000_000_000, "\(i): \(o)")
            } else {
                #expect(o.isAccepted && o.apnsID?.count == 36, "\(i): \(o)")
            }
        }
        // The feedback loop: the client's token store learned the 410 before its caller was resumed.
        #expect(try await client.send(alert(5)).kind == .suppressed)
        client.shutdown()
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == 2001)
    }

    @Test("a batch send: one outcome per request, in the batch's order")
    func batch() async throws {
        let (client, gate) = try Self.gated()
        gate.release()
        let runner = Task { try await client.run() }
        let outcomes = try await client.send((0..<300).map { alert($0) } + [alert(300, topic: nil)])
        #expect(outcomes.count == 301 && outcomes.enumerated().allSatisfy { $0.element.record.id == UInt32($0.offset) })
        #expect(outcomes.prefix(300).allSatisfy { $0.isAccepted })
        #expect(try await client.send([]).isEmpty)
        client.shutdown()
        try await runner.value
    }

    @Test("a full pipeline suspends callers: with 10 undecided allowed and none decided, 10 enter and 20 wait; once outcomes come, all 30 end, each once")
    func fullPipelineSuspends() async throws {
        let (client, gate) = try Self.gated(maxUndecided: 10)
        let runner = Task { try await client.run() }
        let done = Count()
        let senders = Task {
            try await withThrowingDiscardingTaskGroup { group in
                for i in 0..<30 {
                    group.addTask {
                        let accepted = try await client.send(alert(i)).isAccepted
                        #expect(accepted)
                        done.add()
                    }
                }
            }
        }
        #expect(await eventually { gate.heldCount == 10 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(gate.heldCount == 10 && client.ledger.snapshot.entered == 10 && done.value == 0, "the other 20 wait for room")
        gate.release()
        try await senders.value
        #expect(done.value == 30 && client.ledger.snapshot.entered == 30)
        client.shutdown()
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced)
    }

    static func campaign(_ range: Range<Int>) -> [NotificationRequest] {
        range.map { i in
            var r = alert(i)
            r.priority = Priority(rawValue: 5)
            return r
        }
    }

    @Test("a fast-lane send overtakes a campaign: 20,000 bulk-lane notifications taken, the pipeline holding at most its bulk window of them, the rest waiting at the intake; a priority-10 send enters at once and its caller has its outcome while the campaign waits; then the campaign ends, every notification once")
    func fastLaneOvertakesCampaign() async throws {
        let gate = GateTransport(passFast: true)
        let window = 8192
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: gate, options: .init(bulkWindow: window))
        let runner = Task { try await client.run() }
        let campaign = Task { try await client.send(Self.campaign(0..<20_000)) }
        #expect(await eventually(300) { gate.heldCount >= window })
        try await Task.sleep(for: .milliseconds(200))
        #expect(gate.heldCount <= window + 512 && client.ledger.snapshot.entered <= UInt64(window + 512), "\(gate.heldCount) held")
        let clock = ContinuousClock(), start = clock.now
        let fast = try await client.send(alert(99_999))
        #expect(fast.isAccepted && clock.now - start < .seconds(120), "\(clock.now - start)")
        #expect(gate.heldCount <= window + 512)
        gate.release()
        let outcomes = try await campaign.value
        #expect(outcomes.count == 20_000 && outcomes.allSatisfy(\.isAccepted))
        #expect(gate.mostHeld <= window + 512, "\(gate.mostHeld)")
        client.shutdown()
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == 20_001)
    }

    @Test("the bulk window is the transport's: none for a transport without one (the binary interface confirms in bulk), so a campaign of 10,000 enters whole; the HTTP/2 transport's is half its maxQueued")
    func windowIsTheTransports() async throws {
        let gate = GateTransport()
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: gate)
        let runner = Task { try await client.run() }
        let campaign = Task { try await client.send(Self.campaign(0..<10_000)) }
        // (Seconds alone; CI's parallel run on 2 cores has stretched tests like this one past 60 s.)
        #expect(await eventually(300) { gate.heldCount == 10_000 }, "\(gate.heldCount) held")
        gate.release()
        #expect(try await campaign.value.count == 10_000)
        client.shutdown()
        try await runner.value
        var c = HTTP2TransportConfiguration(host: "localhost", port: 443, tls: .client(identity: nil, trust: .system))
        c.maxQueued = 1000
        #expect(try HTTP2Transport(configuration: c).bulkWindow == 500)
    }

    @Test("room by lane: with 16 undecided allowed, a campaign's callers fill 15 and wait; a fast-lane caller still finds room at once")
    func roomByLane() async throws {
        let gate = GateTransport(passFast: true)
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: gate, options: .init(maxUndecided: 16))
        let runner = Task { try await client.run() }
        let campaign = Task {
            try await withThrowingDiscardingTaskGroup { group in
                for r in Self.campaign(0..<40) {
                    group.addTask {
                        let accepted = try await client.send(r).isAccepted
                        #expect(accepted)
                    }
                }
            }
        }
        #expect(await eventually { gate.heldCount == 15 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(gate.heldCount == 15 && client.ledger.snapshot.entered == 15, "one place of 16 kept for the fast lane")
        #expect(try await client.send(alert(1_000)).isAccepted)
        gate.release()
        try await campaign.value
        client.shutdown()
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == 41)
    }

    @Test("cancellation: a caller waiting for room withdraws (nothing entered); a caller whose notification was taken gets CancellationError at once, and the notification still ends in one recorded outcome")
    func cancellation() async throws {
        let (client, gate) = try Self.gated(maxUndecided: 1)
        let recorder = RecordingObserver()
        client.ledger.addObserver(recorder)
        let runner = Task { try await client.run() }
        let taken = Task { try await client.send(alert(1)) }
        #expect(await eventually { gate.heldCount == 1 })
        let waiting = Task { try await client.send(alert(2)) }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        taken.cancel()
        await #expect(throws: CancellationError.self) { try await taken.value }
        #expect(client.ledger.snapshot.entered == 1, "the withdrawn one never entered")
        gate.release()
        #expect(await eventually { recorder.records.withLock { $0.count } == 1 })
        #expect(recorder.records.withLock { $0.map(\.id) } == [1], "the taken one ended once, recorded, though its caller left")
        client.shutdown()
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.accepted == 1)
    }

    @Test("shutdown with callers waiting: callers waiting for room get shutDown, callers whose notifications were taken get their outcomes as the pipeline drains, later sends get shutDown, run() returns")
    func shutdownDrains() async throws {
        let (client, gate) = try Self.gated(maxUndecided: 5)
        let runner = Task { try await client.run() }
        let taken = (0..<5).map { i in Task { try await client.send(alert(i)) } }
        #expect(await eventually { gate.heldCount == 5 })
        let waiting = (5..<8).map { i in Task { try await client.send(alert(i)) } }
        try await Task.sleep(for: .milliseconds(50))
        client.shutdown()
        for w in waiting { await #expect(throws: HeraldClientError.shutDown) { try await w.value } }
        await #expect(throws: HeraldClientError.shutDown) { try await client.send(alert(9)) }
        gate.release()
        for t in taken { #expect(try await t.value.isAccepted) }
        try await runner.value
        #expect(client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == 5)
    }

    @Test("in a ServiceGroup: the group's graceful shutdown drains what was taken; run() twice is refused")
    func serviceGroup() async throws {
        let (client, gate) = try Self.gated()
        let group = ServiceGroup(configuration: .init(services: [client], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        let sends = (0..<50).map { i in Task { try await client.send(alert(i)) } }
        #expect(await eventually { gate.heldCount == 50 })
        await group.triggerGracefulShutdown()
        gate.release()
        for s in sends { #expect(try await s.value.isAccepted) }
        try await running.value
        await #expect(throws: HeraldClientError.alreadyRunning) { try await client.run() }
    }

    @Test("run() cancelled before the pipeline took what was sent: those end failed 'abandoned', each caller resumed with it")
    func cancelledRun() async throws {
        let (client, gate) = try Self.gated(maxUndecided: 100_000)
        // The pipeline is never started: what is sent waits in the intake.
        let sends = (0..<20).map { i in Task { try await client.send(alert(i)) } }
        try await Task.sleep(for: .milliseconds(50))
        let runner = Task { try await client.run() }
        runner.cancel()
        try? await runner.value
        gate.release()
        var abandoned = 0, accepted = 0
        for s in sends {
            let o = try await s.value
            if o.reasonCode == .abandoned { abandoned += 1 } else if o.isAccepted { accepted += 1 }
        }
        #expect(abandoned + accepted == 20 && client.ledger.snapshot.isBalanced && client.ledger.snapshot.entered == 20)
    }
}

final class RecordingObserver: OutcomeObserver {
    let records = Mutex<[OutcomeRecord]>([])
    func observe(_ batch: [OutcomeRecord]) { records.withLock { $0 += batch } }
}

final class Count: Sendable {
    let atomic = Atomic<Int>(0)
    func add() { atomic.add(1, ordering: .relaxed) }
    var value: Int { atomic.load(ordering: .relaxed) }
}
