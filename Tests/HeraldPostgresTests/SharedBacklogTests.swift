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
}
