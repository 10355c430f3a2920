import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldPostgres

/// Issue 28, item 4: most production PostgreSQL sits behind PgBouncer. In transaction pooling a
/// client's consecutive statements may run on different server sessions, so nothing may rely on a
/// session: named prepared statements, `LISTEN`, startup parameters. With `pooling` "transaction"
/// Herald relies on none of them (docs/scale-out.md, "Behind PgBouncer").
@Suite("The queue behind PgBouncer (Debian's), in transaction pooling", .serialized,
       .enabled(if: PostgresCluster.binaries != nil && PgBouncer.binary != nil, Comment(rawValue: PgBouncer.absent)))
struct PgBouncerTests {
    @Test("two server sessions shared by every client: rows enqueued by COPY and by INSERT, two workers in process and herald work --drain, all through PgBouncer: every row sent exactly once")
    func transactionPooling() async throws {
        let (cluster, db) = try await freshDatabase()
        let bouncer = try PgBouncer(before: cluster, poolMode: "transaction", poolSize: 2)
        defer { bouncer.stop() }
        var c = queueConfiguration(cluster, db, batch: 300)
        c.port = bouncer.port
        c.pooling = .transaction
        let a = PostgresQueue(configuration: c, owner: "worker-a").start()
        let b = PostgresQueue(configuration: c, owner: "worker-b").start()
        try await a.migrate()
        let lines = requestLines(6_000).lines
        #expect(try await a.enqueue(Array(lines.prefix(5_000))) == 5_000)
        for chunk in stride(from: 5_000, to: 6_000, by: 100) {
            #expect(try await b.enqueueReturningIDs(Array(lines[chunk ..< chunk + 100])).count == 100)
        }
        async let runA = drainWorker(a)
        async let runB = drainWorker(b)
        let (ra, rb) = try await (runA, runB)
        await a.close()
        await b.close()
        #expect(ra.report.written + rb.report.written == 6_000 && ra.report.possibleDuplicates + rb.report.possibleDuplicates == 0,
                "\(ra.report) \(rb.report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 6_000])

        // As an operator runs it: herald enqueue, then two herald work --drain, each its own process.
        let config = try queueConfigurationFile(cluster, db, port: bouncer.port, settings: #","pooling":"transaction","batch":500"#)
        let file = temporaryDirectory() + "/requests.jsonl"
        try (requestLines(10_000).lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let enqueue = try await runHerald(["enqueue", "--config", config, file])
        #expect(enqueue.status == 0, "\(enqueue.stderr)")
        async let workA = runHerald(["work", "--config", config, "--drain"])
        async let workB = runHerald(["work", "--config", config, "--drain"])
        let (wa, wb) = try await (workA, workB)
        #expect(wa.status == 0 && wb.status == 0, "\(wa.stderr.suffix(500)) \(wb.stderr.suffix(500)) \(bouncer.log.suffix(1000))")
        await #expect(try tally(cluster, db) == ["done|accepted": 16_000])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1 OR possible_duplicate") == "0")
    }

    @Test("without pooling \"transaction\", PgBouncer refuses the session setting the claim relies on: herald work stops at start naming the setting, pooling and the docs, instead of waiting on a pool that never connects")
    func sessionSettingRefused() async throws {
        let (cluster, db) = try await freshDatabase()
        let bouncer = try PgBouncer(before: cluster, poolMode: "transaction", poolSize: 2)
        defer { bouncer.stop() }
        let config = try queueConfigurationFile(cluster, db, port: bouncer.port)
        let clock = ContinuousClock(), start = clock.now
        let work = try await runHerald(["work", "--config", config, "--drain"], timeout: 30)
        #expect(work.status == 1 && clock.now - start < .seconds(10), "status \(work.status) after \(clock.now - start)")
        #expect(work.stderr.contains("plan_cache_mode") && work.stderr.contains("\"pooling\" to \"transaction\"") && work.stderr.contains("Behind PgBouncer"),
                "\(work.stderr.suffix(600))")
    }
}
