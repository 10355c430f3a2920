import ArgumentParser
import HeraldCore
import HeraldJSON
import HeraldKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `herald bench …`: Herald's benchmarks, each printing one JSON object, kept
/// out of the executable (which only parses arguments) and out of the product
/// modules.
public struct Bench: AsyncParsableCommand {
    static let all: [any ParsableCommand.Type] = [BenchPipeline.self, BenchPayload.self, BenchLocalize.self, BenchFrame.self, BenchTLS.self, BenchHTTP2.self, BenchSuppress.self, BenchRecord.self, BenchServe.self, BenchQueue.self]
    public static let configuration = CommandConfiguration(
        abstract: "Benchmarks; each prints one JSON object. Build with -c release for meaningful numbers.",
        subcommands: all + [BenchList.self]
    )
    public init() {}
}

/// `herald bench list`: the benchmarks' names, one per line (what `swift package herald-bench` runs).
struct BenchList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Print the benchmarks' names, one per line.")
    func run() {
        for command in Bench.all { print(command._commandName) }
    }
}

/// A benchmark that found something wrong with what it measured.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Results printed as one JSON object on standard output.
/// Peak resident memory of this process, in MiB (VmHWM).
func peakResidentMiB() -> Double {
    guard let f = fopen("/proc/self/status", "r") else { return -1 }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, f) != nil {
        let s = String(cString: line)
        if s.hasPrefix("VmHWM:") {
            let kb = Double(s.split(separator: " ").dropFirst().first(where: { !$0.isEmpty }) ?? "0") ?? 0
            return kb / 1024
        }
    }
    return -1
}

/// Times `body` and returns seconds.
func measure(_ body: () async throws -> Void) async rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    return (clock.now - start).inSeconds
}

struct BenchPipeline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline",
        abstract: "Stream generated requests through every stage hop with trivial work per stage."
    )

    @Option(help: "Requests to generate.")
    var count = 10_000_000

    @Option(help: "Requests per batch.")
    var batchSize = 512

    @Option(help: "Batches buffered between stages.")
    var bufferedBatches = 4

    func run() async throws {
        let stageNames = ["ingest", "localize", "payload", "size", "frame"]
        let ledger = OutcomeLedger(tracksIdentity: false)
        let transport = CountingTransport()
        let pipeline = Pipeline(
            source: GeneratedSource(count: count),
            stages: stageNames.map { NamedStage($0, TouchStage()) },
            transport: transport, ledger: ledger,
            options: PipelineOptions(batchSize: batchSize, bufferedBatches: bufferedBatches))
        var snapshot: LedgerSnapshot?
        let elapsed = try await measure { snapshot = try await pipeline.run() }

        // Baseline in the same run: the same per-request work in one plain loop on one thread, no actors, no
        // hops: the request, its envelope, five touches, and the runtime's bookkeeping per batch (the ledger's
        // entry, the transport's outcome records, the ledger's record). The ratio is what the hops cost.
        let baselineCount = min(count, 2_000_000)
        let baselineLedger = OutcomeLedger(tracksIdentity: false)
        var sink = 0
        let baseline = await measure {
            var request = GeneratedSource.template
            let stage = TouchStage()
            var batch: [Envelope] = []
            batch.reserveCapacity(batchSize)
            for i in 0..<baselineCount {
                request.id = UInt32(truncatingIfNeeded: i)
                var e = Envelope(sequence: UInt64(i), request: request)
                for _ in stageNames { stage.touch(&e) }
                batch.append(e)
                if batch.count == batchSize || i == baselineCount - 1 {
                    baselineLedger.enter(batch.lazy.map(\.sequence), count: batch.count)
                    sink &+= batch.count
                    baselineLedger.record(batch.map { $0.record(.accepted) })
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        // For reference: the touches alone, without the bookkeeping (what this loop measured before).
        let touchOnly = await measure {
            let request = GeneratedSource.template
            let stage = TouchStage()
            for i in 0..<baselineCount {
                var e = Envelope(sequence: UInt64(i), request: request)
                for _ in stageNames { stage.touch(&e) }
                sink &+= e.request.aps.badge ?? 0
            }
        }
        let rate = Double(count) / elapsed
        let baselineRate = Double(baselineCount) / baseline

        var report = JSONLine()
        report.add("benchmark", "pipeline")
        report.add("requests", count)
        report.add("stage_hops", stageNames.count + 1)
        report.add("batch_size", batchSize)
        report.add("seconds", elapsed, places: 3)
        report.add("requests_per_second", rate, places: 0)
        report.add("baseline_loop_requests_per_second", baselineRate, places: 0)
        report.add("ratio_to_baseline", rate / baselineRate, places: 3)
        report.add("goal_ratio_to_baseline", 0.8, places: 1)
        report.add("touch_only_loop_requests_per_second", Double(baselineCount) / touchOnly, places: 0)
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.add("delivered", transport.count)
        report.add("balanced", snapshot?.isBalanced ?? false)
        report.add("goal_requests_per_second", 2_000_000)
        report.add("goal_peak_rss_mib", 64)
        report.add("baseline_balanced", baselineLedger.snapshot.isBalanced && sink >= baselineCount)
        report.print()
    }
}

/// Generates `count` copies of a small alert request with distinct ids.
struct GeneratedSource: NotificationSource {
    let count: Int
    static let template: NotificationRequest = {
        var aps = APS()
        aps.alert = Alert(body: "Hello from Herald")
        aps.badge = 0
        return NotificationRequest(token: DeviceToken(bytes: (0..<32).map { UInt8($0) }), aps: aps, topic: "com.example.app")
    }()
    func produce(into sink: SourceSink) async throws {
        var r = Self.template
        for i in 0..<count {
            if sink.isStopping { return }
            r.id = UInt32(truncatingIfNeeded: i)
            await sink.emit(r)
        }
    }
}

/// Trivial per-request work: reads and writes each envelope once.
struct TouchStage: EnvelopeStage {
    @inline(__always) func touch(_ e: inout Envelope) {
        e.request.aps.badge = (e.request.aps.badge ?? 0) &+ 1
    }
    func apply(_ envelope: inout Envelope) throws(StageFailure) { touch(&envelope) }
}

/// A transport that accepts everything and counts it.
final class CountingTransport: Transport {
    let counter = Atomic<Int>(0)
    var count: Int { counter.load(ordering: .relaxed) }
    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        counter.add(batch.count, ordering: .relaxed)
        outcomes.record(batch.map { $0.record(.accepted) })
    }
    func finish(outcomes: OutcomeLedger) async {}
}
