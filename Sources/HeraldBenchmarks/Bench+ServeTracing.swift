import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldService
import HeraldTracing
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// `herald bench serve --tracing` (issue 31): the service on the same POSTs with tracing off and
/// with every notification traced (always-on sampling: the POST's server span, and each
/// notification's queue wait, send, stage and APNs spans), exported over OTLP/HTTP (protobuf) to
/// a collector stand-in on loopback that answers every export: the POSTs' spans by swift-otel,
/// the notifications' by Herald's ``OTLPTraceExporter`` as `herald serve` runs them (or, with
/// `--exporter swift-otel`, every span by swift-otel, for comparison). Rounds alternate; the best
/// of each is compared. Spans dropped (an exporter's queue full between two exports) are counted:
/// a run that drops spans did less work than it should, and says so.
extension BenchServe {
    func runTracing() async throws {
        let count = self.count
        let (dir, _, lines) = try benchRequestFile(count: count, seed: 15, name: "serve-tracing")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #"{"transport":{"type":"simulator"},"serve":{"apiTokensEnv":"HERALD_BENCH_API_TOKEN","queue":200000,"port":0}}"#
            .write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        setenv("HERALD_BENCH_API_TOKEN", "bench-token-0123456789abcdef", 1)
        let configuration = try HeraldConfiguration.load(path: dir + "/herald.json")
        let untraced = try ServiceConfiguration.load(try configuration.root.child("serve"))
        var traced = untraced
        traced.tracing = true
        let bodies = Self.bodies(lines, batch: batch)

        let collector = try await CollectorStandIn.start()
        let dropped = DroppedSpans()
        var otel = OTel.Configuration.default
        otel.serviceName = "herald-bench"
        otel.logs.enabled = false
        otel.metrics.enabled = false
        otel.traces.enabled = true
        otel.traces.sampler = .alwaysOn
        otel.traces.otlpExporter.protocol = .httpProtobuf
        // The traces' own endpoint is taken as it is (the shared one gets /v1/traces added).
        otel.traces.otlpExporter.endpoint = "http://127.0.0.1:\(collector.port)/v1/traces"
        // The batch processor as herald serve has it: Herald's defaults, or the OTEL_BSP_* variables.
        otel.traces.batchSpanProcessor.maxQueueSize = OTLPExportConfiguration.requestSpansQueue
        otel.traces.batchSpanProcessor.maxExportBatchSize = OTLPExportConfiguration.requestSpansBatch
        otel.diagnosticLogger = .custom(Logger(label: "otel") { _ in dropped })
        otel.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: otel)
        InstrumentationSystem.bootstrap(backend.factory)
        guard ["herald", "swift-otel"].contains(exporter) else { throw BenchError("--exporter: herald or swift-otel") }
        guard ["", "traced", "untraced"].contains(only) else { throw BenchError("--only: traced or untraced") }
        var own: OTLPTraceExporter?
        if exporter == "herald" {
            var c = OTLPExportConfiguration()
            c.endpoint = otel.traces.otlpExporter.endpoint
            c.sampler = .alwaysOn
            c.resource = [("service.name", "herald-bench")]
            own = OTLPTraceExporter(configuration: c, logger: Logger(label: "otlp") { _ in dropped })
            traced.spanExporter = own
        }
        let exporting = ServiceGroup(
            services: [backend.service] + (own.map { [$0] } ?? []), gracefulShutdownSignals: [], logger: Logger(label: "otel") { _ in SwiftLogNoOpLogHandler() })
        let exporterTask = Task { try await exporting.run() }

        // Each side's rounds: the rate, the process's CPU time a notification while it was timed
        // (every thread's: the pipeline's, the HTTP intake's, the exporters', the poster's), and
        // the POSTs answered 429 (the queue full: posted again 2 ms later).
        struct Side {
            var rates: [Double] = [], cpu: [Double] = [], full = 0
        }
        func round(_ serve: ServiceConfiguration, into side: inout Side) async throws {
            let t = try await Self.timeService(configuration, serve, bodies: bodies, count: count, connections: connections)
            side.rates.append(Double(count) / t.seconds)
            side.cpu.append(t.cpuSeconds * 1e6 / Double(count))
            side.full += t.statuses[429, default: 0]
        }
        var untracedSide = Side(), tracedSide = Side()
        for _ in 0..<max(1, rounds) {
            if only != "traced" { try await round(untraced, into: &untracedSide) }
            if only != "untraced" { try await round(traced, into: &tracedSide) }
        }
        let off = untracedSide.rates, on = tracedSide.rates
        await exporting.triggerGracefulShutdown()
        try await exporterTask.value
        let ownDropped = own?.dropped ?? 0
        await collector.stop()

        let best = (off: off.max() ?? 0, on: on.max() ?? 0)
        var r = JSONLine()
        r.add("benchmark", "serve-tracing")
        r.add("notifications", count)
        r.add("batch", batch)
        r.add("connections", connections)
        r.add("rounds", off.count)
        r.add("exporter", exporter)
        r.add("untraced_per_s", off, places: 0)
        r.add("traced_per_s", on, places: 0)
        r.add("cpu_us_untraced", untracedSide.cpu, places: 2)
        r.add("cpu_us_traced", tracedSide.cpu, places: 2)
        r.add("full_429_untraced", untracedSide.full)
        r.add("full_429_traced", tracedSide.full)
        r.add("ratio_traced", off.isEmpty || on.isEmpty ? 0 : best.on / best.off, places: 3)
        r.add("otlp_exports", collector.exports)
        r.add("otlp_mib", Double(collector.bytes) / 1_048_576, places: 1)
        r.add("spans_exported_by_herald", own?.exported ?? 0)
        r.add("spans_dropped", dropped.count + ownDropped)
        r.add("exporter_warnings", dropped.warnings.joined(separator: " | "))
        r.add("goal", 0.85, places: 2)
        r.add("goal_met", best.on / best.off >= 0.85 && dropped.count + ownDropped == 0 && dropped.warnings.isEmpty)
        r.add("peak_rss_mib", peakResidentMiB(), places: 1)
        r.print()
    }
}

/// An OTLP collector's HTTP side, for the benchmark: answers every `POST /v1/traces` with an
/// empty `ExportTraceServiceResponse` (no bytes), counting exports and bytes. A plain NIO server
/// on an event loop of its own, reading the body as it comes and keeping none of it: a
/// collector's work (decoding, storing) is done on another machine, and none of it should take
/// the threads of the process being measured (Swift's cooperative pool).
final class CollectorStandIn: Sendable {
    let port: Int
    let channel: any Channel
    let group: MultiThreadedEventLoopGroup
    let counts: Counted

    var exports: Int { counts.counts.withLock { $0.exports } }
    var bytes: Int { counts.counts.withLock { $0.bytes } }

    init(port: Int, channel: any Channel, group: MultiThreadedEventLoopGroup, counts: Counted) {
        self.port = port
        self.channel = channel
        self.group = group
        self.counts = counts
    }

    static func start() async throws -> CollectorStandIn {
        let counted = Counted()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 1 << 16, initial: 1 << 18, maximum: 1 << 20))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Answer(counted))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw BenchError("the collector stand-in did not start") }
        return CollectorStandIn(port: port, channel: channel, group: group, counts: counted)
    }

    func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    /// Counts a request's body and answers 200 when it ends.
    final class Answer: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let counted: Counted
        var bytes = 0

        init(_ counted: Counted) { self.counted = counted }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: bytes = 0
            case .body(let part): bytes += part.readableBytes
            case .end:
                counted.add(bytes)
                let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-type": "application/x-protobuf", "content-length": "0"])
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    /// What the stand-in took.
    final class Counted: Sendable {
        let counts = Mutex<(exports: Int, bytes: Int)>((0, 0))
        func add(_ bytes: Int) { counts.withLock { $0.exports += 1; $0.bytes += bytes } }
    }
}

/// swift-otel's diagnostic log, read for how many spans its batch processor dropped (its
/// warning's `dropped_count`) and any other warning (an export that failed), each kind once.
final class DroppedSpans: LogHandler, @unchecked Sendable {
    // @unchecked: the count is atomic, the warnings behind a lock; the handler's settings are fixed.
    let dropped = Atomic<Int>(0)
    let other = Mutex<[String]>([])
    var count: Int { dropped.load(ordering: .relaxed) }
    var warnings: [String] { other.withLock { $0 } }
    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    var logLevel: Logger.Level {
        get { .warning }
        set {}
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }
    func log(event: LogEvent) {
        if case .string(let n)? = event.metadata?["dropped_count"], let k = Int(n) {
            dropped.add(k, ordering: .relaxed)
        } else {
            let text = "\(event.message) \(event.metadata?["error"].map { "\($0)" } ?? "")"
            other.withLock { if !$0.contains(text) && $0.count < 5 { $0.append(text) } }
        }
    }
}
