import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldPostgres

/// Issue 28, item 2: idle workers share a backlog. A claim that finds nothing
/// while another worker is claiming (its claims skip the rows that claim
/// holds) used to wait a whole `poll` (1 s by default) for a `NOTIFY` that only
/// inserts send: with rows already queued, one of two draining workers wrote
/// nearly all of them.
@Suite("Workers share a queued backlog", .serialized, .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct SharedBacklogTests {
    @Test("two workers draining 40,000 queued rows with the default poll (1 s): each writes 30-70% of them, in each of 3 trials")
    func twoDrainsShare() async throws {
        for trial in 0..<3 {
            let (cluster, db) = try await freshDatabase()
            var c = queueConfiguration(cluster, db)
            c.batch = PostgresQueueConfiguration().batch
            c.poll = PostgresQueueConfiguration().poll
            let a = PostgresQueue(configuration: c, owner: "worker-a").start()
            let b = PostgresQueue(configuration: c, owner: "worker-b").start()
            try await a.migrate()
            let lines = requestLines(40_000).lines
            for chunk in stride(from: 0, to: lines.count, by: 10_000) {
                _ = try await a.enqueue(Array(lines[chunk ..< min(chunk + 10_000, lines.count)]))
            }
            async let runA = drainWorker(a)
            async let runB = drainWorker(b)
            let (ra, rb) = try await (runA, runB)
            await a.close()
            await b.close()
            #expect(ra.report.written + rb.report.written == 40_000, "trial \(trial)")
            let share = Double(ra.report.written) / 40_000
            #expect((0.3...0.7).contains(share), "trial \(trial): worker a wrote \(ra.report.written), worker b \(rb.report.written)")
            await #expect(try tally(cluster, db) == ["done|accepted": 40_000])
        }
    }

    // Processes as an operator starts them, with the defaults (batch 2,000, poll 0.25 s); shares and
    // pauses depend on the machine being otherwise quiet: run apart by .ci/run (HERALD_TIMING_APART=1
    // skips them in the parallel run).
    @Test("two herald work --drain processes on 100,000 queued rows: each writes 35-65% of them, in each of 10 trials",
          .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: shares of a shared machine"))
    func twoDrainProcesses() async throws {
        for trial in 0..<10 {
            let (cluster, db, config) = try await queuedRows(100_000)
            async let a = runHerald(["work", "--config", config, "--drain"])
            async let b = runHerald(["work", "--config", config, "--drain"])
            let (ra, rb) = try await (a, b)
            #expect(ra.status == 0 && rb.status == 0, "\(ra.stderr.suffix(300)) \(rb.stderr.suffix(300))")
            let shares = try await cluster.psql(db, "SELECT string_agg(n::text, ',' ORDER BY n) FROM (SELECT sum(cardinality(ids)) AS n FROM herald_outcomes GROUP BY owner) o")
            let counts = shares.split(separator: ",").compactMap { Int($0) }
            print("two drains, trial \(trial): \(counts)")
            #expect(counts.count == 2 && counts.reduce(0, +) == 100_000 && counts.allSatisfy { (35_000...65_000).contains($0) }, "trial \(trial): rows written by each worker: \(shares)")
            await #expect(try tally(cluster, db) == ["done|accepted": 100_000], "trial \(trial)")
        }
    }

    @Test("a lone herald work --drain on 100,000 queued rows never pauses: no gap over 100 ms between two outcome writes, in each of 3 trials",
          .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func loneDrainNeverPauses() async throws {
        for trial in 0..<3 {
            let (cluster, db, config) = try await queuedRows(100_000)
            let r = try await runHerald(["work", "--config", config, "--drain"])
            #expect(r.status == 0, "\(r.stderr.suffix(300))")
            // Each write's time is its transaction's start (finished_at's default, now()).
            let gaps = try await cluster.psql(db, """
                SELECT round(max(extract(epoch FROM gap)) * 1000), count(*) + 1
                FROM (SELECT finished_at - lag(finished_at) OVER (ORDER BY finished_at) AS gap FROM herald_outcomes) g WHERE gap IS NOT NULL
                """).split(separator: "|")
            let longest = Double(gaps.first ?? "") ?? .infinity
            // Where the longest gaps fell: rows written before each, and the size of the write after it.
            let worst = try await cluster.psql(db, """
                SELECT string_agg(format('%s ms after %s rows (then %s)', round(gap * 1000), before, n), '; ' ORDER BY gap DESC)
                FROM (SELECT extract(epoch FROM finished_at - lag(finished_at) OVER w) AS gap,
                             coalesce(sum(cardinality(ids)) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before,
                             cardinality(ids) AS n
                      FROM herald_outcomes WINDOW w AS (ORDER BY finished_at) ORDER BY gap DESC NULLS LAST LIMIT 4) g
                """)
            print("lone drain, trial \(trial): longest gap between outcome writes \(longest) ms over \(gaps.last ?? "?") writes (\(try heraldExecutable().path)); longest: \(worst)")
            #expect(longest <= 100, "trial \(trial): \(longest) ms between two outcome writes")
            await #expect(try tally(cluster, db) == ["done|accepted": 100_000], "trial \(trial)")
        }
    }

    /// A fresh database with `n` rows queued, and a configuration file naming it with every queue
    /// setting at its default (the simulator as transport).
    func queuedRows(_ n: Int) async throws -> (PostgresCluster, String, String) {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db)).start()
        try await queue.migrate()
        let lines = requestLines(n).lines
        for chunk in stride(from: 0, to: lines.count, by: 10_000) {
            _ = try await queue.enqueue(Array(lines[chunk ..< min(chunk + 10_000, lines.count)]))
        }
        await queue.close()
        return (cluster, db, try queueConfigurationFile(cluster, db))
    }
}
