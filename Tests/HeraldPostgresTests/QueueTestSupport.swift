import Foundation
import HeraldCore
import HeraldKit
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The test process's throwaway server and a fresh database in it.
func freshDatabase() async throws -> (cluster: PostgresCluster, database: String) {
    let cluster = try PostgresCluster.shared
    return (cluster, try await cluster.createDatabase())
}

/// A queue configuration for `database` on the test server.
func queueConfiguration(_ cluster: PostgresCluster, _ database: String, lease: Duration = .seconds(30), batch: Int = 500) -> PostgresQueueConfiguration {
    var c = PostgresQueueConfiguration()
    c.host = cluster.host
    c.port = cluster.port
    c.user = cluster.user
    c.database = database
    c.lease = lease
    c.batch = batch
    c.poll = .milliseconds(100)
    return c
}

/// A configuration file for `database` on `cluster` (as `user`, by default the server's own), in a new
/// temporary directory: the queue section with the tests' lease, batch (1,000) and poll (0.1 s) and
/// `extra` members added, and the in-memory simulator.
func configurationFile(_ cluster: PostgresCluster, _ database: String, lease: Int = 30, user: String? = nil, extra: String = "") throws -> String {
    try queueConfigurationFile(cluster, database, user: user, settings: #","lease":\#(lease),"batch":1000,"poll":0.1\#(extra)"#)
}

/// A configuration file for `database` on `cluster`, reached through `port` (by default the
/// server's own: another for a pooler in front of it), in a new temporary directory: the queue
/// section with `settings` added (`,"lease":5`; every other setting at its default), the
/// in-memory simulator, and `stages` when given (custom stages, a JSON array).
func queueConfigurationFile(
    _ cluster: PostgresCluster, _ database: String, port: Int? = nil, user: String? = nil, settings: String = "", stages: String? = nil
) throws -> String {
    let path = temporaryDirectory() + "/herald.json"
    try #"""
    {"queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(port ?? cluster.port),"user":"\#(user ?? cluster.user)","database":"\#(database)"\#(settings)},
     "transport":{"type":"simulator"}\#(stages.map { #","stages":\#($0)"# } ?? "")}
    """#.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// A migrated queue; closed by the caller.
func openQueue(_ cluster: PostgresCluster, _ database: String, owner: String? = nil, lease: Duration = .seconds(30), batch: Int = 500) async throws
    -> PostgresQueue
{
    let queue = PostgresQueue(configuration: queueConfiguration(cluster, database, lease: lease, batch: batch), owner: owner).start()
    try await queue.migrate()
    return queue
}

let goodToken = String(repeating: "ab", count: 32)

/// `n` request lines; every `malformedEvery`-th one is malformed, in turn: bad JSON, a bad token, an unknown key.
func requestLines(_ n: Int, malformedEvery: Int = 0) -> (lines: [String], malformed: Int) {
    var lines: [String] = []
    var malformed = 0
    for i in 0..<n {
        if malformedEvery > 0 && i % malformedEvery == malformedEvery - 1 {
            switch malformed % 3 {
            case 0: lines.append(#"{"id":\#(i),"token":"\#(goodToken)","alert":"#)
            case 1: lines.append(#"{"id":\#(i),"token":"not-hex","alert":"n\#(i)"}"#)
            default: lines.append(#"{"id":\#(i),"token":"\#(goodToken)","colour":"red"}"#)
            }
            malformed += 1
        } else {
            lines.append(#"{"id":\#(i),"token":"\#(goodToken)","alert":"n\#(i)"}"#)
        }
    }
    return (lines, malformed)
}

/// What one in-process worker run did.
struct WorkerRun {
    var snapshot: LedgerSnapshot
    var report: QueueOutcomeWriter.Report
}

/// Runs one worker (the default pipeline, the in-memory simulator) on `queue` until it is drained.
/// Without `problems`, expects none.
func drainWorker(_ queue: PostgresQueue, problems: ProblemLog? = nil) async throws -> WorkerRun {
    let log = problems ?? ProblemLog()
    let run = try await RunningWorker(queue, drain: true, problems: log).run.value
    if problems == nil { #expect(log.all.isEmpty, "\(log.all.prefix(3))") }
    return run
}

/// Claimed rows with these outcomes, as the writer hands them to ``PostgresQueue/finish(_:completing:)``
/// (which reads no sequence number).
func finished(_ rows: [PostgresQueue.Claimed], _ outcomes: [Outcome]) -> [PostgresQueue.Finished] {
    zip(rows, outcomes).map { row, outcome in
        PostgresQueue.Finished(id: row.id, lease: row.lease, record: OutcomeRecord(sequence: 0, line: nil, id: nil, token: nil, outcome: outcome))
    }
}

/// Problems a worker reported.
final class ProblemLog: Sendable {
    let lines = Mutex<[String]>([])
    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Rows by state and outcome: `"done|accepted" → n`, and `"rows with two outcomes"` if any has.
func tally(_ cluster: PostgresCluster, _ database: String) async throws -> [String: Int] {
    var out: [String: Int] = [:]
    for line in try await cluster.psql(database, "SELECT state || '|' || coalesce(outcome, '-'), count(*) FROM herald_rows GROUP BY 1").split(separator: "\n") {
        let parts = line.split(separator: "|")
        out[parts[0 ..< parts.count - 1].joined(separator: "|")] = Int(parts.last!)
    }
    // A row with two outcomes shows twice in the view; named here too, so no test can miss it.
    let twice = Int(try await cluster.psql(database, "SELECT count(*) - count(DISTINCT id) FROM (SELECT unnest(ids) AS id FROM herald_outcomes) o")) ?? -1
    if twice != 0 { out["rows with two outcomes"] = twice }
    return out
}

/// A claim of rows just enqueued, tried again until it returns some (for 30 s at most). Since schema
/// 9 a committed row is claimable at once; before, it waited behind any older transaction still
/// running in the cluster, another test's included.
func claimSoon(_ queue: PostgresQueue, limit: Int, inFlight: [Int64] = [], token: Int64 = 0) async throws -> [PostgresQueue.Claimed] {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(30)
    while true {
        let rows = try await queue.claim(limit: limit, inFlight: inFlight, token: token).rows
        if !rows.isEmpty || clock.now > deadline { return rows }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// One worker (the default pipeline, the in-memory simulator) running on `queue`: without `drain`
/// until ``stop()``, for tests that feed it while it runs; with it until the queue is empty.
struct RunningWorker {
    let writer: QueueOutcomeWriter
    let pipeline: Pipeline
    let run: Task<WorkerRun, any Error>

    init(_ queue: PostgresQueue, drain: Bool = false, problems: ProblemLog = ProblemLog()) throws {
        let (source, writer) = queue.worker(drain: drain) { problems.add($0) }
        let pipeline = try HeraldAssembly.configured(HeraldConfiguration()).makePipeline(source: source, ledger: OutcomeLedger(observers: [writer]))
        writer.start()
        self.writer = writer
        self.pipeline = pipeline
        run = Task {
            let snapshot = try await pipeline.run()
            return WorkerRun(snapshot: snapshot, report: await writer.finish())
        }
    }

    /// Outcomes written so far.
    var written: Int { writer.report.written }

    /// Waits until `count` outcomes are written, or `timeout` passes; whether they were.
    func waitForWritten(_ count: Int, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while written < count {
            if ContinuousClock.now > deadline { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Shuts the pipeline down (what is in flight drains, every outcome is written) and returns the run.
    func stop() async throws -> WorkerRun {
        pipeline.shutdown()
        return try await run.value
    }
}

/// Waits for `pid` to end; its exit status (or 128 + the signal that ended it).
func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let signal = status & 0x7F
    return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
}
