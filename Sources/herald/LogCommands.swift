import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldRecorder
import Synchronization

/// Time bounds given on the command line: UNIX seconds, milliseconds, or ISO 8601 (`2026-11-23T04:55:00Z`).
struct TimeBounds: ParsableArguments {
    @Option(help: "Only records from this time on (UNIX seconds, milliseconds, or ISO 8601).")
    var since: String?

    @Option(help: "Only records up to this time.")
    var until: String?

    var range: ClosedRange<Int64>? {
        get throws {
            guard since != nil || until != nil else { return nil }
            let lower = try since.map { try Self.milliseconds($0, "--since") } ?? Int64.min
            let upper = try until.map { try Self.milliseconds($0, "--until") } ?? Int64.max
            guard lower <= upper else { throw ValidationError("--since is after --until") }
            return lower...upper
        }
    }

    static func milliseconds(_ text: String, _ option: String) throws -> Int64 {
        if let n = Int64(text) { return n >= 1_000_000_000_000 ? n : n * 1000 }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) ?? ISO8601DateFormatter().date(from: text) { return Int64(d.timeIntervalSince1970 * 1000) }
        throw ValidationError("\(option): \(text) is not UNIX seconds, milliseconds or an ISO 8601 time")
    }
}

/// Collects problems from a reader that calls back on another task.
final class ProblemLog: Sendable {
    let count = Mutex(0)
    func report(_ p: LogProblem) {
        count.withLock { $0 += 1 }
        writeToStandardError("herald: \(p)\n")
    }
}

struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Print a recorder log's records as JSON Lines, filtered; report damage with its segment and offset.",
        discussion: """
            LOG is a recorder directory (its segments are read in time order) or segment files. \
            Tokens are shortened to their first 8 hex digits and frames left out unless --full-tokens. \
            A damaged member or line is reported on standard error (segment and byte offset) and \
            skipped; every good record around it is printed; the exit status is then 1.

            Examples:
              herald inspect recordings/
              herald inspect recordings/ --topic com.example.app --since 2026-11-23T04:00:00Z
              herald inspect recordings/herald-20261123T045512.123Z-812-0001.jsonl.gz --token 0a1b2c3d --full-tokens
            """
    )

    @Argument(help: "Recorder directories or segment files.") var logs: [String]
    @Option(help: "Only this topic.") var topic: String?
    @Option(help: "Only tokens starting with these hex digits.") var token: String?
    @OptionGroup var time: TimeBounds
    @Flag(help: "Print whole tokens and the frames (they identify devices: keep the output private).") var fullTokens = false

    func run() throws {
        let reader: LogReader
        do { reader = try LogReader(paths: logs) } catch { throw SetupError("\(error)") }
        let problems = ProblemLog()
        reader.onProblem = problems.report
        reader.timeRange = try time.range
        let prefix = token?.lowercased()
        var out: [UInt8] = []
        var read = 0, matched = 0
        while let record = reader.next() {
            read += 1
            let o = record.object
            if let topic, o["topic"]?.stringValue != topic { continue }
            if let prefix, !(o["token"]?.stringValue?.lowercased().hasPrefix(prefix) ?? false) { continue }
            matched += 1
            var w = JSONWriter(capacity: 0)
            swap(&w.bytes, &out)
            w.byte(UInt8(ascii: "{"))
            var first = true
            for (key, value) in o.entries {
                if !fullTokens && key == "frame" { continue }
                w.separator(&first)
                w.string(key)
                w.byte(UInt8(ascii: ":"))
                if !fullTokens, key == "token", let hex = value.stringValue {
                    w.string(String(hex.prefix(8)) + "…")
                } else {
                    w.value(value)
                }
            }
            w.raw("}\n")
            swap(&w.bytes, &out)
            if out.count >= 1 << 16 { try writeAll(1, &out, to: "standard output") }
        }
        try writeAll(1, &out, to: "standard output")
        var fields = JSONLine()
        fields.add("segments", reader.segments.count)
        fields.add("records", read)
        fields.add("matched", matched)
        fields.add("problems", reader.problems.count)
        var line = JSONLine()
        line.add("inspect", fields)
        writeToStandardError(line.line)
        if !reader.problems.isEmpty { throw ExitCode(1) }
    }
}

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Send a recorder log's notifications again, through any configured transport.",
        discussion: """
            Each record is a request in Herald's raw form: replay runs the same stages, ledger and \
            outcomes as herald send (outcome lines name the record's number across the log as \
            "line"). Damage in the log is reported with its segment and offset, the good records \
            are sent, and the exit status is then 1 (unless a worse one applies).

            Example:
              herald replay recordings/ --config herald.json --outcomes replayed.jsonl
            """
    )

    @Argument(help: "Recorder directories or segment files.") var logs: [String]
    @Option(help: "Configuration file (JSON): the transport to replay through.") var config: String?
    @Option(help: "Where to write outcomes (JSON Lines); - for standard output. A file is appended to.") var outcomes: String?
    @OptionGroup var time: TimeBounds
    @OptionGroup(title: "Logs") var logging: LogOptions

    func run() async throws {
        var configuration = try loadConfiguration(config)
        if let outcomes { configuration.outcomes = outcomes }
        for log in logs where !FileManager.default.fileExists(atPath: log) { throw SetupError("\(log): no such file or directory") }
        let problems = ProblemLog()
        let source = RecordingSource(paths: logs, timeRange: try time.range, onProblem: problems.report)
        try await Send.deliver(source, named: logs.joined(separator: " "), configuration: configuration, logger: logging.logger())
        if problems.count.withLock({ $0 }) > 0 { throw ExitCode(1) }
    }
}
