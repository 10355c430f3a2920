import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Four processes for a minute, and kills timed by what the workers hold: run apart by .ci/run
// (HERALD_TIMING_APART=1 skips it in the parallel run, where its polls lagged the run: the second
// kill came after the last row, 300,000 done, nothing held).
@Suite(
    "Three workers, 300,000 rows, one worker killed twice (issue 16's done-when)",
    .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)),
    .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: minutes of worker processes"))
struct QueueSoakTests {
    @Test("3 herald work processes on one database while 300,000 rows are enqueued; one is killed with SIGKILL twice and restarted: every row ends once, and only rows claimed again are marked possible_duplicate")
    func threeWorkersKilledTwice() async throws {
        let (cluster, db) = try await freshDatabase()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "/herald.json"
        try #"""
        {"queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","lease":5,"batch":500,"poll":0.1},
         "transport":{"type":"simulator"},"stages":[{"type":"rate-limit","after":"ingest","perSecond":5000}]}
        """#.write(toFile: config, atomically: true, encoding: .utf8)
        // Each worker sends 5,000 a second (its pipeline's rate-limit stage): a backlog builds while
        // the enqueuer runs, so a worker holds rows whenever it is killed. Unpaced, workers as fast as
        // stop 47's claims idled between the enqueuer's inserts, each lease lived a few milliseconds,
        // and CI's loaded parallel run caught none in thirty tries.
        let total = 300_000
        // Distinct tokens so that the simulator's answers are per request; every line valid.
        try #require(FileManager.default.createFile(atPath: dir + "/requests.jsonl", contents: nil), "the request file could not be made in \(dir)")
        let handle = try #require(FileHandle(forWritingAtPath: dir + "/requests.jsonl"))
        var chunk = ""
        for i in 0..<total {
            chunk += #"{"id":\#(i),"token":"\#(String(format: "%064x", i + 1))","alert":"n\#(i)"}"# + "\n"
            if chunk.utf8.count > 1 << 20 {
                try handle.write(contentsOf: Data(chunk.utf8))
                chunk = ""
            }
        }
        try handle.write(contentsOf: Data(chunk.utf8))
        try handle.close()
        // The schema first (enqueue migrates it), with nothing in it, so the workers start on an existing table.
        #expect(try await runHerald(["enqueue", "--config", config, "/dev/null"]).status == 0)

        let herald = try heraldExecutable().path
        func startWorker(_ name: String) throws -> pid_t {
            try spawnWithSignalsUnblocked(herald, ["work", "--config", config, "--log-level", "error"], output: dir + "/\(name).log")
        }
        var workers = [try startWorker("a"), try startWorker("b"), try startWorker("c0")]
        let enqueuer = try spawnWithSignalsUnblocked(herald, ["enqueue", "--config", config, "--batch", "2000", dir + "/requests.jsonl"], output: dir + "/enqueue.log")

        // Counted where outcomes are appended: the row view would take longer than the run moves.
        func done() async throws -> Int { Int(try await cluster.psql(db, "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes")) ?? 0 }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(600)
        var kills: [(done: Int, leased: Int)] = []
        // Rows a worker holds: its leases (a worker's owner name holds its pid; a dead one's stay until they run out).
        func held(by pid: pid_t) async throws -> Int {
            Int(try await cluster.psql(db, "SELECT count(*) FROM herald_leases l, \(PostgresQueue.leaseRows(of: "l")) WHERE l.owner LIKE '%:\(pid):%'")) ?? 0
        }
        var restarts = 0
        for threshold in [60_000, 160_000] {
            while try await done() < threshold && clock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
            // Killed while it holds rows. Workers that keep up with the enqueuer idle between its
            // INSERTs, so the kill waits for a moment the worker holds a lease, and is tried again
            // (the worker restarted) if it came just after the worker let that lease go. Since
            // claims take rows as soon as they commit (schema 9), a lease lives a few milliseconds
            // here: five tries all came just after it once (CI); thirty.
            var leased = 0
            for _ in 0..<30 where leased == 0 {
                while try await held(by: workers[2]) == 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
                let victim = workers[2]
                kill(victim, SIGKILL)
                #expect(try await offPool { waitForExit(victim) } == 128 + SIGKILL)
                leased = try await held(by: victim)
                restarts += 1
                workers[2] = try startWorker("c\(restarts)")
            }
            await kills.append((try done(), leased))
        }
        #expect(kills.count == 2 && kills.allSatisfy { $0.done < total && $0.leased > 0 }, "both kills during the run, with rows held: \(kills)")
        let enqueued = try await offPool { waitForExit(enqueuer) }
        #expect(enqueued == 0, "\(String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: dir + "/enqueue.log"))) ?? Data(), as: UTF8.self))")
        while try await done() < total && clock.now < deadline { try await Task.sleep(for: .milliseconds(200)) }
        // A worker started a moment ago may not handle signals yet (a process's first hundred
        // milliseconds or so, before main): SIGINT would end it on the spot, 130 (CI saw it).
        try await Task.sleep(for: .seconds(2))
        for w in workers { kill(w, SIGINT) }
        let running = workers
        let statuses = try await offPool { running.map(waitForExit) }
        #expect(statuses == [0, 0, 0], "workers' exit statuses")

        // Every row ended once, accepted; nothing queued or leased is left.
        await #expect(try tally(cluster, db) == ["done|accepted": total], "kills at \(kills)")
        // Only rows claimed more than once are marked, and every one of them is: a send can only
        // repeat after a second claim, so nothing unmarked went out twice.
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE possible_duplicate <> (attempts > 1)") == "0")
        let marked = await Int(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE possible_duplicate")) ?? -1
        #expect(marked > 0 && marked <= kills.map(\.leased).reduce(0, +) + 2 * 500, "marked \(marked), leased at the kills \(kills)")
        await #expect(try cluster.psql(db, "SELECT max(attempts) FROM herald_rows").split(separator: "\n").first.flatMap { Int($0) } ?? 9 <= 3)
    }
}
