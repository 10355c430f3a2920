import HeraldCore
import Synchronization
import Testing

@Suite("Pipeline runtime")
struct PipelineTests {
    struct Touch: EnvelopeStage {
        func apply(_ e: inout Envelope) throws(StageFailure) { e.request.aps.badge = (e.request.aps.badge ?? 0) + 1 }
    }

    /// Drops every request whose id is a multiple of `n`.
    struct DropMultiples: EnvelopeStage {
        let n: UInt32
        func apply(_ e: inout Envelope) throws(StageFailure) {
            if e.request.id! % n == 0 { throw StageFailure("multiple of \(n)") }
        }
    }

    @Test("requests reach the transport in source order, across batch sizes", arguments: [1, 7, 256])
    func ordering(batchSize: Int) async throws {
        let requests = (0..<5000).map { request(UInt32($0)) }
        let transport = RecordingTransport()
        let pipeline = Pipeline(
            source: InMemorySource(requests),
            stages: [NamedStage("a", Touch()), NamedStage("b", Touch()), NamedStage("c", Touch())],
            transport: transport, options: PipelineOptions(batchSize: batchSize, bufferedBatches: 2))
        let snapshot = try await pipeline.run()
        let expected: [UInt32] = (0..<5000).map { UInt32($0) }
        #expect(transport.ids == expected)
        #expect(snapshot.accepted == 5000)
        #expect(snapshot.isBalanced)
        let finished = transport.finished.load(ordering: .relaxed)
        #expect(finished)
    }

    @Test("decided envelopes leave the batch and are counted; the rest keep their order")
    func dropsAreRecorded() async throws {
        let transport = RecordingTransport()
        let pipeline = Pipeline(
            source: InMemorySource((0..<1000).map { request(UInt32($0)) }),
            stages: [NamedStage("drop3", DropMultiples(n: 3))], transport: transport,
            options: PipelineOptions(batchSize: 64))
        let s = try await pipeline.run()
        #expect(s.dropped == 334)
        #expect(s.accepted == 666)
        let expected: [UInt32] = (0..<1000).map { UInt32($0) }.filter { $0 % 3 != 0 }
        #expect(transport.ids == expected)
        #expect(s.isBalanced)
    }

    @Test("a stalled transport stops the source: memory stays bounded")
    func backpressure() async throws {
        let transport = GatedTransport()
        let source = EndlessSource()
        let batchSize = 32, buffered = 2, stages = 3
        let pipeline = Pipeline(
            source: source, stages: (0..<stages).map { NamedStage("s\($0)", Touch()) }, transport: transport,
            options: PipelineOptions(batchSize: batchSize, bufferedBatches: buffered))
        let run = Task { try await pipeline.run() }
        // Wait until the source stops making progress (it is blocked by backpressure), however loaded the
        // machine: no change over three whole seconds (thirty samples), since a busy machine (a parallel
        // test run beside builds) can pause a task for more than a second.
        var last = -1
        var still = 0
        let deadline = ContinuousClock.now + .seconds(90)
        while ContinuousClock.now < deadline && still < 30 {
            try await Task.sleep(for: .milliseconds(100))
            let now = source.emitted.count
            still = now == last && now > 0 ? still + 1 : 0
            last = now
        }
        let first = source.emitted.count
        try await Task.sleep(for: .milliseconds(500))
        let second = source.emitted.count
        // Channels: stages+1 of `buffered` batches, plus one batch held by each stage and the transport, plus the sink's partial batch.
        let bound = ((stages + 1) * buffered + stages + 1 + 1 + 1) * batchSize
        #expect(second == first, "the source kept producing while the transport was stalled")
        #expect(second <= bound, "\(second) requests in flight, more than the bound \(bound)")
        #expect(second > 0)
        pipeline.shutdown()
        await transport.gate.open()
        let snapshot = try await run.value
        #expect(snapshot.isBalanced)
        #expect(snapshot.accepted == UInt64(source.emitted.count))
    }

    @Test("cancellation stops the source and drains everything in flight; every request gets one outcome")
    func cancellationDrains() async throws {
        let transport = GatedTransport()
        let source = EndlessSource()
        let ledger = OutcomeLedger()
        let pipeline = Pipeline(
            source: source, stages: [NamedStage("a", Touch()), NamedStage("drop", DropMultiples(n: 5))],
            transport: transport, ledger: ledger, options: PipelineOptions(batchSize: 16, bufferedBatches: 2))
        let run = Task { try await pipeline.run() }
        #expect(await eventually { source.emitted.count > 100 })
        run.cancel()
        // In-flight work is still held by the stalled transport; release it and the pipeline must drain.
        try await Task.sleep(for: .milliseconds(50))
        await transport.gate.open()
        let snapshot = try await run.value
        #expect(snapshot.entered == UInt64(source.emitted.count))
        #expect(snapshot.isBalanced, "\(snapshot)")
        #expect(snapshot.accepted + snapshot.dropped == snapshot.entered)
        #expect(snapshot.dropped > 0)
    }

    @Test("a stage that throws fails its batch, not the run")
    func throwingStage() async throws {
        struct Boom: PipelineStage {
            struct E: Error {}
            func process(_ batch: inout [Envelope]) async throws {
                if batch.contains(where: { $0.request.id == 10 }) { throw E() }
            }
        }
        let pipeline = Pipeline(
            source: InMemorySource((0..<100).map { request(UInt32($0)) }), stages: [NamedStage("boom", Boom())],
            transport: RecordingTransport(), options: PipelineOptions(batchSize: 10))
        let s = try await pipeline.run()
        #expect(s.failed == 10)
        #expect(s.accepted == 90)
        #expect(s.isBalanced)
    }

    @Test("a transport that throws fails the batch it refused")
    func throwingTransport() async throws {
        final class Refuse: Transport {
            struct E: Error {}
            func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws { throw E() }
            func finish(outcomes: OutcomeLedger) async {}
        }
        let s = try await Pipeline(source: InMemorySource((0..<50).map { request(UInt32($0)) }), stages: [], transport: Refuse()).run()
        #expect(s.failed == 50)
        #expect(s.isBalanced)
    }

    @Test("a transport that loses a request unbalances the ledger, and run() says so")
    func lostRequestIsCaught() async throws {
        final class Lossy: Transport {
            func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
                outcomes.record(batch.dropFirst().map { $0.record(.accepted) })
            }
            func finish(outcomes: OutcomeLedger) async {}
        }
        await #expect(throws: LedgerImbalance.self) {
            try await Pipeline(source: InMemorySource((0..<10).map { request(UInt32($0)) }), stages: [], transport: Lossy()).run()
        }
    }

    @Test("a request recorded twice is a ledger violation")
    func doubleRecordIsCaught() async throws {
        final class Twice: Transport {
            func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
                outcomes.record(batch.map { $0.record(.accepted) })
                outcomes.record([batch[0].record(.accepted)])
            }
            func finish(outcomes: OutcomeLedger) async {}
        }
        let ledger = OutcomeLedger()
        await #expect(throws: LedgerImbalance.self) {
            try await Pipeline(source: InMemorySource([request(1)]), stages: [], transport: Twice(), ledger: ledger).run()
        }
        #expect(!ledger.snapshot.violations.isEmpty)
    }

    @Test("a source that fails mid-way: what it emitted drains, then run() reports the failure")
    func sourceFailure() async throws {
        struct Failing: NotificationSource {
            struct E: Error {}
            func produce(into sink: SourceSink) async throws {
                for i in 0..<20 { await sink.emit(request(UInt32(i))) }
                throw E()
            }
        }
        let ledger = OutcomeLedger()
        await #expect(throws: PipelineError.self) {
            try await Pipeline(source: Failing(), stages: [], transport: RecordingTransport(), ledger: ledger).run()
        }
        #expect(ledger.snapshot.accepted == 20)
        #expect(ledger.snapshot.isBalanced)
    }

    @Test("invalid input emitted by a source ends as dropped with its line")
    func invalidInput() async throws {
        struct Mixed: NotificationSource {
            func produce(into sink: SourceSink) async throws {
                await sink.emit(request(1), line: 1)
                await sink.emitInvalid(line: 2, reason: "bad")
                await sink.emit(request(3), line: 3)
            }
        }
        let c = OutcomeCollector()
        let s = try await Pipeline(source: Mixed(), stages: [], transport: RecordingTransport(), ledger: OutcomeLedger(observers: [c])).run()
        #expect(s.dropped == 1 && s.accepted == 2)
        let all: [OutcomeRecord] = c.records
        let dropped = all.first { $0.outcome.kind == Outcome.Kind.dropped }
        #expect(dropped?.line == 2)
        #expect(dropped?.outcome == .dropped(OutcomeReason(.invalidRequest, "line 2: bad")))
    }

    @Test("suppression stage and feedback observer close the loop on status 8")
    func feedbackLoop() async throws {
        let store = InMemoryTokenStore()
        store.unregistered(token(1), at: 100)
        store.unregistered(token(2), at: 100)
        store.registered(token(2), at: 200)  // re-registered after the feedback: not dead
        let s = try await Pipeline(
            source: InMemorySource([request(1), request(2), request(3)]),
            stages: [NamedStage("ingest", SuppressionStage(store: store))], transport: RecordingTransport()
        ).run()
        #expect(s.suppressed == 1)
        #expect(s.accepted == 2)

        let observer = TokenStoreFeedbackObserver(store: store, clock: { 300 })
        observer.observe([OutcomeRecord(sequence: 0, line: nil, id: 3, token: token(3), outcome: .rejected(.invalidToken))])
        #expect(store.isSuppressed(token(3)))
        #expect(!store.isSuppressed(token(4)))
    }
}
