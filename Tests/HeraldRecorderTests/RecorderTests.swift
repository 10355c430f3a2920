import Foundation
import HeraldCore
import HeraldRecorder
import Testing

func tempPath(_ suffix: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("herald-rec-\(UUID().uuidString)\(suffix)").path
}

/// Runs a command and returns its standard output and exit status.
func run(_ tool: String, _ args: [String]) throws -> (Data, Int32) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = [tool] + args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (data, p.terminationStatus)
}

func envelope(_ i: Int) -> Envelope {
    var aps = APS()
    aps.alert = Alert(body: "message \(i) — ünïcødé \"quoted\"")
    var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: UInt8(i & 0xFF), count: 32)), aps: aps, id: UInt32(i))
    r.expiry = 1_700_000_000
    r.priority = .immediately
    var e = Envelope(sequence: UInt64(i), request: r)
    e.payload = Array(#"{"aps":{"alert":"message \#(i)"}}"#.utf8)
    e.frame = Frame(bytes: [2, 0, 0, 0, 1, UInt8(i & 0xFF)], identifierOffset: nil)
    return e
}

@Suite("File recorder")
struct RecorderTests {
    @Test("the log is a real gzip stream: zcat reads it, and the reader reads it back")
    func roundTrip() async throws {
        let path = tempPath(".jsonl.gz")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let transport = try RecorderTransport(path: path)
        let ledger = OutcomeLedger()
        let count = 5000
        ledger.enter((0..<UInt64(count)), count: count)
        for start in stride(from: 0, to: count, by: 250) {
            try await transport.send((start..<start + 250).map(envelope), outcomes: ledger)
        }
        await transport.finish(outcomes: ledger)
        #expect(ledger.snapshot.accepted == UInt64(count))
        #expect(ledger.snapshot.isBalanced)

        let (data, status) = try run("zcat", [path])
        #expect(status == 0)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == count)
        #expect(lines.first?.hasPrefix(#"{"seq":0,"id":0,"token":"0000"#) == true)
        #expect(lines.first?.hasSuffix(#","frame":"020000000100","payload":{"aps":{"alert":"message 0"}}}"#) == true)

        let reader = try RecordingReader(path: path)
        var n = 0
        while let record = try reader.next() {
            #expect(record["id"] == .int(n))
            #expect(record["payload"]?.objectValue?["aps"]?.objectValue?["alert"] == .string("message \(n)"))
            n += 1
        }
        #expect(n == count)
        let compressed = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        #expect(compressed < data.count / 4, "compressed \(compressed) of \(data.count) bytes")
    }

    @Test("every batch is flushed: the lines reported accepted are readable before finish")
    func flushedPerBatch() async throws {
        let path = tempPath(".gz")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let transport = try RecorderTransport(path: path)
        let ledger = OutcomeLedger(tracksIdentity: false)
        try await transport.send((0..<10).map(envelope), outcomes: ledger)
        // Not finished: the stream has no trailer yet, but every accepted line is on disk.
        let (data, _) = try run("zcat", [path])
        #expect(String(decoding: data, as: UTF8.self).split(separator: "\n").count == 10)
        await transport.finish(outcomes: ledger)
    }

    @Test("an existing log is never overwritten; a new one is readable by its owner only")
    func neverOverwrites() async throws {
        let path = tempPath(".gz")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = try RecorderTransport(path: path)
        await first.finish(outcomes: OutcomeLedger(tracksIdentity: false))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        do {
            _ = try RecorderTransport(path: path)
            Issue.record("an existing log was overwritten")
        } catch {
            #expect("\(error)".contains("does not overwrite"))
        }
    }

    @Test("corrupt and truncated logs are errors naming the file and where")
    func corrupt() async throws {
        let path = tempPath(".gz")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let transport = try RecorderTransport(path: path)
        let ledger = OutcomeLedger(tracksIdentity: false)
        try await transport.send((0..<2000).map(envelope), outcomes: ledger)
        await transport.finish(outcomes: ledger)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))

        // Flip bytes in the middle of the compressed data.
        var flipped = bytes
        for k in stride(from: flipped.count / 2, to: flipped.count / 2 + 64, by: 1) { flipped[k] ^= 0x5A }
        try Data(flipped).write(to: URL(fileURLWithPath: path))
        #expect(throws: RecorderError.self) {
            let r = try RecordingReader(path: path)
            while try r.next() != nil {}
        }

        // Cut the file short.
        bytes.removeLast(bytes.count / 3)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        do {
            let r = try RecordingReader(path: path)
            while try r.next() != nil {}
            Issue.record("expected an error")
        } catch {
            #expect(error.path == path)
            #expect(error.message.contains("truncated") || error.message.contains("ends in the middle"), "\(error)")
        }

        // Not gzip at all.
        try Data("{\"seq\":1}\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: RecorderError.self) {
            let r = try RecordingReader(path: path)
            while try r.next() != nil {}
        }
    }

    @Test("a log the reader did not write, made by gzip itself, reads back")
    func readsGzipTool() throws {
        let plain = tempPath(".jsonl")
        try Data(#"{"a":1}\#n{"b":[2]}\#n"#.utf8).write(to: URL(fileURLWithPath: plain))
        let (_, status) = try run("gzip", ["-f", plain])
        #expect(status == 0)
        defer { try? FileManager.default.removeItem(atPath: plain + ".gz") }
        let r = try RecordingReader(path: plain + ".gz")
        #expect(try r.next()?["a"] == .int(1))
        #expect(try r.next()?["b"] == .array([.int(2)]))
        #expect(try r.next() == nil)
    }
}
