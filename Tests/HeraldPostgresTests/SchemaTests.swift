import Foundation
import HeraldCore
import HeraldJSON
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite("The queue's schema: versioned migrations on a real PostgreSQL", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct SchemaTests {
    @Test("from an empty database to the newest version; a second run changes nothing")
    func fromEmptyThenIdempotent() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db)).start()
        let first = try await queue.migrate()
        let second = try await queue.migrate()
        await queue.close()
        #expect(first == QueueSchema.Result(from: 0, to: QueueSchema.latestVersion))
        #expect(second == QueueSchema.Result(from: QueueSchema.latestVersion, to: QueueSchema.latestVersion))
        let versions = try await cluster.psql(db, "SELECT string_agg(version::text, ',' ORDER BY version) FROM herald_schema")
        #expect(versions == QueueSchema.migrations.map { "\($0.version)" }.joined(separator: ","))
        // The table and its indexes are there; no trigger since version 10 (docs/scale-out.md, "Waking workers").
        let indexes = try await cluster.psql(db, "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'notifications'")
        #expect(indexes == "notifications_order,notifications_pkey")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'notifications'::regclass AND NOT tgisinternal") == "0")
    }

    @Test("version 7: a write's group of 1,000 ids is stored uncompressed, in its row; the group reads back whole")
    func outcomeArraysUncompressed() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db, batch: 1000)).start()
        try await queue.migrate()
        #expect(try await queue.enqueue(requestLines(1000).lines) == 1000)
        let rows = try await claimSoon(queue, limit: 1000)
        #expect(rows.count == 1000 && Set(rows.map(\.lease)).count == 1)
        let result = try await queue.finish(finished(rows, Array(repeating: .accepted, count: rows.count)), completing: [rows[0].lease])
        #expect(result.written == 1000)
        // pg_column_compression is null for a value stored uncompressed; the toast table stays empty.
        let stored = try await cluster.psql(db, """
            SELECT count(*), count(pg_column_compression(ids)), sum(cardinality(ids)),
                   (SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'herald_outcomes')
            FROM herald_outcomes
            """)
        #expect(stored == "1|0|1000|0")
        await #expect(try tally(cluster, db) == ["done|accepted": 1000])
        await queue.close()
    }

    @Test("workers starting together apply each migration once")
    func concurrentStart() async throws {
        let (cluster, db) = try await freshDatabase()
        let queues = (0..<4).map { _ in PostgresQueue(configuration: queueConfiguration(cluster, db)).start() }
        let results = try await withThrowingTaskGroup(of: QueueSchema.Result.self) { group in
            for q in queues { group.addTask { try await q.migrate() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for q in queues { await q.close() }
        #expect(results.filter { $0.from == 0 }.count == 1, "\(results)")
        #expect(results.allSatisfy { $0.to == QueueSchema.latestVersion })
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_schema") == "\(QueueSchema.migrations.count)")
    }

    @Test("a queue at version 4 moves to version 5 with every row where it was: finished rows keep their outcomes, leased ones are taken back as a second attempt (marked), queued ones are sent once, and so is a row a transaction older than the migration inserts after it")
    func fromVersion4() async throws {
        let (cluster, db) = try await freshDatabase()
        // Version 4 as an older herald left it: three rows done, two leased (their worker stopped for
        // the upgrade), five queued.
        var setup = schema(at: 4)
        setup += requestLines(10).lines.map { "INSERT INTO notifications (body) VALUES ($b$\($0)$b$);\n" }.joined()
        setup += """
            UPDATE notifications SET state = 'done', outcome = 'rejected', status = 8, reason = 'invalid token', attempts = 1,
                lease_owner = 'old', finished_at = now() WHERE id <= 3;
            UPDATE notifications SET state = 'leased', attempts = 1, lease_owner = 'old', lease_expires = now() + interval '1 hour',
                claim_token = 7 WHERE id IN (4, 5);
            """
        try await cluster.psql(db, setup)

        // A transaction that took its id before the migration and inserts a row after it: its row must
        // not fall behind the cursor the migration sets.
        let late = straggler(cluster, db, inserting: requestLines(11).lines[10])
        try await Task.sleep(for: .milliseconds(500))

        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db), owner: "new").start()
        #expect(try await queue.migrate() == QueueSchema.Result(from: 4, to: QueueSchema.latestVersion))
        _ = try await late.value
        await #expect(try tally(cluster, db) == ["done|rejected": 3, "leased|-": 2, "queued|-": 6])
        await #expect(try cluster.psql(db, "SELECT string_agg(DISTINCT status || ':' || reason || ':' || lease_owner, ',') FROM herald_rows WHERE id <= 3")
            == "8:invalid token:old")
        let run = try await drainWorker(queue)
        await queue.close()
        #expect(run.report.written == 8 && run.report.possibleDuplicates == 2 && run.snapshot.isBalanced, "\(run.report)")
        await #expect(try tally(cluster, db) == ["done|rejected": 3, "done|accepted": 8])
        await #expect(try cluster.psql(db, "SELECT string_agg(id || ':' || attempts || ':' || possible_duplicate, ',' ORDER BY id) FROM herald_rows")
            == "1:1:false,2:1:false,3:1:false,4:2:true,5:2:true,6:1:false,7:1:false,8:1:false,9:1:false,10:1:false,11:1:false")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
    }

    @Test("a queue at version 8 moves to version 9 (claims by snapshot): leases keep their ranges, rows after the old cursor are queued, a transaction open across the migration is sent once, every row once")
    func fromVersion8() async throws {
        let (cluster, db) = try await freshDatabase()
        // Version 8 as an older herald left it: rows 1-10 from one transaction; lease 1 (rows 1-4, a
        // range) expired, its worker gone after writing row 1's outcome; lease 2 (rows 5 and 6) expired
        // unwritten; the cursor after row 6; rows 7-10 queued after it.
        var setup = schema(at: 8)
        setup += requestLines(10).lines.map { "INSERT INTO notifications (body) VALUES ($b$\($0)$b$);\n" }.joined()
        setup += """
            INSERT INTO herald_leases (lo_xid, lo_id, hi_xid, hi_id, owner, expires, attempts)
            SELECT xid, 0, xid, 4, 'old', '-infinity'::timestamptz, 1 FROM notifications WHERE id = 1
            UNION ALL SELECT xid, 4, xid, 6, 'old', '-infinity', 1 FROM notifications WHERE id = 1;
            INSERT INTO herald_outcomes (lease, first_id, ids, outcome, attempts, owner) VALUES (1, 1, '{1}', 'accepted', 1, 'old');
            UPDATE herald_cursor SET xid = (SELECT xid FROM notifications WHERE id = 6), id = 6;
            """
        try await cluster.psql(db, setup)

        // A transaction that took its id before the migration and inserts a row after it.
        let late = straggler(cluster, db, inserting: requestLines(11).lines[10])
        try await Task.sleep(for: .milliseconds(500))

        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db), owner: "new").start()
        #expect(try await queue.migrate() == QueueSchema.Result(from: 8, to: QueueSchema.latestVersion))
        _ = try await late.value
        await #expect(try tally(cluster, db) == ["done|accepted": 1, "leased|-": 5, "queued|-": 5])
        #expect(try await queue.queuedCount() == 5)
        let run = try await drainWorker(queue)
        await queue.close()
        #expect(run.report.written == 10 && run.report.possibleDuplicates == 5 && run.snapshot.isBalanced, "\(run.report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 11])
        await #expect(try cluster.psql(db, "SELECT string_agg(id || ':' || attempts || ':' || possible_duplicate, ',' ORDER BY id) FROM herald_rows")
            == "1:1:false,2:2:true,3:2:true,4:2:true,5:2:true,6:2:true,7:1:false,8:1:false,9:1:false,10:1:false,11:1:false")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
    }

    @Test("a queue at version 11 moves to version 12 (lanes): its rows and leases are the fast lane's, a transaction open across the migration is sent once, new rows go in their lanes, every row once")
    func fromVersion11() async throws {
        let (cluster, db) = try await freshDatabase()
        // Version 11 as an older herald left it: rows 1-10 from one transaction; lease 1 (rows 1-4)
        // expired, its worker gone after writing row 1's outcome; lease 2 (rows 5 and 6) expired
        // unwritten; rows 7-10 after the cursor.
        // The rows in a transaction after the schema's: one that inserted them before it took the
        // cursor's snapshot would find itself in it (a snapshot does not list its own transaction
        // as running), and its rows already claimed, whenever a later transaction had ended first.
        try await cluster.psql(db, schema(at: 11))
        try await cluster.psql(db, requestLines(10).lines.map { "INSERT INTO notifications (body) VALUES ($b$\($0)$b$);\n" }.joined())
        try await cluster.psql(db, commands: [
            "SELECT * FROM herald_claim_lease('old', 30, 1, 4)",
            "SELECT * FROM herald_claim_lease('old', 30, 2, 2)",
            "UPDATE herald_leases SET expires = '-infinity'",
            "INSERT INTO herald_outcomes (lease, first_id, ids, outcome, attempts, owner) VALUES (1, 1, '{1}', 'accepted', 1, 'old')",
        ])
        let before = try await tally(cluster, db)
        let leases = try await cluster.psql(db, "SELECT lease, lo_xid, lo_id, hi_xid, hi_id, lo_snap, hi_snap FROM herald_leases")
        #expect(before == ["done|accepted": 1, "leased|-": 5, "queued|-": 4], "\(before): \(leases)")

        // A transaction that took its id before the migration and inserts a row after it.
        let late = straggler(cluster, db, inserting: requestLines(11).lines[10])
        try await Task.sleep(for: .milliseconds(500))

        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db), owner: "new").start()
        #expect(try await queue.migrate() == QueueSchema.Result(from: 11, to: QueueSchema.latestVersion))
        _ = try await late.value
        await #expect(try tally(cluster, db) == ["done|accepted": 1, "leased|-": 5, "queued|-": 5])
        // Three rows of a campaign and two alerts, after the migration.
        _ = try await queue.enqueue((11..<16).map { i in
            #"{"id":\#(i),"token":"\#(goodToken)","alert":"n\#(i)"\#(i < 14 ? #","priority":5"# : "")}"#
        })
        #expect(try await queue.queuedCount() == 10)
        await #expect(try cluster.psql(db, "SELECT string_agg(lane::text, ',' ORDER BY id) FROM notifications WHERE id > 11") == "bulk,bulk,bulk,fast,fast")
        let run = try await drainWorker(queue)
        await queue.close()
        #expect(run.report.written == 15 && run.report.possibleDuplicates == 5 && run.snapshot.isBalanced, "\(run.report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 16])
        await #expect(try cluster.psql(db, "SELECT string_agg(id || ':' || attempts || ':' || possible_duplicate, ',' ORDER BY id) FROM herald_rows WHERE id <= 11")
            == "1:1:false,2:2:true,3:2:true,4:2:true,5:2:true,6:2:true,7:1:false,8:1:false,9:1:false,10:1:false,11:1:false")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
    }

    @Test("a queue at version 5 moves to version 6: each outcome becomes a group of one under the lease holding its row, so a claim taking that lease over sends only the rows without one")
    func fromVersion5() async throws {
        let (cluster, db) = try await freshDatabase()
        // Version 5 as an older herald left it: lease 1 (rows 1–4) expired, its worker gone after
        // writing the outcomes of rows 1 and 2; rows 5–8 in a lease no one holds; rows 9 and 10 after the cursor.
        var setup = schema(at: 5)
        setup += requestLines(10).lines.map { "INSERT INTO notifications (body) VALUES ($b$\($0)$b$);\n" }.joined()
        setup += """
            INSERT INTO herald_leases (ids, owner, expires, attempts) VALUES ('{1,2,3,4}', 'old', '-infinity', 1), ('{5,6,7,8}', '', '-infinity', 0);
            INSERT INTO herald_outcomes (id, outcome, apns_id, attempts, owner) VALUES (1, 'accepted', 'apns-1', 1, 'old'), (2, 'accepted', NULL, 1, 'old');
            UPDATE herald_cursor SET xid = (SELECT xid FROM notifications WHERE id = 8), id = 8;
            """
        try await cluster.psql(db, setup)

        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db), owner: "new").start()
        #expect(try await queue.migrate() == QueueSchema.Result(from: 5, to: QueueSchema.latestVersion))
        await #expect(try tally(cluster, db) == ["done|accepted": 2, "leased|-": 2, "queued|-": 6])
        await #expect(try cluster.psql(db, "SELECT string_agg(lease || ':' || first_id || ':' || coalesce(array_to_string(apns_ids, ','), '-'), ',' ORDER BY first_id) FROM herald_outcomes")
            == "1:1:apns-1,1:2:-")
        let first = try await queue.row(1)
        #expect(first?.state == "done" && first?.apnsID == "apns-1" && first?.attempts == 1, "\(String(describing: first))")
        #expect(try await queue.row(3)?.state == "leased")
        let run = try await drainWorker(queue)
        #expect(run.report.written == 8 && run.report.possibleDuplicates == 2 && run.snapshot.isBalanced, "\(run.report)")
        let after = try await queue.row(7)
        #expect(after?.state == "done" && after?.outcome == "accepted" && after?.attempts == 1, "\(String(describing: after))")
        #expect(try await queue.row(11) == nil)
        await queue.close()
        await #expect(try tally(cluster, db) == ["done|accepted": 10])
        await #expect(try cluster.psql(db, "SELECT string_agg(id || ':' || attempts || ':' || possible_duplicate, ',' ORDER BY id) FROM herald_rows")
            == "1:1:false,2:1:false,3:2:true,4:2:true,5:1:false,6:1:false,7:1:false,8:1:false,9:1:false,10:1:false")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
    }

    @Test("a database migrated by a newer herald is refused, naming both versions and the database")
    func newerSchemaRefused() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db)).start()
        try await queue.migrate()
        let newer = QueueSchema.latestVersion + 1
        try await cluster.psql(db, "INSERT INTO herald_schema (version, description) VALUES (\(newer), 'from the future')")
        await #expect {
            try await queue.migrate()
        } throws: { error in
            let text = "\(error)"
            // The refusal as it is, not wrapped in the transaction's error (its file, line and Optional(…)).
            return text.contains("version \(newer)") && text.contains("newer than this herald knows (\(QueueSchema.latestVersion))")
                && text.contains("/\(db)") && !text.contains("PostgresTransactionError") && !text.contains("Optional(")
        }
        await queue.close()
    }

    @Test("an unreachable server is an error naming where, not a hang")
    func unreachable() async throws {
        var c = PostgresQueueConfiguration()
        c.port = try freePort()
        c.database = "nowhere"
        c.connectTimeout = .milliseconds(500)
        let queue = PostgresQueue(configuration: c).start()
        await #expect {
            try await queue.migrate()
        } throws: { error in
            "\(error)".contains("postgres://herald@127.0.0.1:\(c.port)/nowhere") && "\(error)".contains("migrating")
        }
        await queue.close()
    }
}

@Suite("The queue section of the configuration")
struct QueueConfigurationTests {
    func load(_ json: String) throws -> PostgresQueueConfiguration {
        let node = ConfigNode(file: "herald.json", object: try JSONParser.parse(Array(json.utf8)).objectValue!)
        let c = try PostgresQueueConfiguration.load(try node.child("queue"))
        try node.finish()
        return c
    }

    @Test("every key read; the password from a file, its newline dropped, and never in the description")
    func keys() throws {
        let file = try temporaryFile("s3cret-pw\n", suffix: ".txt")
        let c = try load(
            #"{"queue":{"type":"postgres","host":"db","port":6543,"user":"u","database":"d","passwordFile":"\#(file)","lease":2.5,"poll":0.2,"batch":64,"writeBatch":128,"answerTimeout":7}}"#)
        #expect(c.host == "db" && c.port == 6543 && c.user == "u" && c.database == "d" && c.password == "s3cret-pw")
        #expect(c.lease == .milliseconds(2500) && c.poll == .milliseconds(200) && c.batch == 64 && c.writeBatch == 128)
        #expect(c.answerTimeout == .seconds(7) && PostgresQueueConfiguration().answerTimeout == .seconds(60))
        #expect(c.description == "postgres://u@db:6543/d" && !"\(c)".contains("s3cret"))
    }

    @Test("tls: verify-full by default away from loopback, disable on it; either when named")
    func tlsDefaults() throws {
        #expect(try load(#"{"queue":{"type":"postgres","host":"db.example.com"}}"#).tls == .verifyFull)
        #expect(try load(#"{"queue":{"type":"postgres","host":"127.0.0.1"}}"#).tls == .disable)
        #expect(try load(#"{"queue":{"type":"postgres"}}"#).tls == .disable)
        #expect(try load(#"{"queue":{"type":"postgres","host":"db.example.com","tls":"disable"}}"#).tls == .disable)
        let c = try load(#"{"queue":{"type":"postgres","host":"::1","tls":"verify-full","caFile":"/etc/hosts","serverName":"db"}}"#)
        #expect(c.tls == .verifyFull && c.caFile == "/etc/hosts" && c.serverName == "db")
    }

    @Test(
        "mistakes name the key",
        arguments: [
            (#"{"queue":{"host":"db"}}"#, "queue.type: required"),
            (#"{"queue":{"type":"redis"}}"#, #"queue.type: must be one of "postgres""#),
            (#"{"queue":{"type":"postgres","lease":0}}"#, "queue.lease: must be from 1.0 to 86400.0 seconds"),
            (#"{"queue":{"type":"postgres","answerTimeout":0.5}}"#, "queue.answerTimeout: must be from 1.0 to 3600.0 seconds"),
            (#"{"queue":{"type":"postgres","passwordEnv":"HERALD_TEST_NO_SUCH_VARIABLE"}}"#, "queue.passwordEnv: the environment variable HERALD_TEST_NO_SUCH_VARIABLE is not set"),
            (#"{"queue":{"type":"postgres","passwordFile":"/nonexistent/pw","passwordEnv":"X"}}"#, "queue.passwordFile: give passwordFile or passwordEnv, not both"),
            (#"{"queue":{"type":"postgres","hots":"db"}}"#, "queue.hots: unknown key"),
            (#"{"queue":{"type":"postgres","tls":"prefer"}}"#, #"queue.tls: must be one of "disable""#),
            (#"{"queue":{"type":"postgres","tls":"disable","caFile":"/etc/hosts"}}"#, #"queue.caFile: is for "tls": "verify-full""#),
            (#"{"queue":{"type":"postgres","tls":"verify-full","caFile":"/nonexistent/ca.pem"}}"#, "queue.caFile: cannot read /nonexistent/ca.pem"),
        ])
    func mistakes(json: String, message: String) throws {
        #expect(throws: ConfigError.self) { try load(json) }
        do { _ = try load(json) } catch { #expect("\(error)".contains(message), "\(error)") }
    }
}

/// SQL that brings an empty database to schema `version`, as the herald of that version left it.
/// A transaction that takes its xid now and inserts `line` 1.5 s later, once a migration started
/// meanwhile has locked the table: its row must be neither lost nor sent twice.
private func straggler(_ cluster: PostgresCluster, _ db: String, inserting line: String) -> Task<String, any Error> {
    Task { try await cluster.psql(db, "BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(1.5); INSERT INTO notifications (body) VALUES ($b$\(line)$b$); COMMIT;") }
}

private func schema(at version: Int) -> String {
    var setup = "CREATE TABLE herald_schema (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), description text NOT NULL);\n"
    for m in QueueSchema.migrations where m.version <= version {
        setup += m.statements.joined(separator: ";\n") + ";\n"
        setup += "INSERT INTO herald_schema (version, description) VALUES (\(m.version), 'v\(m.version)');\n"
    }
    return setup
}
