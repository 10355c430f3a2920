import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

private func requests(_ count: Int, to path: String) throws {
    var text = ""
    text.reserveCapacity(count * 120)
    for i in 0..<count {
        text += #"{"id":\#(i),"token":"\#(String(format: "%064x", i &* 2_654_435_761 + 1))","topic":"com.example.app","alert":"game \#(i) is ready"}"# + "\n"
    }
    try text.write(toFile: path, atomically: false, encoding: .utf8)
}

private func logSegments(_ dir: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".jsonl.gz") }.sorted().map { dir + "/" + $0 }
}

/// The ids in `herald inspect`'s output.
private func inspectedIDs(_ stdout: String) -> [Int] {
    stdout.split(separator: "\n").compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? Int
    }
}

@Suite("herald inspect and herald replay over recorder logs", .serialized)
struct RecorderCLITests {
    @Test("record with herald send, inspect (shortened tokens, filters), replay through the simulator: one outcome per record; a damaged member is reported and skipped")
    func recordInspectReplay() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try requests(3000, to: dir + "/in.jsonl")
        try #"{"transport":{"type":"recorder","path":"log"},"pipeline":{"batchSize":100}}"#.write(toFile: dir + "/record.json", atomically: true, encoding: .utf8)
        try #"{"transport":{"type":"simulator"}}"#.write(toFile: dir + "/replay.json", atomically: true, encoding: .utf8)
        let (sent, _, sendError) = try await runHerald(["send", "--config", dir + "/record.json", "--outcomes", dir + "/recorded.jsonl", dir + "/in.jsonl"])
        #expect(sent == 0, "\(sendError)")

        let (inspected, out, summary) = try await runHerald(["inspect", dir + "/log"])
        #expect(inspected == 0 && inspectedIDs(out) == Array(0..<3000), "\(summary)")
        #expect(!out.contains("frame") && out.contains(#""token":"00000000…""#) && !out.contains(String(format: "%064x", 1)), "tokens shortened, frames left out")
        let (_, one, _) = try await runHerald(["inspect", dir + "/log", "--token", String(format: "%064x", 7 &* 2_654_435_761 + 1), "--full-tokens"])
        #expect(inspectedIDs(one) == [7] && one.contains(#""frame":""#))
        let (_, none, _) = try await runHerald(["inspect", dir + "/log", "--until", "2001-01-01T00:00:00Z"])
        #expect(none.isEmpty)

        let (replayed, _, replayError) = try await runHerald(["replay", dir + "/log", "--config", dir + "/replay.json", "--outcomes", dir + "/replayed.jsonl"])
        #expect(replayed == 0, "\(replayError)")
        let outcomes = try String(contentsOfFile: dir + "/replayed.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(outcomes.count == 3000 && outcomes.allSatisfy { $0.contains(#""outcome":"accepted""#) })
        #expect(replayError.contains(#""entered":3000,"accepted":3000"#) && replayError.contains(#""balanced":true"#))

        // Flip bytes inside the 5th member of the first segment: its 100 records are lost, reported; the rest replay.
        let segment = try #require(try logSegments(dir + "/log").first)
        let index = try String(contentsOfFile: segment + ".idx", encoding: .utf8).split(separator: "\n")
        let member = try #require(try JSONSerialization.jsonObject(with: Data(index[4].utf8)) as? [String: Int])
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        for k in 0..<32 { bytes[member["offset"]! + member["length"]! / 2 + k] ^= 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        let (damaged, _, damagedError) = try await runHerald(["replay", dir + "/log", "--config", dir + "/replay.json", "--outcomes", dir + "/again.jsonl"])
        #expect(damaged == 1)
        #expect(damagedError.contains("\(segment): offset \(member["offset"]!): corrupt gzip member"), "\(damagedError)")
        #expect(damagedError.contains(#""entered":2900,"accepted":2900"#), "\(damagedError)")
        let (inspectStatus, damagedOut, _) = try await runHerald(["inspect", dir + "/log"])
        #expect(inspectStatus == 1 && inspectedIDs(damagedOut) == Array(0..<400) + Array(500..<3000))
    }

    @Test("SIGKILL while recording: every record reported accepted is read back; at most a torn last member, reported as such")
    func killedWhileRecording() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try requests(400_000, to: dir + "/in.jsonl")
        try #"{"transport":{"type":"recorder","path":"log","segmentMiB":1},"pipeline":{"batchSize":200},"outcomes":"recorded.jsonl"}"#
            .write(toFile: dir + "/record.json", atomically: true, encoding: .utf8)
        let child = Process()
        child.executableURL = try heraldExecutable()
        child.arguments = ["send", "--config", dir + "/record.json", dir + "/in.jsonl"]
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try startProcess { try child.run() }
        // Kill once a few segments exist (and the writer is mid-stream).
        let deadline = Date().addingTimeInterval(60)
        while child.isRunning && Date() < deadline {
            if let files = try? logSegments(dir + "/log"), files.count >= 3 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let wasRunning = child.isRunning
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(wasRunning, "the run ended before it could be killed")

        let (status, out, summary) = try await runHerald(["inspect", dir + "/log"])
        let ids = inspectedIDs(out)
        #expect(Set(ids).count == ids.count, "no record twice")
        // Accepted outcomes the child wrote before it died (its last line may be cut short).
        let accepted = try String(contentsOfFile: dir + "/recorded.jsonl", encoding: .utf8).split(separator: "\n").compactMap { line -> Int? in
            guard line.contains(#""outcome":"accepted""#) else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? Int
        }
        #expect(accepted.count > 1000 && Set(accepted).isSubset(of: Set(ids)), "\(accepted.count) accepted, \(ids.count) read back")
        if status != 0 {
            #expect(summary.contains("torn tail") && summary.contains(#""problems":1"#), "\(summary)")
        }
    }
}

@Suite("herald send's progress lines")
struct ProgressTests {
    @Test("not on a terminal: a JSON progress line every --progress-every seconds, with the input's fraction; none with --quiet")
    func progressLines() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try requests(60_000, to: dir + "/in.jsonl")
        let (status, _, stderr) = try await runHerald(["send", "--progress-every", "0.05", "--outcomes", dir + "/out.jsonl", dir + "/in.jsonl"])
        #expect(status == 0)
        let lines = stderr.split(separator: "\n").filter { $0.hasPrefix(#"{"progress":"#) }
        #expect(!lines.isEmpty, "\(stderr.prefix(500))")
        let fractions = lines.compactMap { line -> Double? in
            (((try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["progress"] as? [String: Any])?["input_fraction"] as? NSNumber)?.doubleValue
        }
        // A line may come before the first read on a loaded machine (CI once printed 0.000): 0 is a fraction too.
        #expect(fractions.count == lines.count && fractions == fractions.sorted() && fractions.allSatisfy { $0 >= 0 && $0 <= 1 }, "\(lines)")
        let (_, _, quiet) = try await runHerald(["send", "--quiet", "--progress-every", "0.05", "--outcomes", dir + "/out2.jsonl", dir + "/in.jsonl"])
        #expect(!quiet.contains(#"{"progress":"#))
    }
}

@Suite("Configuration from the environment")
struct EnvironmentOverrideTests {
    /// Runs herald with extra environment variables.
    func herald(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        try await offPool { try Self.heraldBlocking(arguments, environment: environment) }
    }

    static func heraldBlocking(_ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = try heraldExecutable()
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardOutput = FileHandle.nullDevice
        let err = try startPiping(\.standardError, of: p)
        let data = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("HERALD_<PATH> overrides any key: the transport's type and path, a nested number; a bad value names its variable")
    func overrides() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try requests(50, to: dir + "/in.jsonl")
        try #"{"transport":{"type":"simulator"},"pipeline":{"batchSize":256}}"#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        let (status, err) = try await herald(["send", "--config", dir + "/herald.json", "--outcomes", dir + "/out.jsonl", dir + "/in.jsonl"], environment: [
            "HERALD_TRANSPORT_TYPE": "recorder", "HERALD_TRANSPORT_PATH": dir + "/log", "HERALD_PIPELINE_BATCH_SIZE": "10",
        ])
        #expect(status == 0, "\(err)")
        let (_, out, _) = try await runHerald(["inspect", dir + "/log"])
        #expect(out.split(separator: "\n").count == 50, "recorded through the recorder the environment chose")
        let segment = try #require(try logSegments(dir + "/log").first)
        #expect(try String(contentsOfFile: segment + ".idx", encoding: .utf8).split(separator: "\n").count == 5, "batches of 10")
        let (bad, badErr) = try await herald(["send", "--config", dir + "/herald.json", dir + "/in.jsonl"], environment: ["HERALD_PIPELINE_BATCH_SIZE": "ten"])
        #expect(bad != 0 && badErr.contains("environment variable HERALD_PIPELINE_BATCH_SIZE"), "\(badErr)")
    }
}
