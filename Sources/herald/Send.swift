import ArgumentParser
@preconcurrency import Dispatch
import HeraldBinary
import HeraldCore
import HeraldKit
#if canImport(Glibc)
import Glibc
#endif

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send JSON Lines requests through the pipeline; print one outcome per request.",
        discussion: """
            With no configuration, requests go to the in-memory APNs simulator. Outcomes go to \
            standard output (or --outcomes FILE) as JSON Lines; a summary goes to standard error.
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

        let writer: OutcomeWriter
        do { writer = try OutcomeWriter(path: configuration.outcomes) } catch { throw SetupError("cannot write outcomes: \(error)") }
        let ledger = OutcomeLedger(observers: [writer])
        let pipeline: Pipeline
        let transport: any Transport
        do {
            let assembly = try HeraldAssembly.configured(configuration)
            transport = try assembly.transport()
            pipeline = try assembly.makePipeline(source: JSONLinesSource(path: input), ledger: ledger, transport: transport)
        } catch {
            throw SetupError("\(error)")
        }
        let signals = ShutdownSignals { pipeline.shutdown() }
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
        printSummary(snapshot, elapsed: elapsed, delivery: delivery)
        if let failure {
            if case PipelineError.sourceFailed(let e, _) = failure, snapshot.entered == 0 {
                throw SetupError("cannot read \(input): \(e)")
            }
            throw SetupError("\(failure)")
        }
    }

    /// One JSON line on standard error; with a binary-interface transport, what
    /// its connections did, including `possible_duplicates`: notifications
    /// written again after a connection closed with no answer, the only ones a
    /// device may have received twice.
    func printSummary(_ s: LedgerSnapshot, elapsed: Duration, delivery: DeliveryStatistics?) {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(s.entered) / seconds : 0
        var line = "{\"summary\":{\"entered\":\(s.entered)"
        for k in Outcome.Kind.allCases { line += ",\"\(k.rawValue)\":\(s.count(k))" }
        line += ",\"balanced\":\(s.isBalanced),\"elapsed_s\":\(rounded(seconds, 4)),\"rate_per_s\":\(rounded(rate, 1))"
        if let d = delivery {
            line += ",\"connections\":\(d.connections),\"error_responses\":\(d.errorResponses),\"silent_closes\":\(d.silentCloses)"
            line += ",\"stalls\":\(d.stalls),\"resent\":\(d.resent),\"possible_duplicates\":\(d.resentAfterSilentClose)"
        }
        line += "}}\n"
        printError(line)
    }
}

func rounded(_ x: Double, _ places: Int) -> String {
    var m = 1.0
    for _ in 0..<places { m *= 10 }
    return String((x * m).rounded() / m)
}

/// A setup error: printed plainly, exit code 1.
struct SetupError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Turns SIGINT and SIGTERM into a graceful shutdown (a second signal exits at once).
final class ShutdownSignals: @unchecked Sendable {
    let sources: [any DispatchSourceSignal]
    init(_ onSignal: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler {
                printError("herald: shutting down, draining in-flight requests (signal again to abort)\n")
                signal(sig, SIG_DFL)
                onSignal()
            }
            s.resume()
            sources.append(s)
        }
        self.sources = sources
    }
    func cancel() { for s in sources { s.cancel() } }
}

/// Writes to standard error.
func printError(_ s: String) {
    var s = s
    s.withUTF8 { buf in _ = write(2, buf.baseAddress, buf.count) }
}
