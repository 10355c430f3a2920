@testable import HeraldCore
import MetricsTestKit
import PropertyBased
import Synchronization
import Testing

/// Rows of `ConcurrentStage`s (issue 29): several batches at once through the row, the batches
/// on in the order they came, every outcome recorded once.
@Suite("Concurrent stage rows")
struct ConcurrentRowTests {
    struct Touch: EnvelopeStage, ConcurrentStage {
        func apply(_ e: inout Envelope) throws(StageFailure) { e.request.aps.badge = (e.request.aps.badge ?? 0) + 1 }
    }

    struct DropMultiples: EnvelopeStage, ConcurrentStage {
        let n: UInt32
        func apply(_ e: inout Envelope) throws(StageFailure) {
            if e.request.id! % n == 0 { throw StageFailure("multiple of \(n)") }
        }
    }

    /// Counts how many batches it works on at once (it waits a little on each, as a test may).
    final class Overlap: ConcurrentStage {
        let now = Atomic<Int>(0), most = Atomic<Int>(0)
        func process(_ batch: inout [Envelope]) async throws {
            let n = now.add(1, ordering: .relaxed).newValue
            var seen = most.load(ordering: .relaxed)
            while n > seen, !most.compareExchange(expected: seen, desired: n, ordering: .relaxed).exchanged { seen = most.load(ordering: .relaxed) }
            try? await Task.sleep(for: .milliseconds(2))
            now.subtract(1, ordering: .relaxed)
        }
    }

    /// A transport that checks each envelope's badge (the touches it had) and records ids.
    final class Checking: Transport {
        let ids = Mutex<[UInt32]>([]), badges = Mutex<Set<Int>>([])
        func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
            ids.withLock { $0.append(contentsOf: batch.map { $0.request.id! }) }
            badges.withLock { for e in batch { $0.insert(e.request.aps.badge ?? 0) } }
            outcomes.record(batch.map { $0.record(.accepted) })
        }
        func finish(outcomes: OutcomeLedger) async {}
    }

    @Test("source order at the transport, drops recorded once and in batch order, every stage applied; threads and batch sizes", arguments: [1, 4, 8], [1, 7, 256])
    func ordering(threads: Int, batchSize: Int) async throws {
        let transport = Checking()
        let collector = OutcomeCollector()
        // Two rows of concurrent stages split by an ordinary stage.
        let stages = [
            NamedStage("t1", Touch()), NamedStage("drop3", DropMultiples(n: 3)), NamedStage("serial", PipelineTests.Touch()),
            NamedStage("t2", Touch()), NamedStage("drop5", DropMultiples(n: 5)),
        ]
        let pipeline = Pipeline(
            source: InMemorySource((0..<5000).map { request(UInt32($0)) }), stages: stages, transport: transport,
            ledger: OutcomeLedger(observers: [collector]), options: PipelineOptions(batchSize: batchSize, bufferedBatches: 2, threads: threads))
        let s = try await pipeline.run()
        let kept: [UInt32] = (0..<5000).map { UInt32($0) }.filter { $0 % 3 != 0 && $0 % 5 != 0 }
        #expect(transport.ids.withLock { $0 } == kept)
        #expect(transport.badges.withLock { $0 } == [3])
        #expect(s.isBalanced && s.accepted == UInt64(kept.count) && s.dropped == UInt64(5000 - kept.count))
        let dropped = collector.records.filter { $0.outcome.kind == .dropped }.map { $0.id! }
        #expect(Set(dropped).count == dropped.count && dropped.count == 5000 - kept.count)
        // Each row records its batches' drops in batch order.
        let byThree = dropped.filter { $0 % 3 == 0 }
        #expect(byThree == byThree.sorted())
    }

    @Test("stages group into rows: consecutive concurrent stages share one with several threads; one thread, one row a stage")
    func rows() {
        let c = NamedStage("c", Touch()), s = NamedStage("s", PipelineTests.Touch())
        #expect(Pipeline.rows([c, c, s, c, s, s, c, c, c], threads: 4) == [0..<2, 2..<3, 3..<4, 4..<5, 5..<6, 6..<9])
        #expect(Pipeline.rows([c, c, s], threads: 1) == [0..<1, 1..<2, 2..<3])
        #expect(Pipeline.rows([], threads: 4) == [])
    }

    @Test("batches overlap in a row, at most twice the threads at once")
    func overlap() async throws {
        let stage = Overlap()
        let pipeline = Pipeline(
            source: InMemorySource((0..<4000).map { request(UInt32($0)) }), stages: [NamedStage("overlap", stage)],
            transport: RecordingTransport(), options: PipelineOptions(batchSize: 50, bufferedBatches: 4, threads: 3))
        let s = try await pipeline.run()
        #expect(s.isBalanced && s.accepted == 4000)
        let most = stage.most.load(ordering: .relaxed)
        #expect(most >= 2 && most <= 6, "\(most) batches at once")
    }

    @Test("a lone request goes through a row without waiting for another to follow it")
    func loneRequest() async throws {
        // The source sends one request, then waits for its outcome before the next: a row that
        // held a finished batch until the next one came would never finish.
        final class Waiting: OutcomeObserver {
            let done = Atomic<Int>(0)
            func observe(_ records: [OutcomeRecord]) { done.add(records.count, ordering: .relaxed) }
        }
        struct OneByOne: NotificationSource {
            let waiting: Waiting
            func produce(into sink: SourceSink) async throws {
                for i in 0..<20 {
                    await sink.emit(request(UInt32(i)))
                    await sink.flush()
                    // A hang never ends; a slow answer does. In the parallel suite on 2 cores this
                    // test's 20 answers took 67 s in all (a pool shared with every other suite), and
                    // twice one took over 10 s: the deadline is for a hang, so it is generous.
                    let deadline = ContinuousClock.now + .seconds(90)
                    while waiting.done.load(ordering: .relaxed) <= i {
                        guard ContinuousClock.now < deadline else { throw CancellationError() }
                        try await Task.sleep(for: .milliseconds(1))
                    }
                }
            }
        }
        let waiting = Waiting()
        let pipeline = Pipeline(
            source: OneByOne(waiting: waiting), stages: [NamedStage("a", Touch()), NamedStage("b", Touch())], transport: RecordingTransport(),
            ledger: OutcomeLedger(observers: [waiting]), options: PipelineOptions(threads: 4))
        let s = try await pipeline.run()
        #expect(s.isBalanced && s.accepted == 20)
    }

    @Test("metrics of a row: each stage's requests, decisions and one time per batch")
    func metrics() async throws {
        let metrics = TestMetrics()
        let pipeline = Pipeline(
            source: InMemorySource((0..<1000).map { request(UInt32($0)) }),
            stages: [NamedStage("drop3", DropMultiples(n: 3)), NamedStage("touch", Touch())],
            transport: RecordingTransport(), options: PipelineOptions(batchSize: 64, threads: 4), metrics: metrics)
        let s = try await pipeline.run()
        #expect(s.isBalanced && s.accepted == 666)
        #expect(try metrics.expectCounter("herald_stage_requests_total", [("stage", "drop3")]).totalValue == 1000)
        #expect(try metrics.expectCounter("herald_stage_decided_total", [("stage", "drop3")]).totalValue == 334)
        #expect(try metrics.expectCounter("herald_stage_requests_total", [("stage", "touch")]).totalValue == 666)
        #expect(try metrics.expectTimer("herald_stage_duration_seconds", [("stage", "touch")]).values.count == 16)
    }
}

@Suite("The ledger's outstanding sequences")
struct OutstandingSequencesTests {
    @Test("any mix of inserts and removes, dense or far apart: the same answers and count as a Set")
    func likeASet() async {
        // Each pick: an operation (insert / remove) and a sequence near the last one, far ahead, or behind.
        await propertyCheck(count: 300, input: Gen.int(in: 0...(1 << 20)).array(of: 0...400)) { picks in
            var model = Set<UInt64>(), bitmap = OutstandingSequences()
            var last: UInt64 = 1_000
            for p in picks {
                let q: UInt64
                switch p % 8 {
                case 0: q = last + UInt64(p >> 3) * 64 * 1024  // far ahead (beyond the bitmap's reach sometimes)
                case 1: q = last > UInt64(p >> 3) ? last - UInt64(p >> 3) : 0  // behind
                case 2: q = model.randomElement() ?? last  // something outstanding
                default: q = last + UInt64(p >> 3 & 7)  // dense, upwards
                }
                last = max(last, q & ((1 << 40) - 1))
                if p & 4 == 0 || p % 8 == 2 {
                    let got = bitmap.remove(q), want = model.remove(q) != nil
                    #expect(got == want, "remove \(q)")
                } else {
                    let got = bitmap.insert(q), want = model.insert(q).inserted
                    #expect(got == want, "insert \(q)")
                }
                #expect(bitmap.count == model.count)
            }
            for q in model {
                let removed = bitmap.remove(q)
                #expect(removed, "\(q)")
            }
            #expect(bitmap.count == 0)
        }
    }
}

@Suite("A source's prepared envelopes (built on other threads, numbered when emitted)")
struct PreparedEnvelopeTests {
    /// Records every batch's size and its envelopes' (sequence, line, id).
    final class Batches: Transport {
        let seen = Mutex<[[(UInt64, Int?, UInt32)]]>([])
        func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
            seen.withLock { $0.append(batch.map { ($0.sequence, $0.line, $0.request.id ?? 0) }) }
            outcomes.record(batch.map { $0.record(.accepted) })
        }
        func finish(outcomes: OutcomeLedger) async {}
    }

    /// Three requests one by one, 700 prepared (with made-up sequences), an invalid line, 10 more prepared.
    struct Mixed: NotificationSource {
        func produce(into sink: SourceSink) async throws {
            for i in 0..<3 { await sink.emit(request(UInt32(i)), line: i + 1) }
            await sink.emit(prepared: (3..<703).map { Envelope(sequence: 999, line: $0 + 1, request: request(UInt32($0))) })
            await sink.emitInvalid(line: 704, reason: "not JSON")
            await sink.emit(prepared: (704..<714).map { Envelope(sequence: 7, line: $0 + 1, request: request(UInt32($0))) })
        }
    }

    @Test("numbered in order after what was pending, in full batches as one at a time would give, an invalid line in its place")
    func numbering() async throws {
        let transport = Batches()
        let collector = OutcomeCollector()
        let s = try await Pipeline(source: Mixed(), stages: [], transport: transport, ledger: OutcomeLedger(observers: [collector]),
                                   options: PipelineOptions(batchSize: 256, threads: 1)).run()
        #expect(s.isBalanced && s.entered == 714 && s.accepted == 713 && s.dropped == 1)
        let batches = transport.seen.withLock { $0 }
        // As one request at a time would batch them: full batches, the pending 3 filled first, flushed before the invalid line.
        #expect(batches.map(\.count) == [256, 256, 191, 10])
        let all = batches.flatMap { $0 }
        #expect(all.map(\.0) == (0..<703).map(UInt64.init) + (704..<714).map(UInt64.init))
        #expect(all.allSatisfy { $0.1 == Int($0.2) + 1 && UInt64($0.2) == $0.0 })
        let drop = try #require(collector.records.first { $0.outcome.kind == .dropped })
        #expect(drop.sequence == 703 && drop.line == 704)
    }

    /// Runs as a parallel decoder hands them on: a batch's worth, a short run cut by an invalid line, more.
    struct Runs: NotificationSource {
        func produce(into sink: SourceSink) async throws {
            await sink.emit(prepared: (0..<256).map { Envelope(sequence: 0, line: $0 + 1, request: request(UInt32($0))) })
            await sink.emit(prepared: (256..<300).map { Envelope(sequence: 0, line: $0 + 1, request: request(UInt32($0))) })
            await sink.emitInvalid(line: 301, reason: "not JSON")
            await sink.emit(prepared: (301..<400).map { Envelope(sequence: 0, line: $0 + 1, request: request(UInt32($0))) })
            await sink.emit(prepared: (400..<656).map { Envelope(sequence: 0, line: $0 + 1, request: request(UInt32($0))) })
        }
    }

    @Test("a run of at most a batch with nothing pending goes on as a batch of its own (not copied into the next), numbered in order")
    func runsAsBatches() async throws {
        let transport = Batches()
        let s = try await Pipeline(source: Runs(), stages: [], transport: transport, ledger: OutcomeLedger(),
                                   options: PipelineOptions(batchSize: 256, threads: 1)).run()
        #expect(s.isBalanced && s.entered == 656 && s.accepted == 655 && s.dropped == 1)
        let batches = transport.seen.withLock { $0 }
        #expect(batches.map(\.count) == [256, 44, 99, 256])
        let all = batches.flatMap { $0 }
        #expect(all.map(\.0) == (0..<300).map(UInt64.init) + (301..<656).map(UInt64.init))
        #expect(all.allSatisfy { $0.1 == Int($0.2) + 1 && UInt64($0.2) == $0.0 })
    }
}
