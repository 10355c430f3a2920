import ArgumentParser
@preconcurrency import Dispatch
import HeraldBinary
import HeraldCore
import HeraldKit
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

            Exit status: 0 every request ended accepted, rejected, dropped or suppressed; 3 some ended failed; 4 outcomes could not be written; 1 Herald could not start or read its input.
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "Configuration file (JSON).")
    var config: String?

    @Option(help: "Where to write outcomes (JSON Lines); - for standard output.")
    var outcomes: String?

    @OptionGroup(title: "Localization")
    var localization: LocalizationOptions

    func run() async throws {
        var configuration = try loadConfiguration(config)
        if let outcomes { configuration.outcomes = outcomes }
        localization.apply(to: &configuration)
        try await Self.deliver(JSONLinesSource(path: input), named: input, configuration: configuration)
    }

    /// Runs `source` through the configured pipeline and transport: outcomes
    /// written, the summary printed, the exit status set (shared with `herald replay`).
    static func deliver(_ source: some NotificationSource, named input: String, configuration: HeraldConfiguration) async throws {

        // The pipeline exists only once the writer does: the writer's failure reaches it through this box.
        let stop = PipelineBox()
        let writer: OutcomeWriter
        do {
            writer = try OutcomeWriter(path: configuration.outcomes) { error in
                writeToStandardError("herald: cannot write outcomes: \(error); stopping (the summary counts what was lost)\n")
                stop.shutdown()
            }
        } catch {
            throw SetupError("cannot write outcomes: \(error)")
        }
        let ledger = OutcomeLedger(observers: [writer])
        let pipeline: Pipeline
        let transport: any Transport
        let assembly: HeraldAssembly
        do {
            assembly = try HeraldAssembly.configured(configuration)
            transport = try assembly.transport()
            pipeline = try assembly.makePipeline(source: source, ledger: ledger, transport: transport)
        } catch {
            throw SetupError("\(error)")
        }
        stop.set(pipeline)
        let signals = ShutdownSignals(
            first: { pipeline.shutdown() },
            second: { pipeline.abandon("abandoned: a second signal came before the gateway confirmed it") })
        defer { signals.cancel() }

        let clock = ContinuousClock()
        let start = clock.now
        var failure: (any Error)?
        do {
            try await pipeline.run()
        } catch {
            failure = error
        }
        writer.flush()
        let elapsed = clock.now - start
        let snapshot = ledger.snapshot
        let delivery = await (transport as? any DeliveryReporting)?.deliveryStatistics
        let (written, lost) = writer.counts
        printSummary(snapshot, elapsed: elapsed, delivery: delivery, outcomesWritten: written, outcomesLost: lost)
        if let failure {
            if case PipelineError.sourceFailed(let e, _) = failure, snapshot.entered == 0 {
                throw SetupError("cannot read \(input): \(e)")
            }
            throw SetupError("\(failure)")
        }
        if writer.failure != nil { throw ExitCode(Self.outcomesNotWritten) }
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

    /// One JSON line on standard error; with a binary-interface transport, what
    /// its connections did, including `possible_duplicates`: notifications
    /// written again after a connection closed with no answer, the only ones a
    /// device may have received twice.
    static func printSummary(_ s: LedgerSnapshot, elapsed: Duration, delivery: DeliveryStatistics?, outcomesWritten: Int, outcomesLost: Int) {
        let seconds = elapsed.inSeconds
        var fields = JSONLine()
        fields.add("entered", s.entered)
        for k in Outcome.Kind.allCases { fields.add(k.rawValue, s.count(k)) }
        fields.add("balanced", s.isBalanced)
        fields.add("elapsed_s", seconds, places: 4)
        fields.add("rate_per_s", seconds > 0 ? Double(s.entered) / seconds : 0, places: 1)
        fields.add("outcomes_written", outcomesWritten)
        if outcomesLost > 0 { fields.add("outcomes_not_written", outcomesLost) }
        if let d = delivery {
            fields.add("connections", d.connections)
            fields.add("error_responses", d.errorResponses)
            fields.add("silent_closes", d.silentCloses)
            fields.add("stalls", d.stalls)
            fields.add("resent", d.resent)
            fields.add("possible_duplicates", d.resentAfterSilentClose)
        }
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

/// Turns SIGINT and SIGTERM into a graceful shutdown; a second signal gives
/// up on what is still held (each such request ends `failed`, the summary is
/// printed); a third ends the process at once.
final class ShutdownSignals: @unchecked Sendable {
    // @unchecked: `sources` is set in init and only read by `cancel`; the
    // count is an atomic; the handlers run on a global queue.
    final class Count: Sendable { let value = Atomic<Int>(0) }
    let sources: [any DispatchSourceSignal]

    /// One handler: a second signal ends the process (status 130).
    convenience init(_ onSignal: @escaping @Sendable () -> Void) {
        self.init(first: onSignal, second: { exit(130) })
    }

    init(first: @escaping @Sendable () -> Void, second: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        let count = Count()
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler {
                switch count.value.add(1, ordering: .relaxed).newValue {
                case 1:
                    writeToStandardError("herald: shutting down, draining in-flight requests (signal again to give up on them)\n")
                    first()
                case 2:
                    writeToStandardError("herald: giving up on what is still in flight (signal again to exit at once)\n")
                    for sig in [SIGINT, SIGTERM] { signal(sig, SIG_DFL) }
                    second()
                default:
                    break
                }
            }
            s.resume()
            sources.append(s)
        }
        self.sources = sources
    }
    func cancel() { for s in sources { s.cancel() } }
}

