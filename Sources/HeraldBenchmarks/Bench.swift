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
    static let all: [any ParsableCommand.Type] = [BenchPipeline.self, BenchPayload.self, BenchLocalize.self, BenchFrame.self, BenchTLS.self, BenchHTTP2.self, BenchSuppress.self, BenchRecord.self, BenchServe.self, BenchQueue.self, BenchClient.self, BenchSend.self, BenchLanes.self]
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

/// Peak resident memory of this process, in MiB (VmHWM).
func peakResidentMiB() -> Double {
    guard let kb = procFields("/proc/self/status", "VmHWM:")?.first.flatMap({ Double($0) }) else { return -1 }
    return kb / 1024
}

/// The fields (split on blanks) after `prefix` on the first line of a `/proc` file (Linux) that
/// starts with it; `nil` when the file cannot be read or has no such line.
func procFields(_ path: String, _ prefix: String) -> [Substring]? {
    guard let f = fopen(path, "r") else { return nil }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, f) != nil {
        let s = String(cString: line)
        if s.hasPrefix(prefix) { return s.dropFirst(prefix.count).split(whereSeparator: \.isWhitespace) }
    }
    return nil
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
        abstract: "Stream generated requests through every stage hop with trivial work per stage.",
        discussion: """
            Each round runs the pipeline, then the two plain loops on one thread: the touch-only loop \
            (the request, its envelope, five touches: the baseline the goal is set against) and the loop \
            that also does the runtime's bookkeeping. Rounds alternate so that a noisy neighbour hurts \
            both sides alike; each side reports its best round, and every round's rates are listed.

            Example: herald bench pipeline --count 4000000 --rounds 3
            """
    )

    @Option(help: "Requests to generate.")
    var count = 10_000_000

    @Option(help: "Requests per batch.")
    var batchSize = 512

    @Option(help: "Batches buffered between stages.")
    var bufferedBatches = 4

    @Option(help: "Rounds of pipeline and loops, interleaved.")
    var rounds = 5

    static let stageNames = ["ingest", "localize", "payload", "size", "frame"]

    func run() async throws {
        let baselineCount = min(count, 2_000_000)
        var pipelineRates: [Double] = [], loopRates: [Double] = [], touchRates: [Double] = []
        var balanced = true, baselineBalanced = true, delivered = 0
        for _ in 0..<max(1, rounds) {
            let (rate, ok, sent) = try await pipelineRound()
            pipelineRates.append(rate)
            balanced = balanced && ok && sent == count
            delivered = sent
            let (loopRate, loopOK) = await bookkeepingLoop(baselineCount)
            loopRates.append(loopRate)
            baselineBalanced = baselineBalanced && loopOK
            touchRates.append(await touchOnlyLoop(baselineCount))
        }
        let rate = pipelineRates.max()!, loopRate = loopRates.max()!, touchRate = touchRates.max()!

        var report = JSONLine()
        report.add("benchmark", "pipeline")
        report.add("requests", count)
        report.add("stage_hops", Self.stageNames.count + 1)
        report.add("batch_size", batchSize)
        report.add("rounds", pipelineRates.count)
        report.add("seconds", Double(count) / rate, places: 3)
        report.add("requests_per_second", rate, places: 0)
        report.add("touch_only_loop_requests_per_second", touchRate, places: 0)
        report.add("ratio_to_touch_only_loop", rate / touchRate, places: 3)
        report.add("goal_ratio_to_touch_only_loop", 0.8, places: 1)
        report.add("baseline_loop_requests_per_second", loopRate, places: 0)
        report.add("ratio_to_baseline", rate / loopRate, places: 3)
        report.add("goal_ratio_to_baseline", 0.8, places: 1)
        report.add("round_requests_per_second", pipelineRates, places: 0)
        report.add("round_touch_only_loop_requests_per_second", touchRates, places: 0)
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.add("delivered", delivered)
        report.add("balanced", balanced)
        report.add("goal_requests_per_second", 2_000_000)
        report.add("goal_peak_rss_mib", 64)
        report.add("baseline_balanced", baselineBalanced)
        report.print()
    }

    /// One pipeline run: its rate, whether the books balanced, and how many the transport took.
    func pipelineRound() async throws -> (Double, Bool, Int) {
        let transport = CountingTransport()
        let pipeline = Pipeline(
            source: GeneratedSource(count: count),
            stages: Self.stageNames.map { NamedStage($0, TouchStage()) },
            transport: transport, ledger: OutcomeLedger(tracksIdentity: false),
            options: PipelineOptions(batchSize: batchSize, bufferedBatches: bufferedBatches))
        var snapshot: LedgerSnapshot?
        let elapsed = try await measure { snapshot = try await pipeline.run() }
        return (Double(count) / elapsed, snapshot?.isBalanced ?? false, transport.count)
    }

    /// The same per-request work in one plain loop on one thread, no actors, no hops: the request, its
    /// envelope, five touches, and the runtime's bookkeeping per batch (the ledger's entry, the transport's
    /// outcome, the batch's storage).
    func bookkeepingLoop(_ n: Int) async -> (Double, Bool) {
        let ledger = OutcomeLedger(tracksIdentity: false)
        var sink = 0
        let seconds = await measure {
            let request = GeneratedSource.template
            let stage = TouchStage()
            var batch: [Envelope] = []
            batch.reserveCapacity(batchSize)
            for i in 0..<n {
                var e = Envelope(sequence: UInt64(i), request: request)
                for _ in Self.stageNames { stage.touch(&e) }
                batch.append(e)
                if batch.count == batchSize || i == n - 1 {
                    ledger.enter(batch.lazy.map(\.sequence), count: batch.count)
                    sink &+= batch.count
                    ledger.record(batch, as: .accepted)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        return (Double(n) / seconds, ledger.snapshot.isBalanced && sink >= n)
    }

    /// The touches alone, without the bookkeeping: the baseline the goal is set against.
    func touchOnlyLoop(_ n: Int) async -> Double {
        var sink = 0
        let seconds = await measure {
            let request = GeneratedSource.template
            let stage = TouchStage()
            for i in 0..<n {
                var e = Envelope(sequence: UInt64(i), request: request)
                for _ in Self.stageNames { stage.touch(&e) }
                sink &+= e.request.aps.badge ?? 0
            }
        }
        precondition(sink >= 0)
        return Double(n) / seconds
    }
}

/// Emits `count` copies of one small alert request (each envelope gets its own
/// sequence number): per request, the same work as the loops' `Envelope(…, request:)`.
struct GeneratedSource: NotificationSource {
    let count: Int
    static let template: NotificationRequest = {
        var aps = APS()
        aps.alert = Alert(body: "Hello from Herald")
        aps.badge = 0
        return NotificationRequest(token: DeviceToken(bytes: (0..<32).map { UInt8($0) }), aps: aps, topic: "com.example.app")
    }()
    func produce(into sink: SourceSink) async throws {
        let r = Self.template
        for _ in 0..<count {
            if sink.isStopping { return }
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
        outcomes.record(batch, as: .accepted)
    }
    func finish(outcomes: OutcomeLedger) async {}
}
