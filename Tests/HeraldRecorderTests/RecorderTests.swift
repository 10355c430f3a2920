import Foundation
import HeraldCore
import HeraldJSON
import HeraldRecorder
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

func tempDirectory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("herald-rec-\(UUID().uuidString)").path
}

/// Runs a command and returns its standard output and exit status.
func run(_ tool: String, _ args: [String]) throws -> (Data, Int32) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = [tool] + args
    p.standardError = FileHandle.nullDevice
    let pipe = try startPiping(\.standardOutput, of: p)
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (data, p.terminationStatus)
}

func envelope(_ i: Int) -> Envelope {
    var aps = APS()
    aps.alert = Alert(body: "message \(i) — ünïcødé \"quoted\"")
    var r = NotificationRequest(token: DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0 &* 7) }), aps: aps, id: UInt32(i))
    r.topic = "com.example.app"
    r.expiry = 1_700_000_000
    r.priority = .immediately
    var e = Envelope(sequence: UInt64(i), request: r)
    e.payload = Array(#"{"aps":{"alert":"message \#(i)"},"n":\#(i)}"#.utf8)
    e.frame = Frame(bytes: [2, 0, 0, 0, 1, UInt8(i & 0xFF)], identifierOffset: nil)
    return e
}

/// Records `count` envelopes in batches of `batch` into a fresh directory.
func record(_ count: Int, batch: Int = 250, options: RecorderOptions = RecorderOptions()) async throws -> (String, RecorderTransport) {
    let dir = tempDirectory()
    let transport = try RecorderTransport(directory: dir, options: options)
    let ledger = OutcomeLedger()
    ledger.enter((0..<UInt64(count)), count: count)
    for start in stride(from: 0, to: count, by: batch) {
        try await transport.send((start..<min(count, start + batch)).map(envelope), outcomes: ledger)
    }
    await transport.finish(outcomes: ledger)
    #expect(ledger.snapshot.accepted == UInt64(count) && ledger.snapshot.isBalanced)
    return (dir, transport)
}

func readAll(_ paths: [String]) throws -> (ids: [Int], problems: [LogProblem]) {
    let reader = try LogReader(paths: paths)
    var ids: [Int] = []
    while let r = reader.next() { ids.append(r.object["id"]?.numberValue?.intValue ?? -1) }
    return (ids, reader.problems)
}

func segments(_ dir: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".jsonl.gz") }.sorted().map { dir + "/" + $0 }
}

@Suite("Recorder: segmented gzip logs, read back through damage")
struct RecorderTests {
    @Test("segments rotate by size, names sort in time order, zcat and gzip -t read each, the reader reads every record in order, each record is a request again")
    func roundTrip() async throws {
        var options = RecorderOptions()
        options.maxSegmentBytes = 40_000
        let (dir, transport) = try await record(10_000, options: options)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let files = try segments(dir)
        #expect(files.count > 3 && files == transport.statistics.segments, "rotated into \(files.count) segments, in the order made")
        var lines = 0
        for f in files {
            #expect(try run("gzip", ["-t", f]).1 == 0, "gzip -t \(f)")
            let (data, status) = try run("zcat", [f])
            #expect(status == 0)
            lines += String(decoding: data, as: UTF8.self).split(separator: "\n").count
            let mode = try FileManager.default.attributesOfItem(atPath: f)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
        #expect(lines == 10_000)
        let (ids, problems) = try readAll([dir])
        #expect(problems.isEmpty && ids == Array(0..<10_000))

        // A record minus the recorder's keys is the request again, in the raw form.
        let reader = try LogReader(paths: [dir])
        let first = try #require(reader.next()).object
        #expect(first.keys.prefix(3) == ["time", "seq", "id"])
        let request = JSONObject(first.entries.filter { !RecordingSource.recorderKeys.contains($0.key) }.map { ($0.key, $0.value) })
        let decoded = try RequestDecoder().decode(.object(request))
        #expect(decoded.token == envelope(0).request.token && decoded.topic == "com.example.app" && decoded.expiry == 1_700_000_000)
        #expect(decoded.rawPayload == .object(JSONObject([("aps", .object(JSONObject([("alert", .string("message 0"))]))), ("n", .number(JSONNumber(0)))])))
        let stats = transport.statistics
        #expect(stats.bytesIn > 5 * stats.bytesOut, "compressed \(stats.bytesOut) of \(stats.bytesIn) bytes")
    }

    @Test("segments rotate by age too")
    func rotatesByAge() async throws {
        var options = RecorderOptions()
        options.maxSegmentAge = .milliseconds(1)
        let dir = tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let transport = try RecorderTransport(directory: dir, options: options)
        let ledger = OutcomeLedger(tracksIdentity: false)
        for k in 0..<3 {
            try await transport.send((k * 10..<k * 10 + 10).map(envelope), outcomes: ledger)
            try await Task.sleep(for: .milliseconds(5))
        }
        await transport.finish(outcomes: ledger)
        #expect(try segments(dir).count == 3)
        #expect(try readAll([dir]).ids == Array(0..<30))
    }

    @Test("a time range skips, through the index, the members wholly outside it")
    func timeRange() async throws {
        let (dir, _) = try await record(1000, batch: 100)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reader = try LogReader(paths: [dir])
        reader.timeRange = 0...1000  // 1970: nothing
        #expect(reader.next() == nil && reader.problems.isEmpty)
        let all = try LogReader(paths: [dir])
        all.timeRange = 0...Int64.max
        var n = 0
        while all.next() != nil { n += 1 }
        #expect(n == 1000)
    }

    @Test("damage is reported with its segment and offset and the good records around it are read", arguments: [
        "flipped bytes", "flipped bytes, no index", "truncated", "not gzip", "garbage appended", "torn index",
    ])
    func damage(kind: String) async throws {
        let (dir, _) = try await record(2000, batch: 100)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let segment = try #require(try segments(dir).first)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        let index = try String(contentsOfFile: segment + ".idx", encoding: .utf8).split(separator: "\n")
        #expect(index.count == 20)
        func member(_ k: Int) -> (offset: Int, length: Int) {
            let o = try! JSONParser.parse(Array(index[k].utf8)).objectValue!
            return (o["offset"]!.numberValue!.intValue!, o["length"]!.numberValue!.intValue!)
        }
        var expectedIDs = Array(0..<2000)
        var expectedMessage = ""
        var expectedOffset = -1
        switch kind {
        case "flipped bytes", "flipped bytes, no index":
            let m = member(7)
            for k in (m.offset + m.length / 3)..<(m.offset + m.length / 3 + 40) { bytes[k] ^= 0x5A }
            expectedIDs.removeSubrange(700..<800)
            expectedMessage = "corrupt gzip member"
            expectedOffset = m.offset
            if kind.hasSuffix("no index") { try FileManager.default.removeItem(atPath: segment + ".idx") }
        case "truncated":
            let m = member(19)
            bytes.removeLast(m.length / 2)
            expectedIDs.removeSubrange(1900..<2000)
            expectedMessage = "torn tail"
            expectedOffset = m.offset
        case "not gzip":
            bytes = Array(#"{"id":1}"#.utf8) + [0x0A]
            expectedIDs = []
            expectedMessage = "not gzip data"
            expectedOffset = 0
        case "garbage appended":
            bytes += (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 131) }
            expectedMessage = "corrupt gzip member"
            expectedOffset = member(19).offset + member(19).length
        default:  // the index cut mid-line: the entries before the cut still count, the rest is scanned
            let text = try String(contentsOfFile: segment + ".idx", encoding: .utf8)
            try String(text.prefix(text.count / 2)).write(toFile: segment + ".idx", atomically: false, encoding: .utf8)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        let (ids, problems) = try readAll([dir])
        #expect(ids == expectedIDs, "\(kind): read \(ids.count) records")
        if expectedMessage.isEmpty {
            #expect(problems.isEmpty, "\(problems)")
        } else {
            let first = try #require(problems.first, "\(kind): no problem reported")
            #expect(first.segment == segment && first.offset == Int64(expectedOffset) && first.message.contains(expectedMessage), "\(first)")
        }
    }

    @Test("a gzip file the recorder did not write, made by the gzip tool, reads back")
    func readsGzipTool() throws {
        let dir = tempDirectory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let plain = dir + "/made.jsonl"
        try Data(#"{"id":1}\#n{"id":2,"b":[2]}\#n"#.utf8).write(to: URL(fileURLWithPath: plain))
        #expect(try run("gzip", ["-f", plain]).1 == 0)
        let (ids, problems) = try readAll([plain + ".gz"])
        #expect(ids == [1, 2] && problems.isEmpty)
    }

    @Test("a full disk: the batch fails naming the segment, no partial member is left, the records before it read back clean")
    func fullDisk() async throws {
        guard getuid() == 0 else { return }  // mounting a small filesystem needs root (CI runs as root)
        let dir = tempDirectory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer {
            _ = try? runCommandBlocking("/usr/bin/umount", [dir])
            try? FileManager.default.removeItem(atPath: dir)
        }
        _ = try await runCommand("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir])
        var options = RecorderOptions()
        options.level = 9
        let transport = try RecorderTransport(directory: dir + "/log", options: options)
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])
        var sent = 0
        while ledger.snapshot.failed == 0 && sent < 200_000 {
            let batch = (sent..<sent + 500).map(envelope)
            ledger.enter(UInt64(sent)..<UInt64(sent + 500), count: 500)
            try await transport.send(batch, outcomes: ledger)
            sent += 500
        }
        await transport.finish(outcomes: ledger)
        let failed = collector.records.filter { $0.outcome.kind == .failed }
        #expect(failed.count == 500, "the whole batch that did not fit fails")
        #expect(failed.first.map { "\($0.outcome)".contains("No space left") } == true, "\(failed.first.map { "\($0.outcome)" } ?? "")")
        let (ids, problems) = try readAll([dir + "/log"])
        #expect(problems.isEmpty, "\(problems)")
        #expect(ids == Array(0..<(sent - 500)), "every accepted record, and nothing of the failed batch")
    }
}
