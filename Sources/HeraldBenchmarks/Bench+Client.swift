import ArgumentParser
import Foundation
import HeraldClient
import HeraldCore
import HeraldJSON
import HeraldKit
import Synchronization

/// `herald bench client`: notifications per second through `HeraldClient`,
/// sent by many concurrent callers each awaiting its outcome, beside
/// `herald send`'s pipeline on the same requests from a JSON Lines file, in
/// the same run, both to the in-memory HTTP/2 simulator.
struct BenchClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Awaited sends per second through HeraldClient from many concurrent callers, beside herald send from a file.",
        discussion: """
            Runs (1) --count notifications through HeraldClient, sent by --callers concurrent tasks, each \
            awaiting every outcome before its next send; the process's peak memory is read right after; \
            (2) one caller alone sending --latency-sends notifications, each timed (p50, p99); (3) the same \
            --count requests as JSON Lines from a file through herald send's pipeline. All to the in-memory \
            HTTP/2 simulator (http2-simulator). Goal (issue 27): awaited sends at least 1x the file's rate, \
            peak memory under 200 MB, one caller's p99 under 2 ms.
            """
    )

    @Option(help: "Notifications.") var count = 1_000_000
    @Option(help: "Concurrent callers.") var callers = 10_000
    @Option(help: "Sends timed one by one from a lone caller.") var latencySends = 20_000

    static let topic = "com.example.app"

    /// The i-th request, as code builds it (the file holds the same, as JSON Lines).
    static func request(_ i: Int) -> NotificationRequest {
        var aps = APS()
        aps.alert = Alert(body: "Bob wants to play poker", title: "Game Request")
        aps.badge = 1
        return NotificationRequest(token: token(i), aps: aps, id: UInt32(truncatingIfNeeded: i), topic: topic)
    }

    static func token(_ i: Int) -> DeviceToken {
        var g = SeededGenerator(seed: UInt64(i) &+ 0x27)
        var words = (g.next(), g.next(), g.next(), g.next())
        return withUnsafeBytes(of: &words) { DeviceToken(copying: $0) }
    }

    func run() async throws {
        let count = self.count, callers = max(1, min(self.callers, count))
        let dir = NSTemporaryDirectory() + "herald-bench-client-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #"{"transport":{"type":"http2-simulator","bundleID":"com.example.app"}}"#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)

        // 1. Many callers, each awaiting every send.
        let client = try HeraldClient(configuration: try HeraldConfiguration.load(path: dir + "/herald.json"))
        let runner = Task { try await client.run() }
        let perCaller = count / callers, extra = count % callers
        let notAccepted = Counter()
        let clientCPU0 = processCPUSeconds()
        let clientSeconds = try await measure {
            try await withThrowingDiscardingTaskGroup { group in
                for c in 0..<callers {
                    let first = c * perCaller + min(c, extra), n = perCaller + (c < extra ? 1 : 0)
                    group.addTask {
                        for i in first..<(first + n) where try await !client.send(Self.request(i)).isAccepted { notAccepted.add() }
                    }
                }
            }
        }
        let clientCPU = processCPUSeconds() - clientCPU0
        let peak = peakResidentMiB()
        guard notAccepted.value == 0 else { throw BenchError("client: \(notAccepted.value) of \(count) not accepted") }

        // 2. One caller alone: each send's latency.
        var latencies: [Double] = []
        latencies.reserveCapacity(latencySends)
        let clock = ContinuousClock()
        for i in 0..<latencySends {
            let start = clock.now
            guard try await client.send(Self.request(count + i)).isAccepted else { throw BenchError("latency: send \(i) not accepted") }
            latencies.append((clock.now - start).inSeconds * 1000)
        }
        latencies.sort()
        client.shutdown()
        try await runner.value
        let books = client.ledger.snapshot
        guard books.isBalanced, books.entered == UInt64(count + latencySends) else { throw BenchError("client's books: \(books)") }

        // 3. herald send's way: the same requests from a file.
        let input = dir + "/requests.jsonl"
        try writeRequestFile(input, count: count)
        let ledger = OutcomeLedger()
        let fileCPU0 = processCPUSeconds()
        let fileSeconds = try await measure {
            let assembly = try HeraldAssembly.configured(try HeraldConfiguration.load(path: dir + "/herald.json"))
            let snapshot = try await assembly.makePipeline(source: JSONLinesSource(path: input), ledger: ledger).run()
            guard snapshot.entered == UInt64(count), snapshot.accepted == UInt64(count) else { throw BenchError("send: \(snapshot)") }
        }

        let fileCPU = processCPUSeconds() - fileCPU0
        func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        let clientRate = Double(count) / clientSeconds, fileRate = Double(count) / fileSeconds
        let p99 = percentile(0.99)
        var r = JSONLine()
        r.add("benchmark", "client")
        r.add("notifications", count)
        r.add("callers", callers)
        r.add("client_per_s", clientRate, places: 0)
        r.add("file_per_s", fileRate, places: 0)
        r.add("ratio_to_file", clientRate / fileRate, places: 2)
        r.add("client_cpu_us_per_notification", clientCPU / Double(count) * 1e6, places: 2)
        r.add("file_cpu_us_per_notification", fileCPU / Double(count) * 1e6, places: 2)
        r.add("client_cores_busy", clientCPU / clientSeconds, places: 2)
        r.add("file_cores_busy", fileCPU / fileSeconds, places: 2)
        r.add("peak_rss_mib", peak, places: 1)
        r.add("single_caller_sends", latencySends)
        r.add("single_caller_p50_ms", percentile(0.5), places: 3)
        r.add("single_caller_p99_ms", p99, places: 3)
        r.add("goal_met", clientRate >= fileRate && peak < 200 && p99 < 2)
        r.print()
    }

    /// The same requests as JSON Lines, written in chunks (never all in memory).
    func writeRequestFile(_ path: String, count: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw BenchError("cannot write \(path)")
        }
        defer { try? handle.close() }
        var w = JSONWriter(capacity: 1 << 20)
        for i in 0..<count {
            w.raw("{\"id\":")
            w.int(Int(UInt32(truncatingIfNeeded: i)))
            w.raw(",\"token\":")
            w.string(Self.token(i).hex)
            w.raw(",\"topic\":\"com.example.app\",\"alert\":{\"title\":\"Game Request\",\"body\":\"Bob wants to play poker\"},\"badge\":1}\n")
            if w.bytes.count > 1 << 20 - 256 {
                try handle.write(contentsOf: w.bytes)
                w.bytes.removeAll(keepingCapacity: true)
            }
        }
        try handle.write(contentsOf: w.bytes)
    }
}

/// CPU time this process has used, user and system, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// A count many tasks add to.
final class Counter: Sendable {
    let atomic = Atomic<Int>(0)
    func add() { atomic.add(1, ordering: .relaxed) }
    /// The count before adding one.
    func take() -> Int { atomic.add(1, ordering: .relaxed).oldValue }
    var value: Int { atomic.load(ordering: .relaxed) }
}
