import ArgumentParser
import HeraldJSON
import HeraldPostgres

/// `herald prune`: the queue's retention of finished rows.
struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete the PostgreSQL queue's rows finished longer ago than --older-than (retention).",
        discussion: """
            Finished rows keep each notification's outcome until pruned; queued and leased rows are never \
            touched. Deletes in short transactions of --chunk rows, so workers go on meanwhile. Run it from \
            cron (or any scheduler) with the retention you want. Prints one JSON line: {"deleted":…}.

            Example:
              herald prune --config herald.json --older-than 7d
            """
    )

    @Option(help: "Configuration file (JSON) with a queue section.")
    var config: String

    @Option(help: "Age of the finished rows to delete: a number with s, m, h or d (e.g. 36h, 7d).")
    var olderThan: Age

    @Option(help: "Rows per DELETE.")
    var chunk = 10_000

    struct Age: ExpressibleByArgument {
        let duration: Duration
        init?(argument: String) {
            // At most 100 years: a bigger number is a mistake, not a retention.
            guard let unit = argument.last, let n = Int(argument.dropLast()), n >= 0, n <= 100 * 365 * 86_400 else { return nil }
            switch unit {
            case "s": duration = .seconds(n)
            case "m": duration = .seconds(n * 60)
            case "h": duration = .seconds(n * 3600)
            case "d": duration = .seconds(n * 86_400)
            default: return nil
            }
        }
    }

    func run() async throws {
        let queue = try await openQueue(config)
        let age = olderThan.duration, chunk = max(1, chunk)
        let deleted = try await running(queue) { queue in try await queue.prune(finishedBefore: age, chunk: chunk) }
        var line = JSONLine()
        line.add("deleted", deleted)
        line.print()
    }
}
