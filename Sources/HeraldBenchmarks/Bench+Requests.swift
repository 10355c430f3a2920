import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit

/// `count` request lines (random tokens from `seed`, an alert each), as `herald bench serve` and
/// `herald bench queue` send them.
func benchRequestLines(count: Int, seed: UInt64) -> [[UInt8]] {
    var lines: [[UInt8]] = []
    lines.reserveCapacity(count)
    var g = SeededGenerator(seed: seed)
    for i in 0..<count {
        var w = JSONWriter(capacity: 160)
        benchRequestLine(i, &g, into: &w)
        lines.append(w.bytes)
    }
    return lines
}

/// Request line `i` of ``benchRequestLines(count:seed:)``, with its newline, appended to `w`.
func benchRequestLine(_ i: Int, _ g: inout SeededGenerator, into w: inout JSONWriter) {
    w.raw("{\"id\":")
    w.int(i)
    w.raw(",\"token\":\"")
    var words = (g.next(), g.next(), g.next(), g.next())
    withUnsafeBytes(of: &words) { Hex.append($0, to: &w.bytes) }
    w.raw("\",\"topic\":\"com.example.app\",\"alert\":{\"title\":\"Game Request\",\"body\":\"Bob wants to play poker\"},\"badge\":1}\n")
}

/// Writes the lines of ``benchRequestLines(count:seed:)`` to `path` as they are made (a million
/// lines never held in memory at once).
func writeBenchRequests(count: Int, seed: UInt64, to path: String) throws {
    guard let file = FileHandle(forWritingAtPath: path) ?? (FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil)
    else { throw BenchError("cannot write \(path)") }
    defer { try? file.close() }
    try file.truncate(atOffset: 0)
    var g = SeededGenerator(seed: seed)
    var w = JSONWriter(capacity: 1 << 20)
    for i in 0..<count {
        benchRequestLine(i, &g, into: &w)
        if w.bytes.count > (1 << 20) - 512 || i == count - 1 {
            try file.write(contentsOf: w.bytes)
            w.bytes.removeAll(keepingCapacity: true)
        }
    }
}

/// `herald send`'s way, the baseline of the service and queue benchmarks: `input` (`count`
/// lines) through the default pipeline to the in-memory simulator; the seconds it took.
func benchSendSeconds(input: String, count: Int) async throws -> Double {
    let ledger = OutcomeLedger()  // as herald send: identity tracked
    return try await measure {
        let assembly = try HeraldAssembly.configured(HeraldConfiguration())
        let snapshot = try await assembly.makePipeline(source: JSONLinesSource(path: input), ledger: ledger).run()
        guard snapshot.entered == UInt64(count) else { throw BenchError("send: \(snapshot.entered) of \(count)") }
    }
}

/// A new temporary directory holding `requests.jsonl` of ``benchRequestLines(count:seed:)``;
/// the caller removes the directory.
func benchRequestFile(count: Int, seed: UInt64, name: String) throws -> (dir: String, input: String, lines: [[UInt8]]) {
    let lines = benchRequestLines(count: count, seed: seed)
    let dir = NSTemporaryDirectory() + "herald-bench-\(name)-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let input = dir + "/requests.jsonl"
    guard FileManager.default.createFile(atPath: input, contents: Data(lines.joined())) else { throw BenchError("cannot write \(input)") }
    return (dir, input, lines)
}
