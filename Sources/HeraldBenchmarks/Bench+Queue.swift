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
/// queue, end to end, for 1, 2 and 4 `herald work` processes, beside `herald send FILE`
/// run as its own process on the same requests, and beside the claim and outcome statements
/// run bare by `pgbench`; with where the CPU went (workers, PostgreSQL, producers).
struct BenchQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Notifications per second through the PostgreSQL queue (herald enqueue → herald work → outcome written) against herald send FILE, by workers.",
        discussion: """
            Needs a database: the configuration's queue section (its notifications table is emptied \
            before each run: use a database of its own). Makes --count request lines; each round \
            times herald send FILE (this executable, its own process, outcomes to a file), then for \
            each --workers count starts that many herald work processes with the same configuration, \
            warms them up (a batch or more through each), runs --producers herald enqueue processes \
            on the lines (each a share of them, while the workers run) and times until every row's \
            outcome is written. CPU seconds of each side (send; the workers, the PostgreSQL server \
            when it runs on this machine, the producers) are reported per round. The best of the \
            --rounds counts (every round's figure is reported too). The same workers then drain a \
            backlog: the lines committed at once (one COPY), timed from its commit to the last \
            outcome (workers_N_drain_per_s). Then, as the database's own limit, pgbench runs the \
            same claim and outcome statements bare (500 rows a transaction) on the same number of \
            connections, over a queue filled beforehand, beside the drain \
            (ratio_workers_N_drain_to_pgbench). Goals: one worker at least half of herald send's \
            rate, and more workers never slower (issues 16, 28); 8 workers' drain at least 0.8 of \
            pgbench at 8 connections, 16 never slower than 8 (issue 29).

            Example (a throwaway server: docs/scale-out.md, "Benchmarks"):
              herald bench queue --config bench.json
            """
    )

    @Option(help: "Configuration file (JSON) with a queue section.") var config: String
    @Option(help: "Notifications.") var count = 100_000
    @Option(help: "Worker counts to run, comma-separated.") var workers = "1,2,4"
    @Option(help: "pgbench (none: skip that baseline).") var pgbench = "pgbench"
    @Option(help: "Rounds: send and each worker count are timed once a round, in turn; the best of each counts.") var rounds = 5
    @Option(help: "herald enqueue processes at once while the workers run (each a share of the lines). Two keep ahead of four workers here; one did not, and the run then measured the enqueue.") var producers = 2

    func run() async throws {
        let counts = workers.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        guard !counts.isEmpty else { throw BenchError("--workers: give counts like 1,2,4") }
        guard rounds >= 1 else { throw BenchError("--rounds: at least 1") }
        guard (1...8).contains(producers) else { throw BenchError("--producers: 1 to 8") }
        let root = try ConfigNode.load(path: config)
        let queueConfiguration = try PostgresQueueConfiguration.load(try root.child("queue"))
        let (dir, input, lines) = try benchRequestFile(count: count, seed: 16, name: "queue")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let shares = try Self.producerFiles(lines, producers: producers, dir: dir)
        let herald = try BenchProcess.selfExecutable()
        let bodies = lines.map { String(decoding: $0.dropLast(), as: UTF8.self) }
        let warm = Array(bodies.prefix(queueConfiguration.batch * counts.max()!))

        var report = JSONLine()
        report.add("benchmark", "queue")
        report.add("notifications", count)
        report.add("rounds", rounds)
        report.add("cores", ProcessInfo.processInfo.activeProcessorCount)
        report.add("producers", producers)
        let control = PostgresQueue(configuration: queueConfiguration, owner: "bench-control").start()
        try await control.migrate()
        let server = try await BenchPostgresServer.find(control)
        report.add("postgres_cpu_measured", server != nil)
        // Round after round, each measurement once (send, then each worker count), so that a slow
        // spell of a shared machine falls on one round of each rather than on one measurement.
        var sendRates: [Double] = [], sendCPU: [Double] = []
        var runs = [[Run]](repeating: [], count: counts.count)
        for _ in 0..<rounds {
            let send = try await BenchProcess.send(herald, input: input, outcomes: dir + "/send-outcomes.jsonl", log: dir + "/send.log")
            sendRates.append(Double(count) / send.seconds)
            sendCPU.append(send.cpu)
            for (k, n) in counts.enumerated() {
                try await control.removeEveryRow()
                runs[k].append(try await Self.endToEnd(
                    herald, workers: n, shares: shares, warm: warm, all: bodies, batch: queueConfiguration.batch, config: config,
                    dir: dir, control: control, server: server))
            }
        }
        let sendRate = sendRates.max()!
        report.add("send_per_s", sendRate, places: 0)
        report.add("send_rounds_per_s", sendRates, places: 0)
        report.add("send_rounds_cpu_s", sendCPU, places: 2)
        for (k, n) in counts.enumerated() {
            report.add("workers_\(n)_per_s", runs[k].map(\.rate).max()!, places: 0)
            report.add("workers_\(n)_rounds_per_s", runs[k].map(\.rate), places: 0)
            report.add("workers_\(n)_rounds_enqueue_share", runs[k].map(\.enqueueShare), places: 2)
            report.add("workers_\(n)_rounds_cpu_workers_s", runs[k].map(\.cpuWorkers), places: 2)
            if server != nil { report.add("workers_\(n)_rounds_cpu_postgres_s", runs[k].map { $0.cpuPostgres ?? 0 }, places: 2) }
            report.add("workers_\(n)_rounds_cpu_producers_s", runs[k].map(\.cpuProducers), places: 2)
            let busy = runs[k].compactMap(\.coresBusy)
            if !busy.isEmpty { report.add("workers_\(n)_rounds_cores_busy", busy, places: 2) }
            let drain = runs[k].map(\.drainRate).max()!
            report.add("workers_\(n)_drain_per_s", drain, places: 0)
            report.add("workers_\(n)_rounds_drain_per_s", runs[k].map(\.drainRate), places: 0)
            if let bare = try await Self.pgbenchRate(pgbench, rows: count, clients: n, configuration: queueConfiguration, control: control, bodies: bodies, dir: dir) {
                report.add("pgbench_\(n)_rows_per_s", bare, places: 0)
                report.add("ratio_workers_\(n)_drain_to_pgbench", drain / bare, places: 3)
            }
        }
        try await control.removeEveryRow()
        await control.close()
        let rates = runs.map { $0.map(\.rate).max()! }
        report.add("ratio_1_worker_to_send", rates[0] / sendRate, places: 3)
        report.add("goal_ratio", 0.5, places: 1)
        report.add("more_workers_never_slower", zip(rates, rates.dropFirst()).allSatisfy { $1 >= $0 * 0.95 })
        let drains = runs.map { $0.map(\.drainRate).max()! }
        report.add("drain_more_workers_never_slower", zip(drains, drains.dropFirst()).allSatisfy { $1 >= $0 * 0.95 })
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.print()
    }

    /// One end-to-end run: its rate, the share of its time the enqueue took (near 1: the workers
    /// kept up with it, and the run measured the enqueue), and CPU seconds by side; then the same
    /// workers' drain of a backlog (`drainRate`).
    struct Run {
        var rate: Double
        var drainRate: Double
        var enqueueShare: Double
        var cpuWorkers: Double
        var cpuPostgres: Double?
        var cpuProducers: Double
        var coresBusy: Double?
    }

    /// The lines dealt to `producers` files, 5,000-line chunks in turn (each producer a share of
    /// every part of the input, as the in-turn COPYs of one process would).
    static func producerFiles(_ lines: [[UInt8]], producers: Int, dir: String) throws -> [String] {
        var parts = [[UInt8]](repeating: [], count: producers)
        for (c, start) in stride(from: 0, to: lines.count, by: 5000).enumerated() {
            for line in lines[start..<min(lines.count, start + 5000)] { parts[c % producers].append(contentsOf: line) }
        }
        return try parts.enumerated().map { p, bytes in
            let path = dir + "/producer-\(p).jsonl"
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw BenchError("cannot write \(path)") }
            return path
        }
    }

    /// Rows per second from the producers' start to the last outcome written, with `n` herald work
    /// processes already running; then, with the same processes, rows per second draining a
    /// backlog: `all` committed at once (one `COPY`), timed from its commit to the last outcome,
    /// as pgbench's figure is taken over a queue filled beforehand (pgbenchRate).
    static func endToEnd(
        _ herald: String, workers n: Int, shares: [String], warm: [String], all: [String], batch: Int, config: String, dir: String,
        control: PostgresQueue, server: BenchPostgresServer?
    ) async throws -> Run {
        let count = all.count
        let workers = try (0..<n).map { try BenchProcess(herald, ["work", "--config", config], log: dir + "/worker-\($0).log") }
        defer { for w in workers { w.terminate() } }
        // Workers measured running, not starting: a batch or more through each before the clock
        // starts (their sessions open, their statements prepared).
        var warmed = 0
        for _ in 0..<50 {
            warmed += try await control.enqueue(Array(warm.prefix(n * batch)))
            try await waitForDone(warmed, control: control, workers: workers)
            if try await control.benchOutcomeOwners() >= n { break }
        }
        let workersBefore = workers.map(\.cpuSeconds), postgresBefore = server?.cpuSeconds(), producersBefore = BenchProcess.childrenCPUSeconds()
        let coresBefore = CPUTimes.now()
        let clock = ContinuousClock(), started = clock.now
        let producing = try shares.enumerated().map { p, file in
            try BenchProcess(herald, ["enqueue", "--config", config, file], log: dir + "/producer-\(p).log")
        }
        for p in producing { try await p.exit(expecting: 0) }
        let enqueued = clock.now
        let lag = try await waitForDone(warmed + count, control: control, workers: workers)
        let seconds = (clock.now - started).inSeconds - lag
        let cpuWorkers = zip(workers, workersBefore).reduce(0) { $0 + $1.0.cpuSeconds - $1.1 }
        let cpuPostgres = postgresBefore.flatMap { before in server?.cpuSeconds().map { $0 - before } }
        let cpuProducers = BenchProcess.childrenCPUSeconds() - producersBefore
        let coresBusy = coresBefore.flatMap { before in CPUTimes.now().map { $0.coresBusy(since: before) } }
        _ = try await control.enqueue(all)
        let committed = clock.now
        let drainLag = try await waitForDone(warmed + 2 * count, control: control, workers: workers)
        let drainSeconds = (clock.now - committed).inSeconds - drainLag
        let run = Run(
            rate: Double(count) / seconds, drainRate: Double(count) / drainSeconds, enqueueShare: min(1, (enqueued - started).inSeconds / seconds),
            cpuWorkers: cpuWorkers, cpuPostgres: cpuPostgres, cpuProducers: cpuProducers, coresBusy: coresBusy)
        for w in workers { w.terminate() }
        for w in workers { try await w.exit(expecting: 0) }
        return run
    }

    /// Waits (polling every 100 ms) until `rows` outcomes are written; returns how long before the
    /// poll that saw it the last was written (the server's clock), so the run's time is exact to a
    /// statement's round trip rather than to the polling interval.
    @discardableResult
    static func waitForDone(_ rows: Int, control: PostgresQueue, workers: [BenchProcess]) async throws -> Double {
        while true {
            let (done, lag) = try await control.benchOutcomesWritten()
            if done >= rows { return lag }
            if let dead = workers.first(where: { !$0.running }) {
                throw BenchError("a herald work process ended (status \(dead.status)): \(dead.logTail())")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
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

    /// The claim and the outcome write, bare: `pgbench` running the claim's two statements (the
    /// lease, then its rows) for 500 queued rows (the fast lane's: the bench's requests are plain alerts) and the statement that finishes them, on `clients`
    /// connections, over `rows` freshly queued rows.
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
            SELECT coalesce((SELECT lease FROM herald_claim_lease('pgbench', 30, 1, 500, 'fast')), 0) AS lease \\gset
            SELECT quote_literal(coalesce(max(a.ids::text), '{}')) AS ids, sum((SELECT sum(length(b)) FROM unnest(a.bodies) AS b)) AS bytes
            FROM herald_leases l CROSS JOIN LATERAL (\(PostgresQueue.newRows(of: "l"))) a WHERE l.lease = :lease \\gset
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
