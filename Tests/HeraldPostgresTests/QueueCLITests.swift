import Foundation
import HeraldJSON
import HeraldPostgres
import HeraldTestSupport
import Testing

/// Polls every 20 ms until at least `count` rows are done, `worker` has ended, or a minute has passed; the last count read.
private func waitUntilDone(_ cluster: PostgresCluster, _ database: String, atLeast count: Int, while worker: Process) async throws -> Int {
    let clock = ContinuousClock(), deadline = clock.now + .seconds(60)
    var done = 0
    while done < count && worker.isRunning && clock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
        done = Int(try await cluster.psql(database, "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes")) ?? 0
    }
    return done
}

/// Waits until no other session is connected to `database`: a killed worker's
/// backends finish the statement they were running (an outcome write, a
/// claim: it commits although its client is gone), then go away.
private func waitForOtherSessionsToEnd(_ cluster: PostgresCluster, _ database: String) async throws {
    let clock = ContinuousClock(), deadline = clock.now + .seconds(60)
    while clock.now < deadline {
        let others = try await cluster.psql(database, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        if others == "0" { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("the killed worker's sessions were still there after 60 s")
}

/// The one JSON object on the last line of `text`.
private func lastObject(_ text: String) throws -> [String: Any] {
    let line = text.split(separator: "\n").last.map(String.init) ?? ""
    return try #require((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any], "not a JSON line: \(text.suffix(500))")
}

@Suite("herald enqueue and herald work on a real PostgreSQL", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct QueueCLITests {
    @Test("20,000 lines (blank and malformed ones among them) enqueued, then herald work --drain: every row done with exactly one outcome, malformed ones dropped with their reason")
    func enqueueThenDrain() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db)
        let (lines, malformed) = requestLines(20_000, malformedEvery: 100)
        // A byte-order mark on line 1 and blank lines are not requests (as with herald send).
        let file = try temporaryFile("\u{FEFF}" + lines.prefix(10_000).joined(separator: "\n") + "\n\n  \n" + lines.dropFirst(10_000).joined(separator: "\n") + "\n")

        let enqueue = try await runHerald(["enqueue", "--config", config, file])
        #expect(enqueue.status == 0, "\(enqueue.stderr)")
        let enqueued = try lastObject(enqueue.stdout)
        #expect(enqueued["enqueued"] as? Int == 20_000 && enqueued["not_enqueued"] as? Int == 0, "\(enqueued)")
        // Each row holds its line exactly.
        await #expect(try cluster.psql(db, "SELECT body FROM notifications WHERE id = 2") == lines[1])
        await #expect(try cluster.psql(db, "SELECT body FROM notifications WHERE id = 1") == lines[0])

        let outcomes = temporaryDirectory() + "/outcomes.jsonl"
        let work = try await runHerald(["work", "--config", config, "--drain", "--outcomes", outcomes])
        #expect(work.status == 0, "\(work.stderr)")
        let summary = try lastObject(work.stderr)["summary"] as? [String: Any] ?? [:]
        let queue = summary["queue"] as? [String: Any] ?? [:]
        #expect(summary["entered"] as? Int == 20_000 && summary["balanced"] as? Bool == true, "\(summary)")
        #expect(summary["dropped"] as? Int == malformed && summary["accepted"] as? Int == 20_000 - malformed, "\(summary)")
        #expect(queue["rows_written"] as? Int == 20_000 && queue["lease_lost"] as? Int == 0 && queue["not_written"] as? Int == 0, "\(queue)")
        #expect(work.stdout.isEmpty, "outcomes go to the table, and to --outcomes when given")
        // Every outcome line names its row ("row": id), each row once; a dropped row's reason too.
        var named: [Int: String] = [:]
        for line in try String(contentsOfFile: outcomes, encoding: .utf8).split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            guard let row = object["row"] as? Int, named[row] == nil, object["line"] == nil else {
                Issue.record("an outcome line without its row, or a row twice: \(line)")
                continue
            }
            named[row] = object["outcome"] as? String
            if named[row] == "dropped" { #expect((object["reason"] as? String)?.hasPrefix("row \(row): ") == true, "\(line)") }
        }
        #expect(named.count == 20_000 && Set(named.keys) == Set(1...20_000), "\(named.count) rows named")
        await #expect(try cluster.psql(db, "SELECT string_agg(id::text, ',' ORDER BY id) FROM herald_rows WHERE outcome = 'dropped'")
            == named.filter { $0.value == "dropped" }.keys.sorted().map(String.init).joined(separator: ","))

        await #expect(try tally(cluster, db) == ["done|accepted": 20_000 - malformed, "done|dropped": malformed])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1 OR possible_duplicate OR finished_at IS NULL") == "0")
        // The three kinds of malformed line, each with its own reason.
        let reasons = try await cluster.psql(db, "SELECT DISTINCT split_part(regexp_replace(reason, '^row [0-9]+: ', ''), ' at line', 1) FROM herald_rows WHERE outcome = 'dropped' ORDER BY 1")
        #expect(reasons.split(separator: "\n").count == 3, "\(reasons)")
        #expect(reasons.contains("unknown key \"colour\""), "\(reasons)")

        // Nothing left: a second drain ends at once, with nothing entered.
        let again = try await runHerald(["work", "--config", config, "--drain"])
        let againSummary = try lastObject(again.stderr)["summary"] as? [String: Any]
        #expect(again.status == 0 && againSummary?["entered"] as? Int == 0, "\(again.stderr)")
    }

    @Test("enqueued through COPY, every row holds its text exactly: backslashes, tabs, carriage returns, newlines, COPY's end marker, non-ASCII")
    func copyKeepsText() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db)
        let bodies = ["a\tb", #"{"alert":"back\\slash \n \\N"}"#, "cr\r", "two\nlines", #"\."#, "\\", "é ✓ 🚀", ""]
        #expect(try await queue.enqueue(bodies) == bodies.count)
        #expect(try await queue.enqueue([]) == 0)
        await queue.close()
        let stored = try await cluster.psql(db, "SELECT string_agg(encode(convert_to(body, 'UTF8'), 'hex'), ',' ORDER BY id) FROM notifications")
        #expect(stored == bodies.map { Array($0.utf8).withUnsafeBytes { Hex.string($0) } }.joined(separator: ","))
    }

    @Test("a line PostgreSQL's text cannot hold is not enqueued: counted, named by line, exit 3; the others are")
    func unstorableLine() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db)
        let lines = requestLines(3).lines
        let path = temporaryDirectory() + "/bad.jsonl"
        var bytes = Array((lines[0] + "\n").utf8)
        bytes += Array(#"{"id":1,"token":"#.utf8) + [0xFF, 0xFE] + Array("\"}\n".utf8)
        bytes += Array((lines[2] + "\n").utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let r = try await runHerald(["enqueue", "--config", config, path])
        #expect(r.status == 3, "\(r.stderr)")
        let report = try lastObject(r.stdout)
        #expect(report["enqueued"] as? Int == 2 && report["not_enqueued"] as? Int == 1, "\(report)")
        #expect((report["not_enqueued_first"] as? String)?.contains("line 2: not valid UTF-8") == true, "\(report)")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM notifications") == "2")
    }

    @Test("a configuration without a usable queue section is refused, naming the key")
    func badConfiguration() async throws {
        let path = try temporaryFile(#"{"queue":{"type":"postgres","port":"five"}}"#, suffix: ".json")
        let r = try await runHerald(["work", "--config", path, "--drain"])
        #expect(r.status == 1 && r.stderr.contains("queue.port: must be an integer"), "\(r.stderr)")
    }

    @Test("tokens.type postgres: the dead tokens one worker process learns are suppressed by the next, through the shared table")
    func sharedTokenStore() async throws {
        let (cluster, db) = try await freshDatabase()
        let dead = String(repeating: "de", count: 32), alive = String(repeating: "a1", count: 32)
        let config = temporaryDirectory() + "/herald.json"
        try #"""
        {"queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","poll":0.1},
         "tokens":{"type":"postgres"},"transport":{"type":"simulator","invalidTokens":["\#(dead)"]}}
        """#.write(toFile: config, atomically: true, encoding: .utf8)
        let lines = (0..<200).map { #"{"id":\#($0),"token":"\#($0 % 10 == 0 ? dead : alive)","alert":"n\#($0)"}"# }
        let file = try temporaryFile(lines.joined(separator: "\n") + "\n")
        for round in 0..<2 {
            #expect(try await runHerald(["enqueue", "--config", config, file]).status == 0)
            let work = try await runHerald(["work", "--config", config, "--drain"])
            #expect(work.status == 0, "\(work.stderr)")
            let summary = try lastObject(work.stderr)["summary"] as? [String: Any] ?? [:]
            #expect((summary["queue"] as? [String: Any])?["token_changes_not_written"] as? Int == 0, "\(summary)")
            // First worker: APNs (the simulator) rejects the dead token; the second suppresses it before sending.
            #expect(summary[round == 0 ? "rejected" : "suppressed"] as? Int == 20 && summary["accepted"] as? Int == 180, "round \(round): \(summary)")
        }
        await #expect(try cluster.psql(db, "SELECT encode(token, 'hex') || '|' || unregistered_source FROM herald_tokens") == "\(dead)|status-8")
        await #expect(try tally(cluster, db) == ["done|accepted": 360, "done|rejected": 20, "done|suppressed": 20])
    }

    @Test("herald bench queue, small: one JSON object with each count's best rate and every round's, pgbench's bare statements beside them, and the goal's two checks")
    func benchQueue() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db)
        let pgbench = try #require(PostgresCluster.binaries) + "/pgbench"
        let r = try await runHerald(["bench", "queue", "--config", config, "--count", "3000", "--workers", "1,2", "--rounds", "2", "--producers", "2", "--pgbench", pgbench])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try lastObject(r.stdout)
        #expect(report["benchmark"] as? String == "queue" && report["notifications"] as? Int == 3000 && report["rounds"] as? Int == 2 && report["producers"] as? Int == 2)
        for key in ["send", "workers_1", "workers_2"] {
            let rounds = report["\(key)_rounds_per_s"] as? [Double] ?? []
            #expect(rounds.count == 2 && rounds.allSatisfy { $0 > 0 } && report["\(key)_per_s"] as? Double == rounds.max(), "\(key): \(report)")
        }
        let cores = try #require(report["cores"] as? Int)
        for n in [1, 2] {
            let shares = report["workers_\(n)_rounds_enqueue_share"] as? [Double] ?? []
            #expect(shares.count == 2 && shares.allSatisfy { $0 > 0 && $0 <= 1 }, "\(report)")
            // The run keeps this machine's cores busy (the workers, the database): how busy, of how many.
            let busy = report["workers_\(n)_rounds_cores_busy"] as? [Double] ?? []
            #expect(busy.count == 2 && busy.allSatisfy { $0 > 0 && $0 <= Double(cores) + 0.01 }, "\(report)")
            // Where the CPU went: the herald work processes, the server (it runs here), the herald enqueue processes.
            for side in ["workers", "postgres", "producers"] {
                let cpu = report["workers_\(n)_rounds_cpu_\(side)_s"] as? [Double] ?? []
                #expect(cpu.count == 2 && cpu.allSatisfy { $0 > 0 }, "\(side): \(report)")
            }
        }
        #expect(report["postgres_cpu_measured"] as? Bool == true, "\(report)")
        let sendCPU = report["send_rounds_cpu_s"] as? [Double] ?? []
        #expect(sendCPU.count == 2 && sendCPU.allSatisfy { $0 > 0 }, "\(report)")
        #expect((report["pgbench_1_rows_per_s"] as? Double ?? 0) > 0 && (report["pgbench_2_rows_per_s"] as? Double ?? 0) > 0, "\(report)")
        let ratio = try #require(report["ratio_1_worker_to_send"] as? Double)
        #expect(abs(ratio - (report["workers_1_per_s"] as! Double) / (report["send_per_s"] as! Double)) < 0.001)
        #expect(report["more_workers_never_slower"] is Bool)
        // The bench leaves the queue empty.
        await #expect(try cluster.psql(db, "SELECT count(*) FROM notifications") == "0")
    }
}

@Suite("herald work as a service", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct QueueServiceTests {
    @Test("without --drain: rows enqueued while it idles are sent (NOTIFY wakes it); SIGINT ends it with every outcome written, exit 0")
    func serviceUntilSignal() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db)
        // The schema first, so the worker and the enqueuer do not race to make it.
        let queue = try await openQueue(cluster, db)
        let p = Process()
        p.executableURL = try heraldExecutable()
        p.arguments = ["work", "--config", config]
        p.standardOutput = FileHandle.nullDevice
        let err = try startPiping(\.standardError, of: p)
        try await Task.sleep(for: .milliseconds(500))
        for round in 0..<3 {
            #expect(try await queue.enqueue(requestLines(1000).lines) == 1000, "round \(round)")
            try await Task.sleep(for: .milliseconds(200))
        }
        await queue.close()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(30)
        while try await cluster.psql(db, "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes") != "3000" && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(p.isRunning, "the worker keeps running once the queue is empty")
        p.interrupt()
        let reader = err.fileHandleForReading
        let stderr = try await offPool { String(decoding: reader.readDataToEndOfFile(), as: UTF8.self) }
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data((stderr.split(separator: "\n").last ?? "").utf8)) as? [String: Any])["summary"]
            as? [String: Any]
        #expect(summary?["entered"] as? Int == 3000 && summary?["balanced"] as? Bool == true, "\(stderr)")
        await #expect(try tally(cluster, db) == ["done|accepted": 3000])
    }

    @Test("herald prune deletes rows finished longer ago than --older-than, in chunks; queued rows and recent ones stay; a bad age is refused")
    func prune() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db)
        let lines = requestLines(100).lines
        let file = try temporaryFile(lines.joined(separator: "\n") + "\n")
        // 60 rows finished 8 days ago (in as many outcome groups as the worker wrote), then 40 now.
        #expect(try await runHerald(["enqueue", "--config", config, try temporaryFile(lines.prefix(60).joined(separator: "\n") + "\n")]).status == 0)
        #expect(try await runHerald(["work", "--config", config, "--drain"]).status == 0)
        _ = try await cluster.psql(db, "UPDATE herald_outcomes SET finished_at = now() - interval '8 days'")
        #expect(try await runHerald(["enqueue", "--config", config, try temporaryFile(lines.suffix(40).joined(separator: "\n") + "\n")]).status == 0)
        #expect(try await runHerald(["work", "--config", config, "--drain"]).status == 0)
        #expect(try await runHerald(["enqueue", "--config", config, file]).status == 0)  // 100 more, left queued
        _ = try await cluster.psql(
            db, "UPDATE notifications SET enqueued_at = now() - interval '30 days' WHERE id NOT IN (SELECT unnest(ids) FROM herald_outcomes)")
        let pruned = try await runHerald(["prune", "--config", config, "--older-than", "7d", "--chunk", "25"])
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(try lastObject(pruned.stdout)["deleted"] as? Int == 60)
        await #expect(try tally(cluster, db) == ["done|accepted": 40, "queued|-": 100])
        let bad = try await runHerald(["prune", "--config", config, "--older-than", "7w"])
        #expect(bad.status != 0 && bad.stderr.contains("older-than"), "\(bad.stderr)")
    }

    @Test("herald work with apps (issue 30): rows go to their app by topic or app key, outcome lines name it, a row for no app is done dropped with the reason")
    func workWithApps() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = temporaryDirectory() + "/herald.json"
        try #"""
        {"queue":{"type":"postgres","host":"\#(cluster.host)","port":\#(cluster.port),"user":"\#(cluster.user)","database":"\#(db)","poll":0.1},
         "apps":[{"name":"chat","topics":["com.a.chat"],"transport":{"type":"http2-simulator","bundleID":"com.a.chat"}},
                 {"name":"news","topics":["com.b.news"],"transport":{"type":"http2-simulator","bundleID":"com.b.news"}}]}
        """#.write(toFile: config, atomically: true, encoding: .utf8)
        let lines = (0..<30).map { i in
            [#"{"id":\#(i),"token":"\#(goodToken)","topic":"com.a.chat","alert":"a"}"#,
             #"{"id":\#(i),"token":"\#(goodToken)","app":"news","alert":"b"}"#,
             #"{"id":\#(i),"token":"\#(goodToken)","topic":"com.z.none","alert":"c"}"#][i % 3]
        }
        let file = try temporaryFile(lines.joined(separator: "\n") + "\n")
        #expect(try await runHerald(["enqueue", "--config", config, file]).status == 0)
        let outcomes = temporaryDirectory() + "/outcomes.jsonl"
        let work = try await runHerald(["work", "--config", config, "--drain", "--outcomes", outcomes])
        #expect(work.status == 0, "\(work.stderr)")
        var apps: [String: Int] = [:]
        for line in try String(contentsOfFile: outcomes, encoding: .utf8).split(separator: "\n") {
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            let key = "\(o["app"] as? String ?? "-")|\(o["outcome"] as? String ?? "?")"
            apps[key, default: 0] += 1
            if o["app"] == nil { #expect((o["reason"] as? String)?.contains("no app has topic") == true, "\(line)") }
        }
        #expect(apps == ["chat|accepted": 10, "news|accepted": 10, "-|dropped": 10], "\(apps)")
        await #expect(try tally(cluster, db) == ["done|accepted": 20, "done|dropped": 10])
    }
}

@Suite("A worker killed mid-run", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct QueueCrashTests {
    @Test("SIGKILL mid-run leaves its rows leased; another worker takes them once the lease expires: every row ends once, the retaken ones marked possible_duplicate")
    func killedWorker() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db, lease: 2)
        let queue = try await openQueue(cluster, db)
        let lines = requestLines(1000).lines
        // 100,000 rows: a worker made faster (this stop's token parsing) once finished 40,000
        // before the polling below saw its first 3,000, five times in a row, and held nothing.
        let total = 100_000
        for _ in 0..<(total / 1000) { #expect(try await queue.enqueue(lines) == 1000) }
        await queue.close()

        // Killed while it holds a lease. It may hold none for a moment (the other tests share this
        // server, and a claim takes only rows older than every write transaction still running on
        // it), so the kill waits for a lease; and when the worker let that lease go just before it
        // died (its last write committed after the kill), a new worker is started and killed again.
        var done = 0, held = 0
        for _ in 0..<5 where held == 0 {
            let p = Process()
            p.executableURL = try heraldExecutable()
            p.arguments = ["work", "--config", config]
            let log = try temporaryFile("", suffix: ".log")
            p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            p.standardOutput = FileHandle.nullDevice
            try startProcess { try p.run() }
            done = try await waitUntilDone(cluster, db, atLeast: done + 3000, while: p)
            #expect(p.isRunning, "the worker ended before the kill: \((try? String(contentsOfFile: log, encoding: .utf8))?.suffix(600) ?? "")")
            let clock = ContinuousClock(), by = clock.now + .seconds(30)
            while p.isRunning && clock.now < by,
                try await cluster.psql(db, "SELECT count(*) FROM herald_leases WHERE owner LIKE '%:\(p.processIdentifier):%'") == "0"
            {
                try await Task.sleep(for: .milliseconds(1))
            }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            // Counted once the dead worker's last statements have ended: one CI run counted 2,000 rows
            // leased while an outcome write of 256 of them was still committing.
            try await waitForOtherSessionsToEnd(cluster, db)
            held = await Int(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE state = 'leased'")) ?? 0
        }
        #expect(done >= 3000 && done < total && held > 0, "killed with \(done) done, \(held) leased")

        let r = try await runHerald(["work", "--config", config, "--drain"])
        #expect(r.status == 0, "\(r.stderr)")
        await #expect(try tally(cluster, db) == ["done|accepted": total])
        // The rows the dead worker held, and only those, were claimed twice and are marked.
        let marked = try await cluster.psql(db, "SELECT count(*) FILTER (WHERE possible_duplicate), count(*) FILTER (WHERE attempts = 2), max(attempts) FROM herald_rows")
        #expect(marked == "\(held)|\(held)|2", "\(held) held at the kill")
        let queueSummary = (try lastObject(r.stderr)["summary"] as? [String: Any])?["queue"] as? [String: Any]
        #expect(queueSummary?["possible_duplicates"] as? Int == held, "\(r.stderr)")
    }

    // Under load this test found a worker that hung for good after the database came back: a
    // statement whose connection the shutdown cut never got an answer (postgres-nio 1.33 left the
    // query waiting), so its outcome write never ended. Statements now give up after answerTimeout
    // (10 s here) and are retried as after a lost connection.
    @Test("the database goes away mid-run for longer than a lease (a fast shutdown, 8 s with nothing listening, back on the same port): herald work waits, reconnects and finishes; every row sent and done once, none claimed twice")
    func databaseOutage() async throws {
        // A server of its own: the shared one serves the other tests.
        let cluster = try await offPool { try PostgresCluster() }
        defer { cluster.stop() }
        let db = try await cluster.createDatabase()
        let config = try configurationFile(cluster, db, lease: 5, extra: #","answerTimeout":10"#)
        let queue = try await openQueue(cluster, db)
        let lines = requestLines(1000).lines
        // Enough rows that the worker is still at work when the test looks (a CI run's worker, faster
        // than the test's polling, finished 40,000 before the outage could come).
        let total = 100_000
        for _ in 0..<(total / 1000) { #expect(try await queue.enqueue(lines) == 1000) }
        await queue.close()

        let errorLog = temporaryDirectory() + "-work.log"
        try Data().write(to: URL(fileURLWithPath: errorLog))
        defer { try? FileManager.default.removeItem(atPath: errorLog) }
        let p = Process()
        p.executableURL = try heraldExecutable()
        p.arguments = ["work", "--config", config, "--drain"]
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorLog))
        p.standardOutput = FileHandle.nullDevice
        try startProcess { try p.run() }
        // Not left behind, stopped or running, if the test ends early.
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        _ = try await waitUntilDone(cluster, db, atLeast: 3000, while: p)
        // Held mid-run while the server goes down (its connections are cut under it), then let go
        // into the outage: however fast the worker, the outage comes with its rows in flight.
        kill(p.processIdentifier, SIGSTOP)
        let done = Int(try await cluster.psql(db, "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes")) ?? -1
        #expect(p.isRunning && done >= 3000 && done < total, "the outage came with \(done) done")
        // Longer than the lease: the leases of the rows in flight expire meanwhile, and still this
        // worker's own claims must not take them back.
        let outage = Task { try await cluster.restart(downFor: .seconds(8)) }
        while (try? await cluster.psql(db, "SELECT 1")) != nil { try await Task.sleep(for: .milliseconds(20)) }
        kill(p.processIdentifier, SIGCONT)
        try await outage.value
        // The outage fell in the middle of the run: work was left when the database came back.
        let left = Int(try await cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE state <> 'done'")) ?? 0
        #expect(p.isRunning && left > 0, "\(left) rows left after the outage; \(((try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? "").suffix(1500))")
        let clock = ContinuousClock(), deadline = clock.now + .seconds(180)
        while p.isRunning && clock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let hung = p.isRunning
        if hung {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        let stderr = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
        #expect(!hung && p.terminationStatus == 0, "\(hung ? "still running 180 s after the outage; " : "")\(stderr.suffix(3000))")
        // A statement the shutdown cut off is reported and retried ("retrying in …"); one that waited
        // for a connection while the server was down simply waited: either way nothing is lost.

        await #expect(try tally(cluster, db) == ["done|accepted": total])
        let marked = try await cluster.psql(
            db, "SELECT string_agg(n || ' rows claimed ' || attempts || ' times', ', ') FROM (SELECT attempts, count(*) AS n FROM herald_rows WHERE attempts <> 1 OR possible_duplicate GROUP BY 1) a")
        #expect(marked.isEmpty, "\(marked): \(stderr.suffix(3000))")
        let summary = (try? JSONSerialization.jsonObject(with: Data((stderr.split(separator: "\n").last.map(String.init) ?? "").utf8))) as? [String: Any]
        let queueSummary = (summary?["summary"] as? [String: Any])?["queue"] as? [String: Any]
        #expect(queueSummary?["not_written"] as? Int == 0 && queueSummary?["rows_written"] as? Int == total && queueSummary?["lease_lost"] as? Int == 0,
                "\(stderr.suffix(1000))")
        #expect((summary?["summary"] as? [String: Any])?["entered"] as? Int == total, "each row sent once: \(stderr.suffix(1000))")
    }
}
