import ArgumentParser
import Crypto
import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldJSON
import HeraldOpenSSL
import HeraldSimulator
import HeraldTesting

/// `herald bench http2`: notifications per second through the HTTP/2 transport
/// over TLS, to the HTTP/2 simulator served on loopback (both ends in this
/// process, token authentication) on 1 and N connections, with the in-memory
/// HTTP/2 simulator transport (same delivery machine, no TLS, no HTTP/2
/// framing) as the baseline in the same run; or, with `--url`, to any HTTP/2
/// server, and with `--h2load` beside what nghttp2's `h2load` reaches against
/// the same server in the same run.
struct BenchHTTP2: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http2",
        abstract: "Notifications per second over HTTP/2 and TLS: to the simulator on loopback (1 and N connections), or to --url beside h2load.",
        discussion: """
            Against nginx (docs/http2.md, "Benchmarks"): serve `location / { return 200; }` over `listen … ssl http2;`, then
              herald bench http2 --url https://127.0.0.1:8443 --ca ca.pem --server-name localhost --h2load
            """
    )

    @Option(help: "Notifications per run.")
    var count = 200_000

    @Option(help: "Connections for the parallel run.")
    var connections = 4

    @Option(help: "Notifications per batch handed to the transport.")
    var batchSize = 1000

    @Option(help: "Streams per connection (the server's limit caps it).")
    var maxStreams = 1000

    @Option(help: "Any HTTP/2 server (https://host:port) instead of the simulator: one connection, no provider token.")
    var url: String?

    @Option(help: "With --url: the CA that signed the server's certificate (PEM); the system's store otherwise.")
    var ca: String?

    @Option(help: "With --url: the name the server's certificate carries, if not the URL's host.")
    var serverName: String?

    @Flag(help: "With --url: also run h2load (nghttp2-client) with the same requests, streams and one connection, and report the ratio.")
    var h2load = false

    @Option(help: "With --url: rounds of the transport, the library alone and the library over TLS, alternating; each one's best counts (a shared machine's neighbours slow any of them), every round's ratio is reported.")
    var rounds = 3

    static let payload = Array(#"{"aps":{"alert":"Hello from Herald","badge":1,"sound":"default"}}"#.utf8)
    static let topic = "com.example.app"

    func envelopes() -> [Envelope] {
        (0..<count).map { i in
            let token = DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ (i & 1023) &* 7 &+ 1) })
            var e = Envelope(sequence: UInt64(i), request: NotificationRequest(token: token, id: UInt32(truncatingIfNeeded: i), topic: Self.topic))
            e.payload = Self.payload
            return e
        }
    }

    func drive(_ transport: any Transport, _ envelopes: [Envelope]) async throws -> (Double, LedgerSnapshot) {
        let ledger = OutcomeLedger(tracksIdentity: false)
        // The batches are cut before the clock starts, as the library's requests are built before
        // its: copying envelopes into batches is the caller's work, not the transport's.
        let batches = stride(from: 0, to: envelopes.count, by: batchSize).map { Array(envelopes[$0..<min($0 + batchSize, envelopes.count)]) }
        let seconds = try await measure {
            for batch in batches {
                ledger.enter(EmptyCollection(), count: batch.count)
                try await transport.send(batch, outcomes: ledger)
            }
            await transport.finish(outcomes: ledger)
        }
        return (seconds, ledger.snapshot)
    }

    func report(_ r: inout JSONLine, _ prefix: String, seconds: Double, snapshot: LedgerSnapshot, transport: HTTP2Transport) async {
        let latency = await transport.latencyPercentiles()
        r.add("\(prefix)_per_second", (Double(count) / seconds).rounded())
        r.add("\(prefix)_accepted", Int(snapshot.accepted))
        r.add("\(prefix)_latency_ms_p50", latency.p50)
        r.add("\(prefix)_latency_ms_p90", latency.p90)
        r.add("\(prefix)_latency_ms_p99", latency.p99)
        r.add("\(prefix)_latency_ms_max", latency.max)
    }

    func run() async throws {
        let envelopes = envelopes()
        var r = JSONLine()
        r.add("benchmark", "http2")
        r.add("notifications", count)
        r.add("payload_bytes", Self.payload.count)
        r.add("max_streams", maxStreams)
        if let url {
            try await againstURL(url, envelopes, &r)
        } else {
            try await againstSimulator(envelopes, &r)
        }
        r.add("peak_rss_mib", peakResidentMiB())
        r.print()
    }

    func againstSimulator(_ envelopes: [Envelope], _ r: inout JSONLine) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-http2-\(UUID().uuidString)").path
        let certs = try ThrowawayCertificates.make(in: dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let signing = P256.Signing.PrivateKey()
        let key = try ProviderTokenKey(pem: signing.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        func simulator() throws -> HTTP2Simulator { try Self.simulator(topic: Self.topic, key: key, maxStreams: maxStreams) }
        func overTLS(_ connections: Int, fastLaneConnection: Bool = false) async throws -> (Double, LedgerSnapshot, HTTP2Transport, HTTP2SimulatorCounters) {
            let sim = try simulator()
            let server = try await HTTP2SimulatorServer.start(
                simulator: sim, tls: .server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: nil))
            var c = HTTP2TransportConfiguration(
                host: "127.0.0.1", port: server.port, tls: .client(identity: nil, trust: .caFile(certs.caCertificate)), providerToken: key)
            c.serverName = "localhost"
            c.delivery.connections = connections
            c.maxStreamsPerConnection = maxStreams
            c.fastLaneConnection = fastLaneConnection  // off: the connections measured are the ones asked for
            c.maxQueued = max(c.maxQueued, 2 * maxStreams * connections + batchSize)
            let transport = try HTTP2Transport(configuration: c)
            let (seconds, snapshot) = try await drive(transport, envelopes)
            await server.stop()
            return (seconds, snapshot, transport, sim.counters)
        }
        let one = try await overTLS(1)
        let many = try await overTLS(connections)
        // The default configuration: these alerts (no priority) are the fast lane's, so they fill the
        // fast-lane connection's streams and spill onto the one configured connection.
        let spilled = try await overTLS(1, fastLaneConnection: true)
        var policy = HTTP2DeliveryPolicy()
        policy.connections = 1
        let memory = try simulator()
        let (memorySeconds, memorySnapshot) = try await drive(
            HTTP2SimulatorTransport(simulator: memory, tokens: ProviderTokens(key: key), policy: policy), envelopes)

        r.add("connections", connections)
        await report(&r, "tls_1_connection", seconds: one.0, snapshot: one.1, transport: one.2)
        await report(&r, "tls_\(connections)_connections", seconds: many.0, snapshot: many.1, transport: many.2)
        await report(&r, "tls_1_connection_and_fast_lane_connection", seconds: spilled.0, snapshot: spilled.1, transport: spilled.2)
        r.add("tls_1_connection_and_fast_lane_connection_connections", spilled.2.statistics.connections)
        r.add("ratio_fast_lane_connection_spilled_to_1_connection", one.0 / spilled.0, places: 3)
        r.add("in_memory_per_second", (Double(count) / memorySeconds).rounded())
        r.add("ratio_1_connection_to_in_memory", memorySeconds / one.0, places: 3)
        // One connection against swift-nio-http2 alone on the same requests; here the simulator's
        // server end (TLS, HTTP/2, JWT checks) runs in this process too: --url measures the
        // transport alone against a server of its own.
        let alone = try libraryAlone(try Self.requests(envelopes), authority: "localhost", initialWindowSize: HTTP2TransportConfiguration(host: "localhost", port: 443, tls: .client(identity: nil, trust: .system)).initialWindowSize, &r)
        r.add("ratio_to_library", (Double(count) / one.0) / alone, places: 3)
        r.add("goal_ratio_to_library", 0.9, places: 1)
        r.add("provider_tokens_signed", one.2.statistics.tokensSigned + many.2.statistics.tokensSigned)
        r.add("duplicates", one.3.duplicates + many.3.duplicates)
        for (name, s) in [("1 connection", one.1), ("\(connections) connections", many.1), ("in memory", memorySnapshot)]
        where !(s.isBalanced && s.accepted == UInt64(count)) {
            throw BenchError("http2 bench (\(name)): \(s.accepted) of \(count) accepted, \(s.failed) failed, \(s.dropped) dropped")
        }
    }

    /// The HTTP/2 simulator for `topic`, taking provider tokens signed with `key`, with `maxStreams` streams a connection.
    static func simulator(topic: String, key: ProviderTokenKey, maxStreams: Int) throws -> HTTP2Simulator {
        var c = HTTP2SimulatorConfiguration()
        c.bundleID = topic
        c.tokenKeyPEM = key.publicKeyPEM
        c.keyID = key.keyID
        c.teamID = key.teamID
        c.maxConcurrentStreams = maxStreams
        return try HTTP2Simulator(configuration: c)
    }

    func againstURL(_ url: String, _ envelopes: [Envelope], _ r: inout JSONLine) async throws {
        guard url.hasPrefix("https://") else { throw ValidationError("--url must be https://host:port") }
        let rest = url.dropFirst("https://".count).prefix { $0 != "/" }
        let host: String, port: Int
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            port = Int(rest[close...].dropFirst(2)) ?? 443
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            port = Int(rest[colon...].dropFirst()) ?? 443
        } else {
            host = String(rest)
            port = 443
        }
        var c = HTTP2TransportConfiguration(host: host, port: port, tls: .client(identity: nil, trust: ca.map(TLSTrust.caFile) ?? .system))
        c.serverName = serverName
        c.delivery.connections = 1
        c.maxStreamsPerConnection = maxStreams
        c.fastLaneConnection = false  // one connection against the library alone on one
        c.maxQueued = max(c.maxQueued, 2 * maxStreams + batchSize)
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        let requests = try Self.requests(envelopes)
        // The library's answers are recorded once; each round replays them.
        let recording = try HTTP2LibraryAlone.record(requests, authority: serverName ?? host, initialWindowSize: c.initialWindowSize)
        var herald: [Double] = [], alone: [Double] = [], overTLS: [Double] = [], heraldCPU: [Double] = [], libraryCPU: [Double] = []
        var best: (rate: Double, transport: HTTP2Transport, snapshot: LedgerSnapshot)?
        for _ in 0..<rounds {
            let transport = try HTTP2Transport(configuration: c)
            // CPU time too: on a shared machine the rates swing with the neighbours, the CPU a request less so.
            let cpu0 = processCPUSeconds()
            let (seconds, snapshot) = try await drive(transport, envelopes)
            heraldCPU.append(processCPUSeconds() - cpu0)
            guard snapshot.isBalanced && snapshot.accepted == UInt64(count) else {
                throw BenchError("http2 bench: \(snapshot.accepted) of \(count) accepted, \(snapshot.failed) failed (is the server answering 200?)")
            }
            herald.append(Double(count) / seconds)
            if herald.last! > best?.rate ?? 0 { best = (herald.last!, transport, snapshot) }
            alone.append(try HTTP2LibraryAlone.replay(recording))
            // The library on the same connection's TLS and socket, nothing of Herald's delivery: Herald's
            // own share is the ratio to it; what TLS and the socket leave of the in-memory bound, the ceiling.
            let libraryCPU0 = processCPUSeconds()
            overTLS.append(try await HTTP2LibraryOverTLS.rate(
                requests, host: host, port: port, tls: c.tls, serverName: serverName ?? host, streams: maxStreams, initialWindowSize: c.initialWindowSize))
            libraryCPU.append(processCPUSeconds() - libraryCPU0)
        }
        let (heraldRate, aloneRate, overTLSRate) = (herald.max()!, alone.max()!, overTLS.max()!)
        r.add("url", url)
        r.add("rounds", rounds)
        await report(&r, "herald", seconds: Double(count) / heraldRate, snapshot: best!.snapshot, transport: best!.transport)
        r.add("herald_per_second_rounds", herald.map { $0.rounded() }, places: 0)
        r.add("herald_connections_opened", best!.transport.statistics.connections)
        r.add("herald_goaways", best!.transport.statistics.goAways)
        r.add("nio_http2_alone_per_second", aloneRate.rounded())
        r.add("nio_http2_alone_per_second_rounds", alone.map { $0.rounded() }, places: 0)
        // Each side's best round against the other's; and round by round (each pair ran a few seconds apart).
        r.add("ratio_to_library", heraldRate / aloneRate, places: 3)
        r.add("ratio_to_library_rounds", zip(herald, alone).map { $0 / $1 }, places: 3)
        r.add("goal_ratio_to_library", 0.9, places: 1)
        r.add("nio_http2_over_tls_per_second", overTLSRate.rounded())
        r.add("herald_cpu_us_per_request", heraldCPU.min()! * 1e6 / Double(count), places: 2)
        r.add("nio_http2_over_tls_cpu_us_per_request", libraryCPU.min()! * 1e6 / Double(count), places: 2)
        r.add("cpu_ratio_to_library_over_tls", libraryCPU.min()! / heraldCPU.min()!, places: 3)
        r.add("ratio_to_library_over_tls", heraldRate / overTLSRate, places: 3)
        r.add("ceiling_ratio_to_library", overTLSRate / aloneRate, places: 3)
        guard h2load else { return }
        let rate = try runH2load(host: host, port: port)
        r.add("h2load_per_second", rate.rounded())
        r.add("ratio_to_h2load", heraldRate / rate, places: 3)
        r.add("ceiling_ratio_to_h2load", aloneRate / rate, places: 3)
    }

    /// The HTTP/2 library's own rate on the same requests (``HTTP2LibraryAlone``): a bound on one
    /// connection's rate, reported as `nio_http2_alone_per_second`.
    func libraryAlone(_ requests: [APNsRequest], authority: String, initialWindowSize: Int, _ r: inout JSONLine) throws -> Double {
        let alone = try HTTP2LibraryAlone.rate(requests, authority: authority, initialWindowSize: initialWindowSize)
        r.add("nio_http2_alone_per_second", alone.rounded())
        return alone
    }

    /// The requests the transport builds for `envelopes`.
    static func requests(_ envelopes: [Envelope]) throws -> [APNsRequest] {
        let builder = APNsRequestBuilder()
        return try envelopes.map { e throws(StageFailure) in try builder.request(for: e) }
    }

    /// Runs h2load with the same requests (POST of the same payload to a device path), one connection, the same streams.
    func runH2load(host: String, port: Int) throws -> Double {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("herald-h2load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let body = dir.appendingPathComponent("payload.json")
        try Data(Self.payload).write(to: body)
        let token = String(repeating: "ab", count: 32)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["h2load", "-n", String(count), "-c", "1", "-m", String(maxStreams), "-d", body.path,
                       "-H", "apns-topic: \(Self.topic)", "-H", "apns-push-type: alert",
                       "https://\(hostAndPort(host, port))/3/device/\(token)"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        // "finished in 1.23s, 81234.56 req/s, …"
        guard p.terminationStatus == 0, let line = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
              let field = line.split(separator: ",").dropFirst().first, let rate = Double(field.trimmingCharacters(in: .whitespaces).split(separator: " ")[0]),
              text.contains("\(count) succeeded")
        else { throw BenchError("h2load did not finish cleanly (is nghttp2-client installed?):\n\(text.suffix(800))") }
        return rate
    }
}
