@testable import HeraldCore
import Synchronization
import Testing

@Suite("A notification's trace: the traceparent it carries, its request-line keys, and the pipeline's notes of its way (issue 31)")
struct NotificationTraceTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("W3C Trace Context's traceparent: valid values taken, the rest refused", arguments: [
        (parent, true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true),
        // A later version may add fields after a dash; version 00 may not.
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),
        ("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("", false),
    ])
    func validation(text: String, valid: Bool) {
        #expect((NotificationTrace(traceparent: text) != nil) == valid, "\(text)")
    }

    @Test("its fields: trace id, parent id, the sampled flag")
    func fields() throws {
        let t = try #require(NotificationTrace(traceparent: Self.parent))
        #expect(t.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && t.parentID == "00f067aa0ba902b7" && t.isSampled)
        #expect(NotificationTrace(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02")?.isSampled == false)
    }

    @Test("request lines: traceparent and enqueued-at in either order, the direct path and the tree alike; bad values named")
    func decoding() throws {
        let decoder = RequestDecoder()
        let token = String(repeating: "ab", count: 32)
        for line in [
            #"{"token":"\#(token)","alert":"hi","traceparent":"\#(Self.parent)","enqueued-at":1795850496374}"#,
            #"{"enqueued-at":1795850496374,"traceparent":"\#(Self.parent)","token":"\#(token)","alert":"hi"}"#,
        ] {
            let direct = try #require(line.utf8CString.withUnsafeBytes { decoder.decodeDirect(UnsafeRawBufferPointer(rebasing: $0.dropLast())) })
            let tree = try line.utf8CString.withUnsafeBytes { try decoder.decodeTree(line: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
            #expect(direct == tree)
            #expect(direct.trace?.traceparent == Self.parent && direct.trace?.enqueuedAt == 1_795_850_496_374)
        }
        func error(_ line: String) -> String? {
            do {
                _ = try line.utf8CString.withUnsafeBytes { try decoder.decode(line: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
                return nil
            } catch let e as RequestError { return e.message } catch { return "\(error)" }
        }
        #expect(error(#"{"token":"\#(token)","traceparent":"00-abc"}"#)?.contains("\"traceparent\" must be a W3C trace context") == true)
        #expect(error(#"{"token":"\#(token)","enqueued-at":12}"#)?.contains("needs a \"traceparent\"") == true)
        #expect(error(#"{"token":"\#(token)","traceparent":"\#(Self.parent)","enqueued-at":"soon"}"#)?.contains("epoch milliseconds") == true)
        // With a raw payload, too.
        #expect(error(#"{"token":"\#(token)","payload":{"aps":{"alert":"x"}},"traceparent":"\#(Self.parent)"}"#) == nil)
    }

    @Test("an intake's texts: the keys written first, byte for byte, and only those the request lacks")
    func written() throws {
        var t = try #require(NotificationTrace(traceparent: Self.parent))
        #expect(t.written(into: #"{"token":"ab"}"#) == #"{"traceparent":"\#(Self.parent)","token":"ab"}"#)
        t.enqueuedAt = 5
        #expect(t.written(into: #" { "token":"ab"}"#) == #" {"traceparent":"\#(Self.parent)","enqueued-at":5, "token":"ab"}"#)
        #expect(t.written(into: "{ }") == #"{"traceparent":"\#(Self.parent)","enqueued-at":5 }"#)
        #expect(t.written(into: #"{"a":1}"#, parent: false) == #"{"enqueued-at":5,"a":1}"#)
        #expect(t.written(into: #"{"a":1}"#, parent: false, queued: false) == #"{"a":1}"#)

        let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let plain = request(1)
        var owned = request(2)
        owned.trace = NotificationTrace(traceparent: own)
        var batch = IntakeBatch(requests: [plain, owned], texts: [#"{"id":1}"#, #"{"id":2,"traceparent":"\#(own)"}"#])
        batch.join(t, enqueuedAt: 9)
        #expect(batch.requests[0].trace?.traceparent == Self.parent && batch.requests[0].trace?.enqueuedAt == 5, "the intake's trace, with its own time")
        #expect(batch.requests[1].trace?.traceparent == own && batch.requests[1].trace?.enqueuedAt == 9)
        #expect(batch.texts == [#"{"traceparent":"\#(Self.parent)","enqueued-at":5,"id":1}"#, #"{"enqueued-at":9,"id":2,"traceparent":"\#(own)"}"#])
    }

    @Test("the trace book: each traced request's entry, its stages' times and the transport's taking it, handed over once with its outcome; untraced ones are not noted, nor a stage that makes no span; bounded")
    func book() async throws {
        let book = TraceBook(capacity: 150)
        let ledger = OutcomeLedger(traceBook: book)
        let box = TakenBox()
        ledger.addObserver(BoxTaker(book, box))
        let trace = try #require(NotificationTrace(traceparent: Self.parent))
        let requests = (0..<1000).map { k -> NotificationRequest in
            var r = request(UInt32(k))
            if k % 5 == 0 { r.trace = trace }
            return r
        }
        let before = Duration.sinceEpochNanoseconds
        let pipeline = Pipeline(
            source: InMemorySource(requests),
            stages: [NamedStage("a", PipelineTests.Touch()), NamedStage("quiet", PipelineTests.Touch(), traced: false), NamedStage("b", PipelineTests.Touch())],
            transport: RecordingTransport(), ledger: ledger, options: PipelineOptions(batchSize: 50, bufferedBatches: 1, threads: 1))
        let snapshot = try await pipeline.run()
        #expect(snapshot.accepted == 1000)
        let got = box.all
        // 200 traced, at most 150 in flight: some may not have been noted; none twice, none untraced.
        #expect(got.count + book.overflowed == 200 && book.inFlight == 0)
        #expect(Set(got.map(\.0.sequence)).count == got.count && got.allSatisfy { $0.0.id! % 5 == 0 })
        for (_, p) in got {
            #expect(p.steps.map(\.stage) == ["a", "b"] && p.trace == trace && p.entered >= before, "a stage that is not traced makes no step")
            #expect(p.steps.allSatisfy { $0.start >= p.entered && $0.end >= $0.start } && (p.handed ?? 0) >= p.steps.last!.end)
        }
    }

    @Test("the trace book's routes: requests that part (one decided early, a batch split, a batch with an untraced request and another route's) each keep exactly the steps of the batches they were in")
    func routesPart() throws {
        let book = TraceBook()
        let trace = try #require(NotificationTrace(traceparent: Self.parent))
        func envelope(_ q: UInt64, traced: Bool = true) -> Envelope {
            var r = request(UInt32(q))
            if traced { r.trace = trace }
            return Envelope(sequence: q, request: r)
        }
        let all = (0..<4).map { envelope(UInt64($0)) }
        book.entered(all)
        book.entered([envelope(10), envelope(11, traced: false)])
        book.ran("a", all, from: 1, to: 2)
        // Request 0 is decided by stage a; the rest go on.
        let early = book.take([all[0].record(.accepted)])
        book.ran("b", Array(all[1...]), from: 3, to: 4)
        // The batch split: 1 alone, 2 and 3 together with the other batch's 10 and an untraced 11.
        book.ran("c", [all[1]], from: 5, to: 6)
        book.ran("c", [all[2], all[3], envelope(10), envelope(11, traced: false)], from: 7, to: 8)
        book.handed([all[1], all[2], all[3], envelope(10)])
        let rest = book.take([1, 2, 3, 10, 11].map { envelope($0).record(.accepted) })
        #expect(book.inFlight == 0 && early.count == 1 && rest.count == 4, "the untraced request was never noted")
        #expect(book.routesHeld == 0, "no route held once every request was taken")
        func steps(_ p: TraceBook.Passage) -> [String] { p.steps.map { "\($0.stage)\($0.start)" } }
        #expect(steps(early[0].passage) == ["a1"] && early[0].passage.handed == nil)
        let by = Dictionary(uniqueKeysWithValues: rest.map { ($0.record.sequence, $0.passage) })
        #expect(by[1].map(steps) == ["a1", "b3", "c5"])
        #expect(by[2].map(steps) == ["a1", "b3", "c7"] && by[3].map(steps) == ["a1", "b3", "c7"])
        #expect(by[10].map(steps) == ["c7"], "the other batch's request: only what it was in")
        #expect([1, 2, 3, 10].allSatisfy { by[$0]?.handed != nil })
    }

    @Test("the trace book over 200 seeds: batches noted, split, mixed and decided in random orders (some not in sequence order, some numbered far apart); each passage holds exactly the steps of the batches it was in, in order, and once all are taken the book holds no route", arguments: 0..<200)
    func routesAtRandom(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let book = TraceBook()
        let trace = try #require(NotificationTrace(traceparent: Self.parent))
        func envelope(_ q: UInt64) -> Envelope {
            var r = request(UInt32(q))
            if q % 7 != 3 { r.trace = trace }
            return Envelope(sequence: q, request: r)
        }
        // The model: each traced request's steps while it is in the book.
        var expected: [UInt64: [String]] = [:]
        var live: [UInt64] = []
        var next: UInt64 = 0
        var taken: [UInt64: TraceBook.Passage] = [:]
        for step in 0..<60 {
            switch random.next() % 4 {
            case 0:
                // A batch enters: now and then numbered far from the last (another block of the
                // book's), or not in sequence order.
                if random.next() % 5 == 0 { next += 50 + random.next() % 200 }
                var batch = (0..<(1 + random.next() % 6)).map { _ -> Envelope in
                    defer { next += 1 }
                    return envelope(next)
                }
                if random.next() % 4 == 0 { batch.shuffle(using: &random) }
                book.entered(batch)
                for e in batch where e.request.trace != nil {
                    expected[e.sequence] = []
                    live.append(e.sequence)
                }
            case 1, 2:
                // A stage (or the transport) works on a random choice of what is in flight, untraced ones mixed in.
                guard !live.isEmpty else { continue }
                var chosen = live.filter { _ in random.next() % 2 == 0 }.sorted()
                if random.next() % 4 == 0 { chosen.shuffle(using: &random) }
                let batch = (chosen + [next + 1_000]).map(envelope)
                book.ran("s\(step)", batch, from: Int64(step), to: Int64(step))
                for q in chosen { expected[q]?.append("s\(step)") }
            default:
                // Some outcomes come.
                let done = live.filter { _ in random.next() % 3 == 0 }
                for (record, passage) in book.take(done.map { envelope($0).record(.accepted) }) { taken[record.sequence] = passage }
                live.removeAll { done.contains($0) }
            }
        }
        for (record, passage) in book.take(live.map { envelope($0).record(.accepted) }) { taken[record.sequence] = passage }
        #expect(book.inFlight == 0 && book.routesHeld == 0, "seed \(seed): every route let go")
        #expect(Set(taken.keys) == Set(expected.keys), "seed \(seed): each traced request taken once")
        for (q, passage) in taken {
            #expect(passage.steps.map(\.stage) == expected[q], "seed \(seed), request \(q)")
        }
    }
}

/// What ``BoxTaker`` took.
final class TakenBox: Sendable {
    let taken = Mutex<[(OutcomeRecord, TraceBook.Passage)]>([])
    var all: [(OutcomeRecord, TraceBook.Passage)] { taken.withLock { $0 } }
}

/// An observer taking each outcome's passage from the book, as a tracer's would.
final class BoxTaker: OutcomeObserver {
    let book: TraceBook, box: TakenBox
    init(_ book: TraceBook, _ box: TakenBox) {
        self.book = book
        self.box = box
    }
    func observe(_ records: [OutcomeRecord]) {
        let got = book.take(records)
        box.taken.withLock { $0 += got.map { ($0.record, $0.passage) } }
    }
}
