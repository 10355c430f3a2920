import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldService
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// `herald bench serve`: notifications per second through `herald serve`'s
/// HTTP API to the in-memory simulator, beside `herald send`'s pipeline on the
/// same requests in the same run.
struct BenchServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Notifications per second through the HTTP API (POST batches) to the simulator, beside herald send on the same requests.",
        discussion: """
            Makes --count request lines, then (1) runs them from a file through the configured \
            pipeline to the in-memory simulator, as herald send does, and (2) starts the service on \
            loopback with the same configuration and POSTs them in JSON Lines batches of --batch over \
            --connections keep-alive HTTP/1.1 connections, timing until every outcome is recorded. \
            Goal (issue 15): the service reaches at least half of herald send's rate. With --tracing: \
            the service alone, tracing off and every notification traced, alternated for --rounds; \
            goal (issue 31): traced at least 0.85x untraced.
            """
    )

    @Option(help: "Notifications.") var count = 500_000
    @Option(help: "Requests per POST.") var batch = 1000
    @Option(help: "HTTP connections posting at once.") var connections = 2
    @Flag(help: "Instead: the service with tracing off beside every notification traced (sampling 1.0, OTLP/HTTP to a collector stand-in on loopback).")
    var tracing = false
    @Option(help: "With --tracing: rounds of each, alternated (the best of each is compared).") var rounds = 3
    @Option(help: "With --tracing: who exports the notifications' spans: herald (Herald's OTLP writer, as herald serve runs) or swift-otel (every span on swift-otel's tracer).")
    var exporter = "herald"
    @Option(help: "With --tracing: run only one side, traced or untraced (to profile it, as with perf record); no ratio then.")
    var only = ""

    func run() async throws {
        if tracing { return try await runTracing() }
        let count = self.count, batchSize = self.batch
        let (dir, input, lines) = try benchRequestFile(count: count, seed: 15, name: "serve")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #"{"transport":{"type":"simulator"},"serve":{"apiTokensEnv":"HERALD_BENCH_API_TOKEN","queue":200000,"port":0}}"#
            .write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        setenv("HERALD_BENCH_API_TOKEN", "bench-token-0123456789abcdef", 1)

        // 1. herald send's way: the file through the pipeline.
        let sendSeconds = try await benchSendSeconds(input: input, count: count)

        // 2. The service, posted to over loopback.
        let configuration = try HeraldConfiguration.load(path: dir + "/herald.json")
        let serveConfiguration = try ServiceConfiguration.load(try configuration.root.child("serve"))
        let bodies = Self.bodies(lines, batch: batchSize)
        let (serveSeconds, statuses, _) = try await Self.timeService(configuration, serveConfiguration, bodies: bodies, count: count, connections: connections)

        let sendRate = Double(count) / sendSeconds, serveRate = Double(count) / serveSeconds
        var r = JSONLine()
        r.add("benchmark", "serve")
        r.add("notifications", count)
        r.add("batch", batchSize)
        r.add("connections", connections)
        r.add("send_per_s", sendRate, places: 0)
        r.add("serve_per_s", serveRate, places: 0)
        r.add("ratio_to_send", serveRate / sendRate, places: 2)
        r.add("posts_202", statuses[202] ?? 0)
        r.add("posts_429", statuses[429] ?? 0)
        r.add("goal_met", serveRate / sendRate >= 0.5)
        r.add("peak_rss_mib", peakResidentMiB(), places: 1)
        r.print()
    }

    /// The request lines in JSON Lines bodies of `batch`.
    static func bodies(_ lines: [[UInt8]], batch: Int) -> [ByteBuffer] {
        var bodies: [ByteBuffer] = []
        for start in stride(from: 0, to: lines.count, by: batch) {
            var b = ByteBuffer()
            for line in lines[start..<min(lines.count, start + batch)] { b.writeBytes(line) }
            bodies.append(b)
        }
        return bodies
    }

    /// Starts the service on loopback, POSTs `bodies` over `connections` keep-alive connections, and
    /// times it until every outcome of `count` is recorded; then stops it (SIGTERM) and checks its books.
    static func timeService(
        _ configuration: HeraldConfiguration, _ serveConfiguration: ServiceConfiguration, bodies: [ByteBuffer], count: Int, connections: Int
    ) async throws -> (seconds: Double, statuses: [Int: Int], cpuSeconds: Double) {
        var logger = Logger(label: "herald-bench")
        logger.logLevel = .warning
        let assembly = try HeraldAssembly.configured(configuration)
        let service = try HeraldService(configuration: serveConfiguration, logger: logger) { source, ledger, metrics in
            try assembly.makePipeline(source: source, ledger: ledger, metrics: metrics)
        }
        let port = AsyncStream<Int>.makeStream()
        let runner = Task { try await service.run { port.continuation.yield($0) } }
        var iterator = port.stream.makeAsyncIterator()
        guard let bound = await iterator.next() else { throw BenchError("the service did not start") }
        let started = ContinuousClock.now
        let cpuStarted = processCPUSeconds()
        let statuses = try await withThrowingTaskGroup(of: [Int: Int].self) { group in
            for c in 0..<connections {
                let mine = stride(from: c, to: bodies.count, by: connections).map { bodies[$0] }
                group.addTask { try await Self.post(mine, port: bound, token: "bench-token-0123456789abcdef") }
            }
            var all: [Int: Int] = [:]
            for try await s in group { all.merge(s, uniquingKeysWith: +) }
            return all
        }
        // Until every outcome is recorded.
        while service.outcomes.counts.values.reduce(0, +) < count { try await Task.sleep(for: .milliseconds(1)) }
        let seconds = (ContinuousClock.now - started).inSeconds
        let cpuSeconds = processCPUSeconds() - cpuStarted
        kill(getpid(), SIGTERM)
        let snapshot = try await runner.value
        guard snapshot.entered == UInt64(count), snapshot.isBalanced else { throw BenchError("serve: \(snapshot)") }
        return (seconds, statuses, cpuSeconds)
    }

    /// POSTs `bodies` one after another on one keep-alive connection, retrying a 429; the statuses seen.
    static func post(_ bodies: [ByteBuffer], port: Int, token: String) async throws -> [Int: Int] {
        try await withPoster(port: port, token: token) { post in
            var statuses: [Int: Int] = [:]
            var k = 0
            while k < bodies.count {
                let status = try await post(bodies[k])
                statuses[status, default: 0] += 1
                if status == 429 {
                    try await Task.sleep(for: .milliseconds(2))
                } else if status == 202 {
                    k += 1
                } else {
                    throw BenchError("POST answered \(status)")
                }
            }
            return statuses
        }
    }

    /// One keep-alive HTTP/1.1 connection to the service on loopback: `body` gets a function that
    /// POSTs one JSON Lines body to `/v1/notifications` and returns the answer's status.
    static func withPoster<T: Sendable>(
        port: Int, token: String, _ body: (_ post: (ByteBuffer) async throws -> Int) async throws -> T
    ) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var responses = inbound.makeAsyncIterator()
            func post(_ buffer: ByteBuffer) async throws -> Int {
                var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/notifications")
                head.headers.add(name: "Host", value: "127.0.0.1")
                head.headers.add(name: "Authorization", value: "Bearer " + token)
                head.headers.add(name: "Content-Type", value: "application/x-ndjson")
                head.headers.add(name: "Content-Length", value: String(buffer.readableBytes))
                try await outbound.write(contentsOf: [.head(head), .body(.byteBuffer(buffer)), .end(nil)])
                var status = 0
                while let part = try await responses.next() {
                    if case .head(let h) = part { status = Int(h.status.code) }
                    if case .end = part { return status }
                }
                throw BenchError("the service closed the connection before answering")
            }
            return try await body(post)
        }
    }
}
