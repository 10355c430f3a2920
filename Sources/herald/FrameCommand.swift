import ArgumentParser
import HeraldBinary
import HeraldCore
import HeraldJSON
import HeraldKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `herald frame`: the bytes each request becomes on the binary interface.
struct FrameCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frame",
        abstract: "Print each request's binary-interface frame as lowercase hex, one per line.",
        discussion: """
            Requests (JSON Lines) go through the configured localize, payload and size stages, then \
            the frame stage in the chosen format. The identifier is the request's "id" (else its \
            sequence number), the expiry its "expiry" (else 0), the priority its "priority" (else 10, \
            or 5 for a content-available-only payload). A request that cannot be framed prints no \
            line; its reason goes to standard error as a JSON line and the exit code is 1.

            Examples:
              herald frame --format enhanced requests.jsonl
              herald frame requests.jsonl | herald decode
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "simple (command 0), enhanced (command 1) or frame (command 2).")
    var format: NotificationFormat?

    @OptionGroup(title: "Localization")
    var localization: LocalizationOptions

    @Option(help: "Configuration file (JSON), for the payload limit and localization.")
    var config: String?

    func run() async throws {
        var configuration = try loadConfiguration(config)
        localization.apply(to: &configuration)
        if let format { configuration.frameFormat = format }
        // The configured transport is not used here: its options are not this command's to check.
        for (key, _) in configuration.transportOptions.object { _ = configuration.transportOptions.has(key) }
        let problems = ProblemPrinter()
        let ledger = OutcomeLedger(observers: [problems])
        let printer = HexFramePrinter()
        let pipeline: Pipeline
        do {
            pipeline = try HeraldAssembly(configuration: configuration)
                .makePipeline(source: JSONLinesSource(path: input), ledger: ledger, transport: printer)
        } catch {
            throw SetupError("\(error)")
        }
        do {
            try await pipeline.run()
        } catch {
            try? printer.flush()
            throw SetupError("\(error)")
        }
        try printer.flush()
        if problems.count > 0 { throw ExitCode(1) }
    }
}

/// The frame command's "transport": prints each frame as hex and accepts it.
final class HexFramePrinter: Transport {
    let out = Mutex<[UInt8]>([])

    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var records: [OutcomeRecord] = []
        try out.withLock { (buf) throws(IOError) in
            for e in batch {
                guard let f = e.frame else {
                    records.append(e.record(.failed("no frame")))
                    continue
                }
                Hex.append(f.bytes, to: &buf)
                buf.append(0x0A)
                records.append(e.record(.accepted))
            }
            if buf.count > 1 << 16 { try writeAll(1, &buf, to: "standard output") }
        }
        outcomes.record(records)
    }

    func finish(outcomes: OutcomeLedger) async {
        do { try flush() } catch { writeToStandardError("herald: cannot write: \(error)\n") }
    }

    func flush() throws(IOError) { try out.withLock { (buf) throws(IOError) in try writeAll(1, &buf, to: "standard output") } }
}

/// Prints every outcome other than `accepted` to standard error, as JSON Lines.
final class ProblemPrinter: OutcomeObserver {
    let seen = Atomic<Int>(0)
    var count: Int { seen.load(ordering: .relaxed) }
    func observe(_ records: [OutcomeRecord]) {
        var buf: [UInt8] = []
        for r in records where r.outcome != .accepted {
            seen.add(1, ordering: .relaxed)
            buf += OutcomeWriter.line(r)
            buf.append(0x0A)
        }
        if !buf.isEmpty { writeToStandardError(String(decoding: buf, as: UTF8.self)) }
    }
}
