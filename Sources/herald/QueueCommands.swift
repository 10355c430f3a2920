import ArgumentParser
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldPostgres
import Logging
import ServiceLifecycle
import Synchronization
import HeraldService

/// `herald enqueue FILE`: JSON Lines requests into the PostgreSQL queue.
struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Put JSON Lines requests into the PostgreSQL queue (the configuration's queue section).",
        discussion: """
            Each non-blank line becomes a queued row holding the line as it is; workers (herald work) \
            decode it when they claim it, so a malformed line ends dropped with its reason. Prints one \
            JSON line: {"enqueued":…,"not_enqueued":…,"elapsed_s":…,"rate_per_s":…}. The schema is \
            migrated first when needed. docs/scale-out.md has the protocol.

            Exit status: 0 every line enqueued; 3 some lines could not be (invalid UTF-8, a NUL byte, too long); 1 Herald could not start or the database failed.

            Example:
              herald enqueue --config herald.json requests.jsonl
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "Configuration file (JSON) with a queue section.")
    var config: String

    @Option(help: "Lines per INSERT.")
    var batch = 5000

    func run() async throws {
        let queue = try await openQueue(config)
        let clock = ContinuousClock()
        let start = clock.now
        let batch = max(1, batch), input = input
        let report = try await running(queue) { queue in try await QueueEnqueuer(queue: queue, batch: batch).enqueue(path: input) }
        let elapsed = (clock.now - start).inSeconds
        var line = JSONLine()
        line.add("enqueued", report.enqueued)
        line.add("not_enqueued", report.notEnqueued)
        if !report.notEnqueuedLines.isEmpty { line.add("not_enqueued_first", report.notEnqueuedLines.joined(separator: "; ")) }
        line.add("elapsed_s", elapsed, places: 4)
        line.add("rate_per_s", elapsed > 0 ? Double(report.enqueued) / elapsed : 0, places: 1)
        line.print()
        if report.notEnqueued > 0 { throw ExitCode(Send.someFailed) }
    }
}

/// `herald work`: the pipeline from the PostgreSQL queue, outcomes written back to it.
struct WorkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Run the pipeline from the PostgreSQL queue: claim rows, send them, write each outcome back to its row.",
        discussion: """
            Any number of workers may run on one database: each claims batches of rows with a lease it \
            renews while they are in flight; a worker that dies leaves its rows to the others once the \
            lease expires (they are then marked possible_duplicate). Idle workers look every poll \
            (0.25 s by default), sooner when herald enqueue or herald serve sends NOTIFY. \
            With --drain the worker stops once nothing is queued or held by another worker; otherwise \
            it runs until SIGTERM or SIGINT (what is in flight drains and is written back). The summary \
            goes to standard error, as with herald send, with a "queue" object: rows written, \
            possible duplicates, outcomes not written because another worker had taken the row over.

            Exit status: as herald send's; 4 also when outcomes could not be written back to the database.

            Examples:
              herald work --config herald.json
              herald work --config herald.json --drain --outcomes outcomes.jsonl
            """
    )

    @Option(help: "Configuration file (JSON) with a queue section and the transport.")
    var config: String

    @Flag(help: "Stop once the queue is empty (nothing queued, nothing held by another worker).")
    var drain = false

    @Option(help: "Also write outcomes as JSON Lines to this file (- for standard output).")
    var outcomes: String?

    @OptionGroup(title: "Logs")
    var logs: LogOptions

    func run() async throws {
        await SignalledServiceGroup.trapSignalsEarly()
        var configuration = try loadConfiguration(config)
        // One file may serve `herald serve` and its workers: the serve section is the service's.
        _ = configuration.root.has("serve")
        // The table holds the outcomes; the JSON Lines stream is only written when asked for.
        if let outcomes { configuration.outcomes = outcomes } else if configuration.outcomesFile == nil { configuration.outcomes = "/dev/null" }
        let logger = logs.logger()
        let queue = try await openQueue(config, configuration: configuration, logger: logs.logger(label: "herald.postgres"))
        // tokens.type "postgres": the token store in the queue's database, shared with every other worker.
        var tokens: PostgresTokenStore?
        if configuration.tokenStoreType == "postgres" {
            do { tokens = try await PostgresTokenStore(queue: queue).start() } catch {
                await queue.close()
                throw SetupError("\(error)")
            }
        }
        let (source, writer) = queue.worker(drain: drain) { problem in writeToStandardError("herald: \(problem)\n") }
        // One service group: the queue, the token store and the outcome writer stop after the pipeline,
        // in reverse order (the writer writes what is left, the store too, then the pool closes).
        let services: [any Service] = [queue] + (tokens.map { [$0] } ?? []) + [writer]
        do {
            try await Send.deliver(
                source, named: "\(queue.configuration)", configuration: configuration, logger: logger, observers: [writer], tokenStore: tokens,
                services: services
            ) {
                let report = writer.report
                var fields = JSONLine()
                if let tokens { fields.add("token_changes_not_written", tokens.changesNotWritten) }
                fields.add("owner", queue.owner)
                fields.add("rows_written", report.written)
                fields.add("possible_duplicates", report.possibleDuplicates)
                fields.add("lease_lost", report.leaseLost)
                fields.add("released", report.released)
                fields.add("not_written", report.notWritten)
                if report.recovered > 0 { fields.add("recovered", report.recovered) }
                return (fields, report.notWritten + report.unmapped)
            }
        } catch {
            // A setup error stops them here; after the group (an exit status) closing again does nothing.
            if let tokens { await tokens.close() }
            await queue.close()
            throw error
        }
    }
}

/// `body`'s result, with `queue` in a service group around it (``SignalledServiceGroup``): the
/// first signal cancels `body`, the queue's connections close after it, whatever happens.
func running<T: Sendable>(_ queue: PostgresQueue, _ body: @escaping @Sendable (PostgresQueue) async throws -> T) async throws -> T {
    let result = Mutex<T?>(nil)
    do {
        try await SignalledServiceGroup.run(
            [queue], main: CommandJob { let r = try await body(queue); result.withLock { $0 = r } },
            logger: Logger(label: "herald", factory: { _ in SwiftLogNoOpLogHandler() }), abandon: {})
    } catch {
        throw SetupError("\(error)")
    }
    guard let r = result.withLock({ $0 }) else { throw SetupError("interrupted") }
    return r
}

/// The queue of the configuration at `path`, its schema migrated; `logger` gets the connection pool's events (`--log-level debug`).
func openQueue(_ path: String, configuration: HeraldConfiguration? = nil, logger: Logger? = nil) async throws -> PostgresQueue {
    let queueConfiguration: PostgresQueueConfiguration
    do {
        let root = try configuration?.root ?? ConfigNode.load(path: path)
        queueConfiguration = try PostgresQueueConfiguration.load(try root.child("queue"))
    } catch {
        throw SetupError("\(error)")
    }
    let queue = PostgresQueue(configuration: queueConfiguration, logger: logger).start()
    do {
        try await queue.migrate()
    } catch {
        await queue.close()
        throw SetupError("\(error)")
    }
    return queue
}
