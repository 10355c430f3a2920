import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldPostgres
#if canImport(Glibc)
import Glibc
#endif

/// `herald bench queue`: notifications per second through the PostgreSQL
/// queue, end to end, for 1, 2 and 4 workers, beside `herald send` and
/// beside the claim and outcome statements run bare by `pgbench`.
struct BenchQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Notifications per second through the PostgreSQL queue (enqueue → claim → simulator → outcome written), by workers.",
        discussion: """
            Needs a database: the configuration's queue section (its notifications table is emptied \
            before each run: use a database of its own). Makes --count request lines; each round \
            times herald send on them, then for each --workers count starts the workers (each in \
            this process with its own pipeline, simulator and connections), warms them up (their \
            connections open, a batch or more through each), enqueues the lines (with COPY, 5,000 rows \
            at a time, from --producers connections at once, while the workers run) and times until \
            every row is done. The best of the --rounds counts (every \
            round's figure is reported too). Then, as the database's own limit, pgbench runs the same claim \
            and outcome statements bare (500 rows a transaction) on the same number of connections. \
            Goal (issue 16): one worker at least half of herald send's rate, and more workers never slower.

            Example (a throwaway server: docs/scale-out.md, "Benchmarks"):
              herald bench queue --config bench.json
            """
    )

    @Option(help: "Configuration file (JSON) with a queue section.") var config: String
    @Option(help: "Notifications.") var count = 100_000
    @Option(help: "Worker counts to run, comma-separated.") var workers = "1,2,4"
    @Option(help: "pgbench (none: skip that baseline).") var pgbench = "pgbench"
    @Option(help: "Rounds: send and each worker count are timed once a round, in turn; the best of each counts.") var rounds = 5
    @Option(help: "Connections enqueuing at once while the workers run (each its own COPYs). Two keep ahead of four workers here; one did not, and the run then measured the enqueue.") var producers = 2

    func run() async throws {
        let counts = workers.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        guard !counts.isEmpty else { throw BenchError("--workers: give counts like 1,2,4") }
        guard rounds >= 1 else { throw BenchError("--rounds: at least 1") }
        guard (1...4).contains(producers) else { throw BenchError("--producers: 1 to 4 (the pool's connections)") }
        let root = try ConfigNode.load(path: config)
        let queueConfiguration = try PostgresQueueConfiguration.load(try root.child("queue"))
        let (dir, input, lines) = try benchRequestFile(count: count, seed: 16, name: "queue")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bodies = lines.map { String(decoding: $0.dropLast(), as: UTF8.self) }

        var report = JSONLine()
        report.add("benchmark", "queue")
        report.add("notifications", count)
        report.add("rounds", rounds)
        report.add("cores", ProcessInfo.processInfo.activeProcessorCount)
        report.add("producers", producers)
        let control = PostgresQueue(configuration: queueConfiguration, owner: "bench-control").start()
        try await control.migrate()
        // Round after round, each measurement once (send, then each worker count), so that a slow
        // spell of a shared machine falls on one round of each rather than on one measurement.
        var sendRates: [Double] = []
        var workerRates = [[Double]](repeating: [], count: counts.count)
        var enqueueShares = [[Double]](repeating: [], count: counts.count)
        var coresBusy = [[Double]](repeating: [], count: counts.count)
        for _ in 0..<rounds {
            sendRates.append(Double(count) / (try await benchSendSeconds(input: input, count: count)))
            for (k, n) in counts.enumerated() {
                try await control.removeEveryRow()
                let run = try await Self.endToEnd(bodies, workers: n, producers: producers, configuration: queueConfiguration, control: control)
                workerRates[k].append(run.rate)
                enqueueShares[k].append(run.enqueueShare)
                if let busy = run.coresBusy { coresBusy[k].append(busy) }
            }
        }
        let sendRate = sendRates.max()!
        report.add("send_per_s", sendRate, places: 0)
        report.add("send_rounds_per_s", sendRates, places: 0)
        for (k, n) in counts.enumerated() {
            report.add("workers_\(n)_per_s", workerRates[k].max()!, places: 0)
            report.add("workers_\(n)_rounds_per_s", workerRates[k], places: 0)
            report.add("workers_\(n)_rounds_enqueue_share", enqueueShares[k], places: 2)
            if !coresBusy[k].isEmpty { report.add("workers_\(n)_rounds_cores_busy", coresBusy[k], places: 2) }
            if let bare = try await Self.pgbenchRate(pgbench, rows: count, clients: n, configuration: queueConfiguration, control: control, bodies: bodies, dir: dir) {
                report.add("pgbench_\(n)_rows_per_s", bare, places: 0)
            }
        }
        try await control.removeEveryRow()
        await control.close()
        let rates = workerRates.map { $0.max()! }
        report.add("ratio_1_worker_to_send", rates[0] / sendRate, places: 3)
        report.add("goal_ratio", 0.5, places: 1)
        report.add("more_workers_never_slower", zip(rates, rates.dropFirst()).allSatisfy { $1 >= $0 * 0.95 })
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.print()
    }

    /// Rows per second from the first INSERT to the last outcome written, with `workers` in this
    /// process, and the share of that time the enqueue took (near 1: the workers kept up with it).
    static func endToEnd(
        _ bodies: [String], workers n: Int, producers: Int, configuration: PostgresQueueConfiguration, control: PostgresQueue
    ) async throws -> (rate: Double, enqueueShare: Double, coresBusy: Double?) {
        var running = configuration
        running.connectionsKeptOpen = true
        let queues = (0..<n).map { PostgresQueue(configuration: running, owner: "bench-worker-\($0)").start() }
        let pipelines = try queues.map { queue -> (Pipeline, QueueOutcomeWriter) in
            let (source, writer) = queue.worker(drain: false)
            let ledger = OutcomeLedger(observers: [writer])
            return (try HeraldAssembly.configured(HeraldConfiguration()).makePipeline(source: source, ledger: ledger), writer)
        }
        let runs = pipelines.map { pipeline, writer in
            writer.start()
            return Task { _ = try await pipeline.run(); return await writer.finish() }
        }
        func written() -> Int { pipelines.reduce(0) { $0 + $1.1.report.written } }
        // Workers measured running, not starting: their connections open (kept open from the start)
        // and rows through each of them (claims and writes prepared) before the clock starts.
        var warmed = 0
        for _ in 0..<20 where pipelines.contains(where: { $0.1.report.written < configuration.batch }) {
            warmed += try await control.enqueue(Array(bodies.prefix(n * configuration.batch)))
            while written() < warmed { try await Task.sleep(for: .milliseconds(5)) }
        }
        let cpuBefore = CPUTimes.now()
        let started = ContinuousClock.now
        // Each producer its own connection, taking every producers-th chunk of 5,000 rows.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<producers {
                group.addTask {
                    for start in stride(from: p * 5000, to: bodies.count, by: producers * 5000) {
                        _ = try await control.enqueue(Array(bodies[start..<min(bodies.count, start + 5000)]))
                    }
                }
            }
            try await group.waitForAll()
        }
        let enqueued = ContinuousClock.now
        // The writers' own counts (outcomes committed): polling the table would load the database being measured.
        while written() < warmed + bodies.count { try await Task.sleep(for: .milliseconds(5)) }
        let seconds = (ContinuousClock.now - started).inSeconds
        let busy = cpuBefore.flatMap { before in CPUTimes.now().map { $0.coresBusy(since: before) } }
        for (pipeline, _) in pipelines { pipeline.shutdown() }
        var total = 0
        for r in runs { total += try await r.value.written }
        for q in queues { await q.close() }
        guard total == warmed + bodies.count else { throw BenchError("\(n) workers wrote \(total) of \(warmed + bodies.count) outcomes") }
        return (Double(bodies.count) / seconds, (enqueued - started).inSeconds / seconds, busy)
    }

    /// The machine's CPU time so far, all cores, from `/proc/stat` (Linux; `nil` elsewhere): how busy
    /// it was during a run, whoever kept it busy (this process, the database, anything else).
    struct CPUTimes {
        var busy: Double
        var total: Double
        var cores: Int

        static func now() -> CPUTimes? {
            // user nice system idle iowait irq softirq steal
            guard let f = procFields("/proc/stat", "cpu ")?.compactMap({ Double($0) }) else { return nil }
            guard f.count >= 8 else { return nil }
            let idle = f[3] + f[4]
            let total = f[0..<8].reduce(0, +)
            return CPUTimes(busy: total - idle, total: total, cores: ProcessInfo.processInfo.activeProcessorCount)
        }

        /// Cores busy on average since `earlier` (0 to the number of cores).
        func coresBusy(since earlier: CPUTimes) -> Double {
            let total = self.total - earlier.total
            return total > 0 ? Double(cores) * (busy - earlier.busy) / total : 0
        }
    }

    /// The claim and the outcome write, bare: `pgbench` running one statement that claims 500
    /// queued rows and finishes them, on `clients` connections, over `rows` freshly queued rows.
    static func pgbenchRate(
        _ pgbench: String, rows: Int, clients: Int, configuration c: PostgresQueueConfiguration, control: PostgresQueue, bodies: [String], dir: String
    ) async throws -> Double? {
        guard pgbench != "none" else { return nil }
        try await control.removeEveryRow()
        for start in stride(from: 0, to: bodies.count, by: 5000) {
            _ = try await control.enqueue(Array(bodies[start..<min(bodies.count, start + 5000)]))
        }
        let script = dir + "/claim-and-finish.sql"
        try """
            WITH c AS (SELECT * FROM herald_claim_rows('pgbench', 30, 1, 500))
            SELECT coalesce((SELECT lease FROM c), 0) AS lease,
                   quote_literal(coalesce((SELECT ids FROM c), '{}')::text) AS ids,
                   (SELECT sum(length(b)) FROM c, unnest(c.bodies) AS b) AS bytes \\gset
            WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
            w AS (INSERT INTO herald_outcomes (lease, first_id, ids, outcome, attempts, owner)
                  SELECT :lease, (:ids::bigint[])[1], :ids::bigint[], 'accepted', 1, 'pgbench' WHERE :lease <> 0
                  ON CONFLICT DO NOTHING RETURNING 1),
            d AS (DELETE FROM herald_leases WHERE lease = :lease RETURNING 1)
            SELECT (SELECT count(*) FROM w), (SELECT count(*) FROM d), (SELECT set_config FROM durability);

            """.write(toFile: script, atomically: true, encoding: .utf8)
        let transactions = max(1, rows / 500 / clients)
        let process = Process()
        // As bench http2 runs h2load: through env, so a name on the PATH or a path both work.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [pgbench, "-n", "-f", script, "-c", "\(clients)", "-j", "\(clients)", "-t", "\(transactions)",
                             "-h", c.host, "-p", "\(c.port)", "-U", c.user, c.database]
        var environment = ProcessInfo.processInfo.environment
        if let password = c.password { environment["PGPASSWORD"] = password }
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = Double(line.dropFirst(6).prefix { $0 == "." || $0.isNumber })
        else { throw BenchError("pgbench failed: \(text.suffix(400))") }
        return tps * 500
    }
}
