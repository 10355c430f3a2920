import Foundation
import HeraldCore
@testable import HeraldKit
import HeraldTestSupport
import PropertyBased
import Testing

/// `JSONLinesSource` decoding on several threads (issue 29): the same outcomes, lines and order as
/// on one, whatever the input.
@Suite("JSON Lines decoded on several threads")
struct ParallelSourceTests {
    /// Every outcome of `text` sent through the default pipeline with `threads` decoding threads
    /// and batches of `batchSize`, in the order they were entered.
    static func outcomes(_ text: [UInt8], threads: Int, batchSize: Int) async throws -> (LedgerSnapshot, [OutcomeRecord]) {
        let path = try temporaryFile("")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(text).write(to: URL(fileURLWithPath: path))
        var configuration = HeraldConfiguration()
        configuration.pipeline.threads = threads
        configuration.pipeline.batchSize = batchSize
        let collector = OutcomeCollector()
        let snapshot = try await HeraldAssembly(configuration: configuration)
            .makePipeline(source: JSONLinesSource(path: path), ledger: OutcomeLedger(observers: [collector])).run()
        return (snapshot, collector.records.sorted { $0.sequence < $1.sequence })
    }

    /// Line kinds the generator picks from: valid, broken JSON, a bad token, an unknown key, a
    /// blank line, blanks only, a CRLF ending, a non-object.
    static func line(_ kind: Int, _ i: Int) -> String {
        let token = String(repeating: String(format: "%02x", i % 251), count: 32)
        switch kind % 8 {
        case 0: return #"{"id":\#(i),"token":"\#(token)","alert":"hello \#(i)","badge":\#(i % 9)}"#
        case 1: return #"{"id":\#(i),"token":"\#(token)","alert":"#
        case 2: return #"{"id":\#(i),"token":"zz\#(token.dropFirst(2))","alert":"x"}"#
        case 3: return #"{"id":\#(i),"token":"\#(token)","alert":"x","colour":"red"}"#
        case 4: return ""
        case 5: return "  \t "
        case 6: return #"{"id":\#(i),"token":"\#(token)","alert":{"title":"t","body":"b \#(i)"}}"# + "\r"
        default: return "[\(i)]"
        }
    }

    @Test("any mix of lines: the same records, in the same order, on 1, 3 and 8 threads")
    func sameAsOneThread() async throws {
        await propertyCheck(count: 40, input: Gen.int(in: 0...63).array(of: 0...700)) { kinds in
            var text = kinds.enumerated().map { Self.line($1, $0) }.joined(separator: "\n")
            if kinds.first.map({ $0 % 2 == 0 }) == true { text = "\u{FEFF}" + text }  // a byte-order mark on line 1
            if kinds.count % 3 != 0 { text += "\n" }  // with and without a last newline
            let batch = [1, 7, 256][kinds.count % 3]
            do {
                let (one, expected) = try await Self.outcomes(Array(text.utf8), threads: 1, batchSize: batch)
                #expect(one.isBalanced)
                for threads in [3, 8] {
                    let (s, records) = try await Self.outcomes(Array(text.utf8), threads: threads, batchSize: batch)
                    #expect(s == one, "threads \(threads)")
                    #expect(records == expected, "threads \(threads)")
                }
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test("a line over the maximum length among thousands: dropped as too long, in its place, on several threads")
    func tooLongLine() async throws {
        var lines = (0..<3000).map { Self.line(0, $0) }
        lines[1234] = #"{"id":1234,"token":"\#(goodToken)","alert":""# + String(repeating: "a", count: 1 << 20) + #""}"#
        let text = Array(lines.joined(separator: "\n").utf8)
        let (s, records) = try await Self.outcomes(text, threads: 4, batchSize: 256)
        #expect(s.isBalanced && s.entered == 3000 && s.dropped == 1)
        #expect(records.map(\.line) == Array(1...3000))
        #expect(records[1234].outcome == .dropped(OutcomeReason(.invalidRequest, "line 1235: line longer than 1048576 bytes")))
        let (one, expected) = try await Self.outcomes(text, threads: 1, batchSize: 256)
        #expect(one == s && expected == records)
    }

    @Test("threads: 0 is every core the process may use; the configuration's key is read and bounded")
    func threadsOption() throws {
        #expect(PipelineOptions().effectiveThreads >= 1)
        #expect(PipelineOptions(threads: 3).effectiveThreads == 3)
        let path = try temporaryFile(#"{"pipeline":{"threads":5}}"#, suffix: ".json")
        #expect(try HeraldConfiguration.load(path: path).pipeline.threads == 5)
        let bad = try temporaryFile(#"{"pipeline":{"threads":-1}}"#, suffix: ".json")
        #expect(throws: ConfigError.self) { try HeraldConfiguration.load(path: bad) }
    }
}

@Suite("Outcome lines written in one piece a batch")
struct OutcomeEncodingTests {
    @Test("a batch with a record longer than the room kept for it: the same bytes as record by record")
    func longRecord() throws {
        let token = try DeviceToken(hex: goodToken)
        var records = (0..<50).map { OutcomeRecord(sequence: UInt64($0), line: $0 + 1, id: UInt32($0), token: token, outcome: .accepted) }
        records[17].outcome = .dropped(OutcomeReason(.invalidRequest, "line 18: " + String(repeating: "é\"\\x", count: 900)))
        for batch in [Array(records[0..<10]), records] {
            var expected: [UInt8] = []
            for r in batch { expected += r.jsonLine + [0x0A] }
            var buffer: [UInt8] = []
            OutcomeWriter.encode(batch, lineKey: "line", into: &buffer)
            #expect(buffer == expected)
            var appended = Array("earlier\n".utf8)
            OutcomeWriter.encode(batch, lineKey: "line", into: &appended)
            #expect(appended == Array("earlier\n".utf8) + expected)
        }
    }
}
