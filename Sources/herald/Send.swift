import ArgumentParser
@preconcurrency import Dispatch
import HeraldBinary
import HeraldCore
import HeraldKit
import HeraldTracing
import Logging
import ServiceLifecycle
import HeraldService
import Synchronization
import HeraldJSON
#if canImport(Glibc)
import Glibc
#endif

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send JSON Lines requests through the pipeline; print one outcome per request.",
        discussion: """
            With no configuration, requests go to the in-memory APNs simulator. Outcomes go to \
            standard output (or --outcomes FILE) as JSON Lines; a summary goes to standard error.

            Examples:
              herald send examples/requests.jsonl
              herald send --config herald.json --outcomes outcomes.jsonl requests.jsonl
              producer | herald send - > outcomes.jsonl

            Progress goes to standard error: on a terminal, a line rewritten twice a second (count, rate, \
            how far through the file, ETA); otherwise a JSON line every --progress-every seconds; none with --quiet.

            Exit status: 0 every request ended accepted, rejected, dropped or suppressed; 3 some ended failed; 4 outcomes could not be written; 5 the token store could not record what the run learned; 1 Herald could not start or read its input.
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "Configuration file (JSON).")
    var config: String?

    @Option(help: "Where to write outcomes (JSON Lines); - for standard output. A file is appended to, never emptied, unless --overwrite-outcomes.")
    var outcomes: String?

    @Flag(help: "Empty the outcomes file before writing (by default outcomes are added after what it holds).")
    var overwriteOutcomes = false

    @OptionGroup(title: "Localization")
    var localization: LocalizationOptions

    @OptionGroup(title: "Logs")
    var logs: LogOptions

    @Flag(help: "No progress lines on standard error.")
    var quiet = false

    @Option(help: "Seconds between progress lines when standard error is not a terminal.")
    var progressEvery = 10.0

    @Option(help: "Cores to spread decoding and the stages over (pipeline.threads); 0, the default, is every core this process may run on.")
    var threads: Int?

    func run() async throws {
        var configuration = try loadConfiguration(config)
        if let outcomes { configuration.outcomes = outcomes }
        if let threads {
            guard (0...1024).contains(threads) else { throw ValidationError("--threads: 0 (every core) to 1024") }
            configuration.pipeline.threads = threads
        }
        localization.apply(to: &configuration)
        if input == "-" {
            // A terminal on standard input: say what is awaited rather than wait in silence.
            if isatty(0) != 0 { writeToStandardError("herald: reading JSON Lines requests from standard input (one object per line; Ctrl-D ends)\n") }
        } else if let problem = Self.notJSONLines(input) {
            throw SetupError(problem)
        }
        let progress = InputProgress()
        // Known before the first progress line, not only once the source has opened the file: on a
        // loaded machine the reporter's first line can come first (CI printed one without a fraction).
        if let size = LineReader.regularFileSize(atPath: input) { progress.total.store(size, ordering: .relaxed) }
        try await Self.deliver(
            JSONLinesSource(path: input, progress: progress), named: input, configuration: configuration, logger: logs.logger(),
            progress: quiet ? nil : progress, progressEvery: .milliseconds(Int64(max(0.05, progressEvery) * 1000)),
            outcomesMode: overwriteOutcomes ? .overwrite : .append)
    }

    /// Why the file at `path` is plainly not JSON Lines, from its first line: a JSON array
    /// (`[` first) or pretty-printed JSON (a first line that is only `{`). Every line of such
    /// a file would end `dropped`; it is refused before anything is sent, with how to convert it.
    /// `nil` for anything else (including a file that cannot be read: the source says why).
    static func notJSONLines(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &head, head.count)
        guard n > 0 else { return nil }
        head.removeSubrange(n...)
        var start = 0
        if head.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }  // a byte-order mark
        let blank: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        guard let first = head[start...].firstIndex(where: { !blank.contains($0) }) else { return nil }
        let lineEnd = head[first...].firstIndex(of: 0x0A) ?? head.endIndex
        let line = head[first..<lineEnd].filter { !blank.contains($0) }
        let array = head[first] == UInt8(ascii: "[")
        let looks: String
        if array {
            looks = "a JSON array"
        } else if line == [UInt8(ascii: "{")] {
            looks = "pretty-printed JSON (an object over several lines)"
        } else {
            return nil
        }
        let filter = array ? ".[]" : "."
        return "\(path) is not JSON Lines: it looks like \(looks). herald send reads one request object per line; "
            + "convert it with: jq -c '\(filter)' \(path) > requests.jsonl"
    }

    /// Runs `source` through the configured pipeline and transport: outcomes
    /// written, the summary printed, the exit status set (shared with `herald
    /// replay` and `herald work`). `observers` see every outcome too; `settle`
    /// runs after the pipeline, before the summary: its fields join the
    /// summary, and outcomes it reports lost set the exit status as the
    /// outcome writer's would. The pipeline runs as the main service of one
    /// `ServiceGroup` after `services` (a queue, its outcome writer, a token
    /// store), which stop after it: SIGTERM or SIGINT drains, a second signal
    /// gives up on what is left (``SignalledServiceGroup``).
    static func deliver(
        _ source: some NotificationSource, named input: String, configuration: HeraldConfiguration, logger: Logger, progress: InputProgress? = nil,
        progressEvery: Duration = .seconds(10), observers: [any OutcomeObserver] = [], tokenStore: (any TokenStore)? = nil,
        services: [any Service] = [],
        settle: (() async -> (fields: JSONLine, lost: Int))? = nil, outcomesMode: OutcomeWriter.FileMode = .append
    ) async throws {

        // The pipeline exists only once the writer does: the writer's failure reaches it through this box.
        let stop = PipelineBox()
        let writer: OutcomeWriter
        do {
            writer = try OutcomeWriter(path: configuration.outcomes, mode: outcomesMode, lineKey: source.lineKey) { error in
                writeToStandardError("herald: cannot write outcomes: \(error); stopping (the summary counts what was lost)\n")
                stop.shutdown()
            }
        } catch {
            throw SetupError("\(error)")
        }
        // Traced notifications' spans (OTEL_TRACES_EXPORTER): the exporter stops last (first in the group).
        let tracing: TracingSetup?
        do { tracing = try TracingSetup.fromEnvironment(logger: logger) } catch { throw error as? SetupError ?? SetupError("\(error)") }
        let services = (tracing?.services ?? []) + services
        let book = tracing.map { _ in TraceBook() }
        let ledger = OutcomeLedger(observers: [writer] + (book.map { [NotificationSpans(book: $0, exporter: tracing?.spanExporter)] } ?? []) + observers, traceBook: book)
        let pipeline: Pipeline
        let transport: any Transport
        let assembly: HeraldAssembly
        do {
            assembly = try HeraldAssembly.configured(configuration, logger: logger, tokenStore: tokenStore)
            transport = try assembly.transport()
            pipeline = try assembly.makePipeline(source: source, ledger: ledger, transport: transport)
        } catch {
            throw SetupError("\(error)")
        }
        stop.set(pipeline)

        let clock = ContinuousClock()
        let start = clock.now
        let reporter = progress.map { p in Task { await ProgressReporter(input: p, ledger: ledger, every: progressEvery).run() } }
        let main = PipelineRun(pipeline: pipeline)
        var failure: (any Error)?
        do {
            try await SignalledServiceGroup.run(
                services, main: main, logger: logger,
                onFirstSignal: { writeToStandardError("herald: shutting down, draining in-flight requests (signal again to give up on them)\n") },
                abandon: {
                    writeToStandardError("herald: giving up on what is still in flight (signal again to exit at once)\n")
                    pipeline.abandon("abandoned: a second signal came before the gateway confirmed it")
                })
        } catch {
            failure = error
        }
        failure = main.failure.withLock { $0 } ?? failure
        reporter?.cancel()
        await reporter?.value
        writer.flush()
        let settled = await settle?()
        let elapsed = clock.now - start
        let snapshot = ledger.snapshot
        let counters = await (transport as? any TransportReporting)?.counters
        let (written, lost) = writer.counts
        printSummary(snapshot, elapsed: elapsed, counters: counters, outcomesWritten: written, outcomesLost: lost, extra: settled?.fields)
        if let failure {
            if case PipelineError.sourceFailed(let e, _) = failure, snapshot.entered == 0 {
                throw SetupError("cannot read \(input): \(e)")
            }
            throw SetupError("\(failure)")
        }
        if writer.failure != nil || (settled?.lost ?? 0) > 0 { throw ExitCode(Self.outcomesNotWritten) }
        // Every outcome is written, but what the token store learned is not kept: say so in the status.
        if assembly.tokenStore.failure != nil { throw ExitCode(Self.tokenStoreNotWritten) }
        if snapshot.failed > 0 { throw ExitCode(Self.someFailed) }
    }

    /// Exit status when the token store could not record what the run learned (dead tokens…).
    static let tokenStoreNotWritten: Int32 = 5

    /// Exit status when some requests ended `failed` (the rest were decided).
    static let someFailed: Int32 = 3
    /// Exit status when outcomes could not be written (takes precedence).
    static let outcomesNotWritten: Int32 = 4

    /// One JSON line on standard error; with a transport that counts
    /// (``TransportReporting``), what its connections did, including
    /// `possible_duplicates`: notifications sent again after their answer was
    /// lost (a connection closed with no answer), the only ones a device may
    /// have received twice.
    static func printSummary(
        _ s: LedgerSnapshot, elapsed: Duration, counters: [(name: String, value: Int)]?, outcomesWritten: Int, outcomesLost: Int, extra: JSONLine? = nil
    ) {
        let seconds = elapsed.inSeconds
        var fields = JSONLine()
        fields.add("entered", s.entered)
        for k in Outcome.Kind.allCases { fields.add(k.rawValue, s.count(k)) }
        fields.add("balanced", s.isBalanced)
        fields.add("elapsed_s", seconds, places: 4)
        fields.add("rate_per_s", seconds > 0 ? Double(s.entered) / seconds : 0, places: 1)
        fields.add("outcomes_written", outcomesWritten)
        if outcomesLost > 0 { fields.add("outcomes_not_written", outcomesLost) }
        for (name, value) in counters ?? [] { fields.add(name, value) }
        if let extra { fields.add("queue", extra) }
        var line = JSONLine()
        line.add("summary", fields)
        writeToStandardError(line.line)
    }
}

/// Holds the pipeline for a callback made before it exists.
final class PipelineBox: Sendable {
    let pipeline = Mutex<Pipeline?>(nil)
    func set(_ p: Pipeline) { pipeline.withLock { $0 = p } }
    func shutdown() { pipeline.withLock { $0 }?.shutdown() }
}

/// A setup error: printed plainly, exit code 1.
struct SetupError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// The pipeline as a command's main service: a graceful shutdown (the first
/// signal) stops the source, and what was emitted drains.
final class PipelineRun: Service, Sendable {
    let pipeline: Pipeline
    /// Why the run failed (the source, the ledger), if it did.
    let failure = Mutex<(any Error)?>(nil)
    init(pipeline: Pipeline) { self.pipeline = pipeline }
    func run() async {
        await withGracefulShutdownHandler {
            do { try await pipeline.run() } catch { failure.withLock { $0 = error } }
        } onGracefulShutdown: {
            self.pipeline.shutdown()
        }
    }
}

/// Progress on standard error while `herald send` runs: on a terminal, one
/// line rewritten twice a second (count, rate and, for a file, how far and the
/// ETA); otherwise a JSON line every 10 seconds. `--quiet` turns it off.
struct ProgressReporter {
    let input: InputProgress
    let ledger: OutcomeLedger
    /// Between lines when standard error is not a terminal.
    let every: Duration
    let terminal = isatty(2) != 0

    func run() async {
        let clock = ContinuousClock()
        let start = clock.now
        let period: Duration = terminal ? .milliseconds(500) : every
        while (try? await Task.sleep(for: period)) != nil {
            let s = ledger.snapshot
            let elapsed = (clock.now - start).inSeconds
            let rate = elapsed > 0 ? Double(s.entered) / elapsed : 0
            let consumed = input.consumed.load(ordering: .relaxed), total = input.total.load(ordering: .relaxed)
            let fraction = total > 0 ? Double(consumed) / Double(total) : nil
            let eta = fraction.flatMap { f in f > 0 ? elapsed * (1 - f) / f : nil }
            if terminal {
                var text = "\r\(s.entered) read, \(s.ended) decided, \(Int(rate))/s"
                if let fraction { text += String(format: ", %.1f%%", fraction * 100) }
                if let eta { text += ", ETA \(Int(eta.rounded()))s" }
                writeToStandardError(text + "   ")
            } else {
                var fields = JSONLine()
                fields.add("entered", s.entered)
                fields.add("decided", s.ended)
                fields.add("rate_per_s", rate, places: 0)
                fields.add("elapsed_s", elapsed, places: 1)
                if let fraction { fields.add("input_fraction", fraction, places: 3) }
                if let eta { fields.add("eta_s", eta, places: 0) }
                var line = JSONLine()
                line.add("progress", fields)
                writeToStandardError(line.line)
            }
        }
        if terminal { writeToStandardError("\r\u{1B}[K") }
    }
}
