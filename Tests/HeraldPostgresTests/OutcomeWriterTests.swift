import Foundation
import HeraldCore
@testable import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite("The queue's outcome writer while the database refuses its writes", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct OutcomeWriterTests {
    @Test("an outage costs one lease of retries, not one per batch: six batches refused, the five behind the first given up at their first refusal, counted not written, rows left leased for a later claim")
    func outageCostsOneLease() async throws {
        let (cluster, db) = try await freshDatabase()
        var configuration = queueConfiguration(cluster, db, lease: .seconds(1))
        configuration.writeBatch = 1
        let queue = PostgresQueue(configuration: configuration, owner: "refused")
        try await queue.migrate()
        #expect(try await queue.enqueue(requestLines(6).lines) == 6)
        let held = try await queue.claim(limit: 6)
        #expect(held.count == 6)
        // From now on every outcome write fails (claims still work).
        _ = try await cluster.psql(db, """
            CREATE FUNCTION herald_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER herald_test_refuse BEFORE UPDATE ON notifications FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION herald_test_refuse();
            """)
        let book = LeaseBook()
        for (i, row) in held.enumerated() { book.hold(UInt64(i), row: row.id) }
        let problems = ProblemLog()
        let writer = QueueOutcomeWriter(queue: queue, book: book) { problems.add($0) }
        writer.start()
        writer.observe(held.indices.map { OutcomeRecord(sequence: UInt64($0), line: nil, id: nil, token: nil, outcome: .accepted) })
        let report = await writer.finish()
        #expect(report.notWritten == 6 && report.written == 0, "\(report)")
        // One outage, one lease of retries: once the database has failed for a lease, the batches behind
        // give up at their first refusal instead of each retrying for a lease of its own (counted, not
        // timed, so a loaded machine does not change the answer).
        let retries = problems.all.filter { $0.contains("retrying in") }.count
        let givenUp = problems.all.filter { $0.contains("refused by the test") && $0.contains("giving up") }.count
        #expect(givenUp == 6, "\(problems.all.suffix(8))")
        #expect(retries <= 8, "\(retries) retries for six refused batches: the outage's lease was counted per batch")
        await #expect(try tally(cluster, db) == ["leased|-": 6])
        await queue.close()
    }
}
