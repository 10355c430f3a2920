import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldPostgres

#if canImport(Glibc)
import Glibc
#endif

/// Issue 28's crash matrix: `herald work` processes while an application's outbox inserts 1,000
/// rows a second, through failures real deployments see. Each test ends with every row finished
/// exactly once (none lost) and the rows sent twice only among those marked possible_duplicate
/// (claimed more than once: the only way a row can reach APNs twice).
// Three minutes of worker processes and an outbox keeping two cores busy: run apart by .ci/run
// (HERALD_TIMING_APART=1 skips it in the parallel run), where it cannot slow other tests' clocks.
@Suite("The queue's crash matrix", .serialized, .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)),
       .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: minutes of load"))
struct CrashMatrixTests {
    @Test("the worker's sessions killed with pg_terminate_backend every 2 s for a minute: every row once, none lost, duplicates only among marked rows")
    func sessionsTerminated() async throws {
        let run = try await Outbox.start(workers: 1)
        var terminated = 0
        for _ in 0..<30 {
            try await Task.sleep(for: .seconds(2))
            // Every session of the worker's (user postgres) on the database; the outbox's producer logs in as another role.
            terminated += Int(try await run.cluster.psql(run.db, """
                SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND usename = 'postgres' AND pid <> pg_backend_pid()
                """)) ?? 0
        }
        let figures = try await run.finish()
        print("sessions terminated: \(terminated) over 30 kills; \(figures)")
        #expect(terminated >= 30, "\(terminated) sessions terminated")
    }

    @Test("one of two workers SIGKILLed every 10 s for two minutes, and started again: every row once, none lost, duplicates only among marked rows")
    func workersKilled() async throws {
        var run = try await Outbox.start(workers: 2)
        var holding = 0
        for kill in 0..<12 {
            try await Task.sleep(for: .seconds(10))
            // Killed while it holds rows where it can (it idles between the outbox's inserts).
            if try await run.waitUntilHolding(kill % 2, for: .seconds(2)) { holding += 1 }
            try run.killAndRestart(kill % 2)
        }
        let figures = try await run.finish()
        print("workers killed: 12, \(holding) of them holding leases; \(figures)")
        #expect(holding == 0 || figures.marked > 0, "\(holding) kills of a worker holding leases, and no row claimed twice: \(figures)")
    }
}

/// One crash-matrix run: a fresh database, `herald work` processes (lease 5 s, so rows a dead
/// worker held come back within seconds), and an application's outbox inserting 1,000 rows a
/// second as role `producer`, until ``finish()``.
struct Outbox {
    let cluster: PostgresCluster
    let db: String
    let dir: String
    let config: String
    let producer: PostgresQueue
    let feed: Feed
    let producing: Task<Int, any Error>
    var workers: [pid_t]
    var started = 0

    static func start(workers n: Int) async throws -> Outbox {
        let (cluster, db) = try await freshDatabase()
        // Roles are the server's, shared by every test database: made once.
        try await cluster.psql(db, "DO $$ BEGIN CREATE ROLE producer LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        let dir = temporaryDirectory()
        let config = try queueConfigurationFile(cluster, db, settings: #","lease":5,"batch":500"#)
        var c = queueConfiguration(cluster, db)
        c.user = "producer"
        let producer = PostgresQueue(configuration: c, owner: "producer").start()
        try await producer.migrate()
        let feed = Feed()
        let producing = Task { try await feed.run(producer, sessions: 2, rowsPerTransaction: 10, every: .milliseconds(20)) }
        var run = Outbox(cluster: cluster, db: db, dir: dir, config: config, producer: producer, feed: feed, producing: producing, workers: [])
        for _ in 0..<n { run.workers.append(try run.startWorker()) }
        return run
    }

    mutating func startWorker() throws -> pid_t {
        started += 1
        return try spawnWithSignalsUnblocked(
            try heraldExecutable().path, ["work", "--config", config, "--log-level", "error"], output: dir + "/worker-\(started).log")
    }

    /// Waits until worker `index` holds a lease, for `timeout` at most; whether it did.
    func waitUntilHolding(_ index: Int, for timeout: Duration) async throws -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if try await cluster.psql(db, "SELECT count(*) FROM herald_leases WHERE owner LIKE '%:\(workers[index]):%'") != "0" { return true }
        }
        return false
    }

    mutating func killAndRestart(_ index: Int) throws {
        kill(workers[index], SIGKILL)
        #expect(waitForExit(workers[index]) == 128 + SIGKILL)
        workers[index] = try startWorker()
    }

    /// What a run ends with.
    struct Figures: CustomStringConvertible {
        var rows = 0
        var marked = 0
        var description: String { "\(rows) rows, each finished once; \(marked) marked possible_duplicate" }
    }

    /// Stops the outbox, waits until every row has an outcome, stops the workers (SIGTERM: exit 0) and
    /// checks the table: every row finished once, accepted; a row claimed more than once is marked,
    /// and no other.
    func finish() async throws -> Figures {
        feed.stop()
        let rows = try await producing.value
        let clock = ContinuousClock(), deadline = clock.now + .seconds(120)
        func done() async throws -> Int { Int(try await cluster.psql(db, "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes")) ?? 0 }
        while try await done() < rows && clock.now < deadline { try await Task.sleep(for: .milliseconds(200)) }
        // A worker started a moment ago may not have its signal handling yet (a process's first
        // hundred milliseconds or so: loading, before main): SIGTERM would end it on the spot.
        try await Task.sleep(for: .seconds(2))
        for w in workers { kill(w, SIGTERM) }
        let running = workers
        let statuses = try await offPool { running.map(waitForExit) }
        await producer.close()
        let logs = (1...started).map { (try? String(contentsOfFile: dir + "/worker-\($0).log", encoding: .utf8)) ?? "" }.joined()
        #expect(statuses.allSatisfy { $0 == 0 }, "exit statuses \(statuses): \(logs.suffix(800))")
        await #expect(try tally(cluster, db) == ["done|accepted": rows])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE possible_duplicate <> (attempts > 1)") == "0")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
        let marked = Int(try await cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE possible_duplicate")) ?? -1
        return Figures(rows: rows, marked: marked)
    }
}
