import HeraldCore
@testable import HeraldService
import Metrics
import Testing

/// A full queue answers before the batch is parsed (a client retrying against a full queue would
/// otherwise have every retry decoded in full).
@Suite("A full in-memory queue refuses before parsing")
struct FullQueueTests {
    static let token = "aa" + String(repeating: "0", count: 62)
    static func requests(_ n: Int) -> [NotificationRequest] {
        let line = Array(#"{"token":"\#(token)","alert":"hi"}"#.utf8)
        return (0..<n).map { _ in line.withUnsafeBytes { try! RequestDecoder().decode(line: $0) } }
    }

    @Test("request lines counted as parse reads them: blank lines skipped, CRLF, a last line without a newline, an array as one, an empty body none")
    func lines() {
        #expect(RequestBatch.lines(in: Array("{\"a\":1}\n\n  \t\n{\"b\":2}\r\n{\"c\":3}".utf8)) == 3)
        #expect(RequestBatch.lines(in: Array(" \n[{\"a\":1},\n{\"b\":2}]\n".utf8)) == 1)
        #expect(RequestBatch.lines(in: Array("not json\n".utf8)) == 1, "a bad line counts: it is told so once parsed")
        #expect(RequestBatch.lines(in: []) == 0 && RequestBatch.lines(in: Array(" \n\n".utf8)) == 0)
        // The parse agrees on what a line is.
        let body = Array("{\"token\":\"\(Self.token)\",\"alert\":\"a\"}\n\n \t\n{\"token\":\"\(Self.token)\",\"alert\":\"b\"}\r\n".utf8)
        #expect(RequestBatch.lines(in: body) == RequestBatch.parse(body).requests.count)
    }

    @Test("the most lines a body can hold bounds the count: one-byte lines a byte apart, an array as one")
    func mostLines() {
        for text in ["1\n2\n3", "1\n2\n3\n", "1\r\n2", "", "\n\n", "{\"a\":1}\n\n  \t\n{\"b\":2}", " [1,\n2]"] {
            let body = Array(text.utf8)
            #expect(RequestBatch.lines(in: body) <= RequestBatch.mostLines(in: body), "\(text.debugDescription)")
        }
        #expect(RequestBatch.mostLines(in: Array("1\n2\n3".utf8)) == 3, "tight for one-byte lines")
    }

    @Test("room for the lines: parsed as before; no room: full at once; more lines than the queue can ever hold: parsed (413 names its count)")
    func refusal() async throws {
        var configuration = ServiceConfiguration()
        configuration.queueCapacity = 5
        let intake = MemoryIntake(configuration: configuration, outcomes: OutcomeIndex(capacity: 10, metrics: NOOPMetricsHandler.instance))
        // `most` within the room: the lines are not counted.
        #expect(intake.refusal(beforeParsing: 5, lines: { Issue.record("counted with room for any count"); return 5 }) == nil)
        #expect(intake.refusal(beforeParsing: 6, lines: { 6 }) == nil)
        guard case .accepted(let ids, _) = await intake.submit(IntakeBatch(requests: Self.requests(3)), key: nil) else {
            Issue.record("three requests into an empty queue of five were not taken")
            return
        }
        #expect(ids.count == 3)
        #expect(intake.refusal(beforeParsing: 2, lines: { 2 }) == nil, "two more fit")
        #expect(intake.refusal(beforeParsing: 9, lines: { 2 }) == nil, "a body that could hold nine, counted: two fit")
        #expect(intake.refusal(beforeParsing: 3, lines: { 3 }) == .full, "three more do not: refused before parsing")
        #expect(intake.refusal(beforeParsing: 6, lines: { 6 }) == nil, "never fits: parsed, and told so with its count")
        // What parsing would have said for the same batch: full too.
        guard case .refused(.full) = await intake.submit(IntakeBatch(requests: Self.requests(3)), key: nil) else {
            Issue.record("the parsed batch was not refused as full")
            return
        }
    }
}
