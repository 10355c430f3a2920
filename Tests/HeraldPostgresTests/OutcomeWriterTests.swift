import Foundation
import HeraldCore
@testable import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite("The queue's outcome writer while the database refuses its writes", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct OutcomeWriterTests {
    @Test("an outage costs one lease, not one per batch: six batches refused, all given up within about a lease, counted not written, rows left leased for a later claim")
    func outageCostsOneLease() async throws {
        let (cluster, db) = try freshDatabase()
        var configuration = queueConfiguration(cluster, db, lease: .seconds(1))
        configuration.writeBatch = 1
        let queue = PostgresQueue(configuration: configuration, owner: "refused")
        try await queue.migrate()
        #expect(try await queue.enqueue(requestLines(6).lines) == 6)
        let held = try await queue.claim(limit: 6)
        #expect(held.count == 6)
        // From now on every outcome write fails (claims still work).
        _ = try cluster.psql(db, """
            CREATE FUNCTION herald_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER herald_test_refuse BEFORE UPDATE ON notifications FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION herald_test_refuse();
            """)
        let book = LeaseBook()
        for (i, row) in held.enumerated() { book.hold(UInt64(i), row: row.id) }
        let problems = ProblemLog()
        let writer = QueueOutcomeWriter(queue: queue, book: book) { problems.add($0) }
        writer.start()
        writer.observe(held.indices.map { OutcomeRecord(sequence: UInt64($0), line: nil, id: nil, token: nil, outcome: .accepted) })
        let started = ContinuousClock.now
        let report = await writer.finish()
        let elapsed = ContinuousClock.now - started
        #expect(report.notWritten == 6 && report.written == 0, "\(report)")
        #expect(elapsed < .seconds(4), "six batches given up in \(elapsed): one lease (1 s) for the outage, not one per batch (6 s)")
        #expect(problems.all.contains { $0.contains("refused by the test") && $0.contains("giving up") })
        #expect(try tally(cluster, db) == ["leased|-": 6])
        await queue.close()
    }
}
