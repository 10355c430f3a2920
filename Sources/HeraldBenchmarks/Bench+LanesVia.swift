import Foundation
import HeraldCore
import HeraldHTTP2Transport
import HeraldJSON
import HeraldKit
import HeraldPostgres
import HeraldService
import Logging
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `herald bench lanes --via serve` and `--via queue`: the same campaign and fast-lane
/// notifications as through `HeraldClient`, entering through the service's API or the queue.
extension BenchLanes {
    /// Request line `i` (JSON Lines, with its newline): ``request(_:priority:)``'s token and priority.
    static func line(_ i: Int, priority: UInt8) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        w.raw("{\"id\":")
        w.int(i)
        w.raw(",\"token\":")
        w.string(request(i, priority: priority).token.hex)
        w.raw(",\"topic\":")
        w.string(topic)
        w.raw(",\"priority\":")
        w.int(Int(priority))
        w.raw(priority == 10 ? ",\"alert\":{\"body\":\"Your code is 123456\"}}\n" : ",\"alert\":{\"body\":\"Spring sale: 20% off\"}}\n")
        return w.bytes
    }

    /// Calls `submit(k)` for k = 0, 1, … every 1/`rate` s (at once again when late) until `done(k)`
    /// says so; how many were submitted.
    static func inject(rate: Int, until done: (Int) async throws -> Bool, _ submit: (Int) async throws -> Void) async throws -> Int {
        let clock = ContinuousClock()
        let every = Duration.seconds(1) / max(1, rate)
        var due = clock.now
        var k = 0
        while try await !done(k) {
            try await submit(k)
            k += 1
            due += every
            if due > clock.now { try await Task.sleep(until: due, clock: clock) }
        }
        return k
    }

    // MARK: - Through herald serve

    /// When each fast-lane notification (ids from `fastFrom`) was POSTed and got its outcome, and
    /// how many of the campaign's have.
    final class OutcomeTimes: OutcomeObserver {
        let fastFrom: UInt32
        let bulkDone = Atomic<Int>(0)
        let fast = Mutex<[UInt32: ContinuousClock.Instant]>([:])
        let submitted = Mutex<[UInt32: ContinuousClock.Instant]>([:])
        init(fastFrom: Int) { self.fastFrom = UInt32(fastFrom) }

        func observe(_ records: [OutcomeRecord]) {
            let now = ContinuousClock.now
            var bulk = 0
            fast.withLock { fast in
                for r in records {
                    guard let id = r.id else { continue }
                    if id >= fastFrom { fast[id] = now } else { bulk += 1 }
                }
            }
            bulkDone.add(bulk, ordering: .relaxed)
        }
    }

    func viaServe(_ bulk: Int, fast: Bool, target: Target) async throws -> Run {
        let token = "bench-lanes-token-0123456789abcdef"
        setenv("HERALD_BENCH_API_TOKEN", token, 1)
        // Room for the whole campaign: every notification of it in flight at once.
        let path = target.dir + "/serve.json"
        try #"{"serve":{"apiTokensEnv":"HERALD_BENCH_API_TOKEN","queue":\#(bulk + 100_000),"keepOutcomes":\#(bulk + 100_000),"port":0}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        let serveConfiguration = try ServiceConfiguration.load(try ConfigNode.load(path: path).child("serve"))
        var logger = Logger(label: "herald-bench")
        logger.logLevel = .warning
        let transport = try HTTP2Transport(configuration: target.transportConfiguration())
        let times = OutcomeTimes(fastFrom: bulk)
        let service = try HeraldService(configuration: serveConfiguration, logger: logger, observers: [times]) { source, ledger, metrics in
            try HeraldAssembly().makePipeline(source: source, ledger: ledger, transport: transport, metrics: metrics)
        }
        let listening = AsyncStream<Int>.makeStream()
        let runner = Task { try await service.run { listening.continuation.yield($0) } }
        var iterator = listening.stream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw BenchError("lanes: the service did not start") }

        // Connected and warm before the clock starts: ten fast ones, each to its outcome.
        let warm = (0..<10).map { Self.line(bulk + 1_000_000 + $0, priority: 10) }
        var body = ByteBuffer()
        for l in warm { body.writeBytes(l) }
        _ = try await BenchServe.post([body], port: port, token: token)
        while times.fast.withLock({ $0.count }) < warm.count { try await Task.sleep(for: .milliseconds(1)) }
        times.fast.withLock { $0 = [:] }

        let batch = self.batch, posters = self.posters, fastRate = self.fastRate
        let posted = Counter()
        let clock = ContinuousClock(), started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<posters {
                group.addTask {
                    var bodies: [ByteBuffer] = []
                    for b in stride(from: p * batch, to: bulk, by: posters * batch) {
                        var body = ByteBuffer()
                        for i in b..<min(bulk, b + batch) { body.writeBytes(Self.line(i, priority: 5)) }
                        bodies.append(body)
                    }
                    try await BenchServe.withPoster(port: port, token: token) { post in
                        for body in bodies {
                            guard try await post(body) == 202 else { throw BenchError("lanes: a campaign POST was not accepted") }
                            posted.add()
                        }
                    }
                }
            }
            if fast {
                group.addTask {
                    // From when every poster's first batch is in until the campaign's last outcome.
                    while posted.value < posters { try await Task.sleep(for: .milliseconds(1)) }
                    try await BenchServe.withPoster(port: port, token: token) { post in
                        _ = try await Self.inject(rate: fastRate, until: { _ in times.bulkDone.load(ordering: .relaxed) >= bulk }) { k in
                            let id = bulk + k
                            var body = ByteBuffer()
                            body.writeBytes(Self.line(id, priority: 10))
                            times.submitted.withLock { $0[UInt32(id)] = clock.now }
                            guard try await post(body) == 202 else { throw BenchError("lanes: fast POST \(id) not accepted") }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        while times.bulkDone.load(ordering: .relaxed) < bulk { try await Task.sleep(for: .milliseconds(1)) }
        let seconds = (clock.now - started).inSeconds
        let sent = times.submitted.withLock { $0 }
        while times.fast.withLock({ $0.count }) < sent.count { try await Task.sleep(for: .milliseconds(1)) }
        let outcomes = times.fast.withLock { $0 }
        kill(getpid(), SIGTERM)
        let books = try await runner.value
        guard books.isBalanced, books.accepted == UInt64(bulk + sent.count + warm.count) else { throw BenchError("lanes: serve's books \(books)") }
        let fastMs = sent.map { id, at in (outcomes[id]! - at).inSeconds * 1000 }
        return Run(bulkPerSecond: Double(bulk) / seconds, fastMs: fastMs.sorted(), transportWindow: transport.bulkWindow)
    }

    // MARK: - Through the queue

    func viaQueue(_ bulk: Int, fast: Bool, target: Target) async throws -> Run {
        guard let config else { throw BenchError("--via queue needs --config, a configuration with a queue section") }
        guard (1...16).contains(workers) else { throw BenchError("--workers: 1 to 16") }
        let queueConfiguration = try PostgresQueueConfiguration.load(try ConfigNode.load(path: config).child("queue"))
        let control = PostgresQueue(configuration: queueConfiguration, owner: "bench-lanes").start()
        do {
            let run = try await viaQueue(bulk, fast: fast, target: target, control: control, config: config)
            await control.close()
            return run
        } catch {
            await control.close()
            throw error
        }
    }

    /// The worker's configuration: the given one's sections, its transport the simulator's.
    func workerConfiguration(_ config: String, target: Target) throws -> String {
        guard let root = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: config))) as? [String: Any] else {
            throw BenchError("\(config): not a JSON object")
        }
        let keyFile = target.dir + "/bench-key.p8"
        guard FileManager.default.createFile(atPath: keyFile, contents: Data(target.keyPEM.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw BenchError("cannot write \(keyFile)")
        }
        var sections = root
        sections["transport"] = [
            "type": "http2", "host": "127.0.0.1", "port": target.port, "serverName": "localhost", "caFile": target.caFile,
            "maxStreams": target.streams, "connections": 1, "fastLaneConnection": target.fastConnection,
            "providerToken": ["keyFile": keyFile, "keyID": target.key.keyID, "teamID": target.key.teamID],
        ] as [String: Any]
        let path = target.dir + "/work.json"
        try JSONSerialization.data(withJSONObject: sections, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    func viaQueue(_ bulk: Int, fast: Bool, target: Target, control: PostgresQueue, config: String) async throws -> Run {
        try await control.migrate()
        try await control.removeEveryRow()
        let workConfig = try workerConfiguration(config, target: target)
        let herald = try BenchProcess.selfExecutable()
        let processes = try (0..<workers).map { try BenchProcess(herald, ["work", "--config", workConfig], log: target.dir + "/worker-\($0).log") }
        defer { for p in processes { p.terminate() } }
        func text(_ line: [UInt8]) -> String { String(decoding: line.dropLast(), as: UTF8.self) }
        // Connected and warm before the clock starts: ten fast ones through each worker's claims.
        let warm = (0..<10 * workers).map { text(Self.line(bulk + 1_000_000 + $0, priority: 10)) }
        let warmIDs = try await control.enqueueReturningIDs(warm, placements: warm.map { _ in .init(lane: .fast) })
        try await BenchQueue.waitForDone(warm.count, control: control, workers: processes)

        // The campaign, committed at once: a million rows in flight as far as the queue goes.
        let campaign = (0..<bulk).map { text(Self.line($0, priority: 5)) }
        let clock = ContinuousClock()
        let copyStarted = clock.now
        guard try await control.enqueue(campaign, placements: campaign.map { _ in .init(lane: .bulk) }) == bulk else {
            throw BenchError("lanes: the campaign's COPY did not insert every row")
        }
        let copySeconds = (clock.now - copyStarted).inSeconds
        var injected = 0
        if fast {
            // One row a transaction, as an application enqueues an alert; until the outcomes written
            // reach the campaign's count (its last hundredth or so then goes without fast traffic).
            injected = try await Self.inject(rate: fastRate, until: { k in
                guard k % 10 == 0 else { return false }
                return try await control.benchOutcomesWritten().rows >= warm.count + bulk
            }) { k in
                let body = text(Self.line(bulk + k, priority: 10))
                _ = try await control.enqueueReturningIDs([body], placements: [.init(lane: .fast)])
            }
        }
        try await BenchQueue.waitForDone(warm.count + bulk + injected, control: control, workers: processes)
        for p in processes { p.terminate() }
        for p in processes { try await p.exit(expecting: 0) }
        let lanes = try await control.benchLaneTimes(after: warmIDs.max() ?? 0)
        guard lanes.bulkRows == bulk, lanes.fastMs.count == injected else {
            throw BenchError("lanes: \(lanes.bulkRows) of \(bulk) bulk and \(lanes.fastMs.count) of \(injected) fast rows have outcomes")
        }
        // From the campaign's commit (its transaction's start, enqueued_at, plus the COPY) to its last outcome.
        return Run(bulkPerSecond: Double(bulk) / (lanes.bulkSpan - copySeconds), fastMs: lanes.fastMs.sorted(), transportWindow: nil)
    }
}
