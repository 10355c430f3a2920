import ArgumentParser
import Crypto
import Foundation
import HeraldClient
import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldJSON
import HeraldKit
import HeraldOpenSSL
import HeraldSimulator
import HeraldTesting
import NIOCore
import NIOPosix
import Synchronization

/// `herald bench lanes`: a campaign in the bulk lane and one-off notifications
/// in the fast lane through one `HeraldClient`, to the HTTP/2 simulator served
/// over TLS on loopback, whose answers come `--answer-ms` late (APNs' own
/// latency, so the campaign fills every stream): how long a fast-lane
/// notification takes from `send` to its outcome while the campaign is in
/// flight, and what the fast lane costs the campaign, against the same
/// campaign alone in the same run.
struct BenchLanes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lanes",
        abstract: "Fast-lane latency under a bulk campaign, and the campaign's rate beside the same campaign alone.",
        discussion: """
            One HeraldClient, one HTTP/2 connection (--streams concurrent streams) over TLS to the HTTP/2 \
            simulator on loopback answering --answer-ms late. Runs (1) --count bulk-lane notifications \
            (priority 5), sent in batches by --senders tasks, timed; (2) the same campaign again while one \
            task sends a fast-lane notification (priority 10) every 1/--fast-rate s, each timed from send to \
            outcome, from when the campaign is under way until it ends; (3) with --no-window-count > 0, \
            that many bulk and the same fast sends with the client's bulk window off, for comparison. With \
            --rounds N, (1) and (2) N times in turn: each one's best rate counts, and the fast sends of every \
            round. Goal (issue 30): fast-lane p99 under 50 ms, the campaign with fast traffic at least 0.9x \
            alone. The simulator's channels run on event loops of their own (it stands for APNs, another \
            machine), not on the client's.

            --via serve: the same through herald serve's API, in this process (the HTTP/2 transport as \
            above): the campaign POSTed in batches of --batch over --posters connections, the fast \
            notifications POSTed one at a time on a connection of their own, each timed from its POST to \
            its outcome (an outcome observer). --via queue: through the PostgreSQL queue of --config (its \
            rows are emptied: a database of its own) and --workers herald work processes sending to the \
            simulator: the campaign committed at once (one COPY), the fast notifications enqueued one a \
            transaction, each timed from its enqueue to its outcome's row (the database's clock: \
            enqueued_at to finished_at).
            """
    )

    @Option(help: "Bulk-lane notifications in the campaign.") var count = 1_000_000
    @Option(help: "Tasks sending the campaign at once, each in batches of --batch (1,000 × 1,000: the whole campaign awaiting its outcomes).") var senders = 1000
    @Option(help: "Notifications per batch send of the campaign.") var batch = 1000
    @Option(help: "Fast-lane notifications per second while the campaign runs.") var fastRate = 100
    @Option(help: "The simulator's answer latency, in milliseconds.") var answerMs = 20
    @Option(help: "Concurrent streams on the connection.") var streams = 1000
    @Option(help: "Bulk notifications in a third run with the client's bulk window off (0: not run; --via client).") var noWindowCount = 0
    @Option(help: "Where notifications go in: client (HeraldClient.send), serve (herald serve's API), queue (the PostgreSQL queue and herald work).") var via: Via = .client
    @Option(help: "--via serve: HTTP connections POSTing the campaign.") var posters = 4
    @Option(help: "--via queue: configuration file (JSON) with a queue section; its transport is replaced by the simulator's.") var config: String?
    @Option(help: "--via queue: herald work processes.") var workers = 1
    @Flag(inversion: .prefixedNo, help: "The fast lane on a connection of its own (the transport's fastLaneConnection, on by default), beside the campaign's one; --no-fast-connection: both lanes on the campaign's.") var fastConnection = true
    @Option(help: "Rounds, each the campaign alone then with fast traffic: each side's best rate counts, and every round's fast sends.") var rounds = 1

    enum Via: String, ExpressibleByArgument, CaseIterable { case client, serve, queue }

    static let topic = "com.example.app"

    static func request(_ i: Int, priority: UInt8) -> NotificationRequest {
        var aps = APS()
        aps.alert = Alert(body: priority == 10 ? "Your code is 123456" : "Spring sale: 20% off")
        var g = SeededGenerator(seed: UInt64(i) &+ 0x30)
        var words = (g.next(), g.next(), g.next(), g.next())
        var r = NotificationRequest(token: withUnsafeBytes(of: &words) { DeviceToken(copying: $0) }, aps: aps, id: UInt32(truncatingIfNeeded: i), topic: topic)
        r.priority = Priority(rawValue: priority)
        return r
    }

    /// The simulator server, and how to reach it.
    struct Target: Sendable {
        var port: Int
        var caFile: String
        var key: ProviderTokenKey
        var keyPEM: String
        var streams: Int
        var dir: String
        var fastConnection = false

        /// One connection of `streams` streams, as the campaign's client and the service use.
        func transportConfiguration() -> HTTP2TransportConfiguration {
            var c = HTTP2TransportConfiguration(host: "127.0.0.1", port: port, tls: .client(identity: nil, trust: .caFile(caFile)), providerToken: key)
            c.serverName = "localhost"
            c.delivery.connections = 1
            c.fastLaneConnection = fastConnection
            c.maxStreamsPerConnection = streams
            return c
        }
    }

    /// What one run measured.
    struct Run {
        var bulkPerSecond: Double
        var fastMs: [Double]
        /// The transport's bulk window (``LaneWindowing``), where it is in this process.
        var transportWindow: Int?
    }

    func run() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-lanes-\(UUID().uuidString)").path
        let certs = try ThrowawayCertificates.make(in: dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let signing = P256.Signing.PrivateKey()
        let key = try ProviderTokenKey(pem: signing.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        let simulator = try BenchHTTP2.simulator(topic: Self.topic, key: key, maxStreams: streams)
        // The simulator stands for APNs, another machine: its channels on threads of their own, never on
        // the client's event loops (sharing a loop, a connection's two ends took one core between them,
        // and which loop each end got decided the campaign's rate).
        let serverGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let server = try await HTTP2SimulatorServer.start(
            simulator: simulator, tls: .server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: nil),
            answerDelay: .milliseconds(answerMs), group: serverGroup)

        let batch = self.batch, tasks = senders, fastRate = self.fastRate, streams = self.streams
        let target = Target(
            port: server.port, caFile: certs.caCertificate, key: key, keyPEM: signing.pemRepresentation, streams: streams, dir: dir,
            fastConnection: fastConnection)
        func campaign(_ bulk: Int, fast: Bool, window: Int?) async throws -> Run {
            switch via {
            case .client: break
            case .serve: return try await viaServe(bulk, fast: fast, target: target)
            case .queue: return try await viaQueue(bulk, fast: fast, target: target)
            }
            let transport = try HTTP2Transport(configuration: target.transportConfiguration())
            let client = try HeraldClient(assembly: HeraldAssembly(), transport: transport, options: .init(bulkWindow: window))
            let runner = Task { try await client.run() }
            // Connected and warm before the clock starts.
            for i in 0..<10 where try await !client.send(Self.request(100_000_000 + i, priority: 10)).isAccepted { throw BenchError("lanes: warm-up send not accepted") }
            let notAccepted = Counter(), started = Counter()
            let campaignDone = Counter()
            let batches = (bulk + batch - 1) / batch
            let next = Counter()
            var fastMs: [Double] = []
            let seconds = try await measure {
                try await withThrowingTaskGroup(of: [Double].self) { group in
                    group.addTask {
                        try await withThrowingDiscardingTaskGroup { sending in
                            for _ in 0..<tasks {
                                sending.addTask {
                                    while true {
                                        let b = next.take()
                                        guard b < batches else { return }
                                        let requests = (b * batch..<min(bulk, (b + 1) * batch)).map { Self.request($0, priority: 5) }
                                        started.add()
                                        for o in try await client.send(requests) where !o.isAccepted { notAccepted.add() }
                                    }
                                }
                            }
                        }
                        campaignDone.add()
                        return []
                    }
                    if fast {
                        group.addTask {
                            // From when the campaign is under way (every sender's first batch in) until it ends.
                            while started.value < min(batches, tasks) { try await Task.sleep(for: .milliseconds(1)) }
                            // Injected at the rate whatever the answers' latency: each send a task of its own.
                            let times = try await withThrowingTaskGroup(of: Double.self) { sends in
                                _ = try await Self.inject(rate: fastRate, until: { _ in campaignDone.value != 0 }) { k in
                                    let n = bulk + k
                                    sends.addTask {
                                        let start = ContinuousClock.now
                                        guard try await client.send(Self.request(n, priority: 10)).isAccepted else { throw BenchError("lanes: fast send \(n) not accepted") }
                                        return (ContinuousClock.now - start).inSeconds * 1000
                                    }
                                }
                                var times: [Double] = []
                                for try await t in sends { times.append(t) }
                                return times
                            }
                            return times
                        }
                    }
                    for try await times in group { fastMs += times }
                }
            }
            client.shutdown()
            try await runner.value
            guard notAccepted.value == 0 else { throw BenchError("lanes: \(notAccepted.value) of \(bulk) bulk not accepted") }
            let books = client.ledger.snapshot
            guard books.isBalanced else { throw BenchError("lanes: books \(books)") }
            return Run(bulkPerSecond: Double(bulk) / seconds, fastMs: fastMs.sorted(), transportWindow: transport.bulkWindow)
        }

        // The transport's window (half its maxQueued), and none.
        var alones: [Run] = [], mixeds: [Run] = []
        for _ in 0..<max(1, rounds) {
            alones.append(try await campaign(count, fast: false, window: nil))
            mixeds.append(try await campaign(count, fast: true, window: nil))
        }
        let alone = alones.max { $0.bulkPerSecond < $1.bulkPerSecond }!
        var mixed = mixeds.max { $0.bulkPerSecond < $1.bulkPerSecond }!
        mixed.fastMs = mixeds.flatMap(\.fastMs).sorted()
        let noWindow = noWindowCount > 0 && via == .client ? try await campaign(noWindowCount, fast: true, window: 0) : nil
        await server.stop()
        try await serverGroup.shutdownGracefully()

        func percentile(_ xs: [Double], _ p: Double) -> Double { xs.isEmpty ? 0 : xs[min(xs.count - 1, Int(Double(xs.count) * p))] }
        let ratio = mixed.bulkPerSecond / alone.bulkPerSecond
        let p99 = percentile(mixed.fastMs, 0.99)
        var r = JSONLine()
        r.add("benchmark", "lanes")
        r.add("via", via.rawValue)
        if via == .queue { r.add("workers", workers) }
        r.add("bulk_notifications", count)
        r.add("answer_ms", answerMs)
        r.add("streams", streams)
        r.add("fast_lane_connection", fastConnection)
        if let window = mixed.transportWindow { r.add("bulk_window", window) }
        r.add("bulk_alone_per_s", alone.bulkPerSecond, places: 0)
        r.add("bulk_with_fast_per_s", mixed.bulkPerSecond, places: 0)
        r.add("ratio_bulk_with_fast_to_alone", ratio, places: 3)
        if rounds > 1 {
            r.add("rounds", rounds)
            r.add("ratio_rounds", zip(mixeds, alones).map { $0.bulkPerSecond / $1.bulkPerSecond }, places: 3)
        }
        r.add("fast_sends", mixed.fastMs.count)
        r.add("fast_p50_ms", percentile(mixed.fastMs, 0.5), places: 2)
        r.add("fast_p99_ms", p99, places: 2)
        r.add("fast_max_ms", mixed.fastMs.last ?? 0, places: 2)
        if let noWindow {
            r.add("no_window_bulk_notifications", noWindowCount)
            r.add("no_window_bulk_per_s", noWindow.bulkPerSecond, places: 0)
            r.add("no_window_fast_sends", noWindow.fastMs.count)
            r.add("no_window_fast_p50_ms", percentile(noWindow.fastMs, 0.5), places: 2)
            r.add("no_window_fast_p99_ms", percentile(noWindow.fastMs, 0.99), places: 2)
        }
        r.add("duplicates", simulator.counters.duplicates)
        r.add("peak_rss_mib", peakResidentMiB(), places: 1)
        r.add("goal_met", p99 < 50 && ratio >= 0.9)
        r.print()
    }
}
