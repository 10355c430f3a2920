import Foundation
import HeraldBinary
import HeraldCore
import HeraldHTTP2Transport
import HeraldJSON
import HeraldKit
import HeraldPostgres
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
import UnixSignals
import Synchronization

/// How `herald serve` listens and admits work (the configuration's `serve` section).
public struct ServiceConfiguration: Sendable {
    /// Loopback by default: put a TLS-terminating proxy in front to serve beyond the host.
    public var host = "127.0.0.1"
    public var port = 8080
    /// Bearer tokens the API accepts (compared in constant time); never logged.
    public var apiTokens: [String] = []
    /// Largest request body.
    public var maxBodyBytes = 8 << 20
    /// Requests queued for the pipeline before `POST` answers 429.
    public var queueCapacity = 100_000
    /// Outcomes kept for `GET /v1/notifications/{id}`.
    public var keepOutcomes = 1_000_000
    /// A connection that sends nothing for this long is closed: an idle keep-alive
    /// connection, and one that stopped in the middle of a request's header or body.
    public var idleTimeout: Duration = .seconds(30)
    /// A request's header must be complete within this long of its first byte,
    /// however steadily its bytes come (they reset the idle timeout); else `408`.
    public var headerTimeout: Duration = .seconds(10)
    /// How long an `Idempotency-Key` is remembered: a retry within it with the
    /// same body gets the first answer, and nothing is sent twice.
    public var idempotencyWindow: Duration = .seconds(24 * 3600)
    /// Keys remembered in memory (without the PostgreSQL queue) before the
    /// oldest are forgotten, even within the window.
    public var idempotencyKeys = 100_000
    /// Where outcomes are posted as they are decided (`outcomes.webhook`), if anywhere.
    public var webhook: WebhookConfiguration?
    public init() {}

    /// Reads the `serve` node: `host`, `port`, `apiTokensFile` (one per line) or
    /// `apiTokensEnv` (comma-separated), `maxBodyMiB`, `queue`, `keepOutcomes`, `idleTimeoutSeconds`, `headerTimeoutSeconds`,
    /// `idempotencyHours`, `idempotencyKeys`.
    public static func load(_ node: ConfigNode) throws(ConfigError) -> ServiceConfiguration {
        var c = ServiceConfiguration()
        c.host = try node.string("host") ?? c.host
        c.port = try node.int("port", in: 0...65535) ?? c.port
        if let mib = try node.int("maxBodyMiB", in: 1...1024) { c.maxBodyBytes = mib << 20 }
        c.queueCapacity = try node.int("queue", in: 1...100_000_000) ?? c.queueCapacity
        c.keepOutcomes = try node.int("keepOutcomes", in: 1...100_000_000) ?? c.keepOutcomes
        if let s = try node.int("idleTimeoutSeconds", in: 1...3600) { c.idleTimeout = .seconds(s) }
        if let s = try node.int("headerTimeoutSeconds", in: 1...600) { c.headerTimeout = .seconds(s) }
        if let h = try node.int("idempotencyHours", in: 1...720) { c.idempotencyWindow = .seconds(h * 3600) }
        c.idempotencyKeys = try node.int("idempotencyKeys", in: 1...100_000_000) ?? c.idempotencyKeys
        let secret = try node.secret(fileKey: "apiTokensFile", environmentKey: "apiTokensEnv")
        switch secret?.source {
        case .file?: c.apiTokens = secret!.text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        case .environment?: c.apiTokens = secret!.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        case nil: break
        }
        c.apiTokens.removeAll { $0.isEmpty }
        if c.apiTokens.isEmpty {
            throw node.error("apiTokensFile", "required: the API's bearer tokens, from a file (apiTokensFile) or the environment (apiTokensEnv)")
        }
        if let short = c.apiTokens.first(where: { $0.utf8.count < 16 }) {
            throw node.error(secret?.source == .file ? "apiTokensFile" : "apiTokensEnv", "a bearer token of \(short.utf8.count) characters: use at least 16")
        }
        return c
    }
}

/// `herald serve`: the pipeline as a long-running service with an HTTP API
/// (Hummingbird 2), run by swift-service-lifecycle with graceful shutdown.
///
/// - `POST /v1/notifications`: a request object, a JSON array of them, or
///   JSON Lines; `202` with an id per valid request and an error per bad one,
///   `400` when none is valid, `413` over the body limit, `429` + `Retry-After`
///   when the queue cannot take the batch (nothing of it is queued), `503`
///   once shutting down.
/// - `GET /v1/notifications/{id}`: the outcome, or `pending`.
/// - `GET /healthz`, `GET /readyz` (no authentication: probes), `GET /metrics` (Prometheus text).
///
/// Every endpoint but the probes wants `Authorization: Bearer <token>`.
public final class HeraldService: Sendable {
    public let configuration: ServiceConfiguration
    public let intake: ServiceIntake
    public let outcomes: OutcomeIndex
    public let registry: PrometheusCollectorRegistry
    let pipeline: Pipeline
    let ledger: OutcomeLedger
    let logger: Logger
    let running = Atomic<Bool>(false)
    /// A second signal came: what is left ends `failed`, code `abandoned`.
    let abandoned = Atomic<Bool>(false)
    let queueDepth: MetricsGauge
    let requestsIn: MetricsCounter
    let metricsFactory: PrometheusMetricsFactory
    /// The transport's counters as last exported (counters grow by the difference).
    let transportTotals = Mutex<[String: Int]>([:])
    /// Posts dead tokens and failures to the caller (`outcomes.webhook`).
    public let webhook: OutcomeWebhook?
    /// With a PostgreSQL queue: accepted requests become its rows (`QueueIntake`), and this
    /// service's pipeline is one of its workers (its outcomes written back by `queueWriter`).
    let queueIntake: QueueIntake?
    let queueWriter: QueueOutcomeWriter?
    /// `Idempotency-Key`s without the queue (with it, the queue's database keeps them).
    let idempotency: IdempotencyKeys

    /// `makePipeline` builds the pipeline from the source (the in-memory
    /// intake's, or with `queue` a worker's on it), the ledger and the
    /// service's metrics factory (for the pipeline's own metrics).
    public init(
        configuration: ServiceConfiguration, logger: Logger, observers: [any OutcomeObserver] = [], queue: PostgresQueue? = nil,
        makePipeline: (any NotificationSource, OutcomeLedger, any MetricsFactory) throws -> Pipeline
    ) rethrows {
        self.configuration = configuration
        self.logger = logger
        registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        intake = ServiceIntake(capacity: configuration.queueCapacity)
        idempotency = IdempotencyKeys(window: configuration.idempotencyWindow, capacity: configuration.idempotencyKeys)
        // With the queue, GET reads the table: the index only counts (it keeps no records).
        outcomes = OutcomeIndex(capacity: queue == nil ? configuration.keepOutcomes : 0, metrics: factory)
        // With the queue, this service is one of its workers; the webhook names notifications by their rows.
        let problems: @Sendable (String) -> Void = { [logger] problem in logger.error("\(problem)") }
        let worker: (source: PostgresQueueSource, writer: QueueOutcomeWriter)? = queue.map { $0.worker(drain: false, onProblem: problems) }
        let writer = worker?.writer
        var rowOf: (@Sendable (UInt64) -> UInt64?)?
        if let writer { rowOf = { sequence in writer.rowID(of: sequence).map { UInt64(clamping: $0) } } }
        let mapping = rowOf
        webhook = configuration.webhook.map { OutcomeWebhook(configuration: $0, logger: logger, metrics: factory, notificationID: mapping) }
        // The queue's writer comes last: observers before it can still map sequence numbers to rows.
        ledger = OutcomeLedger(observers: [outcomes] + observers + (webhook.map { [$0] } ?? []) + (writer.map { [$0] } ?? []))
        metricsFactory = factory
        queueDepth = MetricsGauge(label: "herald_queue_depth", factory: factory)
        requestsIn = MetricsCounter(label: "herald_requests_total", factory: factory)
        if let queue, let worker {
            queueIntake = QueueIntake(queue: queue, capacity: configuration.queueCapacity)
            queueWriter = worker.writer
            pipeline = try makePipeline(worker.source, ledger, factory)
        } else {
            queueIntake = nil
            queueWriter = nil
            pipeline = try makePipeline(IntakeSource(intake: intake), ledger, factory)
        }
    }

    /// Whether new requests are refused (shutting down).
    var intakeClosed: Bool { queueIntake?.isClosed ?? intake.isClosed }

    /// Runs until SIGTERM or SIGINT (then: intake closed, pipeline drained,
    /// every outcome recorded) or a second signal (then: what is left fails).
    /// `onListening` gets the bound port.
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> LedgerSnapshot {
        let router = Router()
        addRoutes(to: router)
        let headerTimeout = TimeAmount.nanoseconds(Int64(configuration.headerTimeout.components.seconds) * 1_000_000_000)
        let app = Application(
            router: router,
            server: .http1(configuration: .init(
                additionalChannelHandlers: [
                    HTTP1ConformanceInstaller(headerTimeout: headerTimeout)
                ],
                idleTimeout: TimeAmount.nanoseconds(Int64(configuration.idleTimeout.components.seconds) * 1_000_000_000))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "herald"),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
        let pipelineService = PipelineService(service: self)
        let group = ServiceGroup(
            configuration: .init(
                // Shut down in reverse order: the pipeline first (intake closed, 503s while it
                // drains), then, once it has drained, the webhook (it posts what is left), then
                // the HTTP server.
                services: [.init(service: app)] + (webhook.map { [.init(service: $0)] } ?? []) + [
                    .init(service: pipelineService, successTerminationBehavior: .gracefullyShutdownGroup)
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        // The group shuts down gracefully on the first signal; a second one abandons what is left.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let watcher = Task {
            var seen = 0
            for await _ in signals {
                seen += 1
                if seen == 2 {
                    logger.warning("second signal: stopping now; what was not sent ends failed")
                    self.closeIntake()
                    self.abandon()
                    webhook?.abandon()
                }
            }
        }
        defer { watcher.cancel() }
        do {
            try await group.run()
        } catch {
            throw ListenError(error, host: configuration.host, port: configuration.port) ?? error
        }
        return ledger.snapshot
    }

    struct PipelineService: Service {
        let service: HeraldService
        func run() async throws {
            let s = service
            s.running.store(true, ordering: .relaxed)
            defer { s.running.store(false, ordering: .relaxed) }
            s.queueWriter?.start()
            await withTaskCancellationHandler {
                await withGracefulShutdownHandler {
                    do { _ = try await s.pipeline.run() } catch { s.logger.error("pipeline stopped: \(error)") }
                } onGracefulShutdown: {
                    s.logger.info("shutting down: no new requests; draining what is queued and in flight")
                    s.closeIntake()
                }
            } onCancel: {
                s.closeIntake()
                s.abandon()
            }
            if let writer = s.queueWriter {
                let report = await writer.finish()
                s.logger.info("queue: \(report.written) outcomes written back, \(report.notWritten) not written, \(report.leaseLost) taken over by another worker")
            }
            s.recordUnsent()
        }
    }

    static let abandonReason = "abandoned: a second signal came before it was sent"

    /// Gives up on what is not sent (a second signal): the pipeline fails what it holds, and what
    /// is still queued in memory is recorded failed with the same reason.
    func abandon() {
        abandoned.store(true, ordering: .relaxed)
        pipeline.abandon(Self.abandonReason)
    }

    /// No more requests. With the PostgreSQL queue the worker also stops
    /// claiming rows (what it holds drains; the rest stays queued for other workers).
    func closeIntake() {
        intake.close()
        if let q = queueIntake {
            q.close()
            pipeline.shutdown()
        }
    }

    /// Requests still queued when the pipeline stopped (abandoned): each ends `failed`.
    func recordUnsent() {
        let left = intake.drain()
        guard !left.isEmpty else { return }
        let why = abandoned.load(ordering: .relaxed)
            ? OutcomeReason(.abandoned, Self.abandonReason) : OutcomeReason(.unspecified, "the service stopped before sending it")
        ledger.enter(left.map(\.0), count: left.count)
        ledger.record(left.map { id, r in
            OutcomeRecord(sequence: id, line: nil, id: r.id, token: r.token, outcome: .failed(why))
        })
        logger.warning("\(left.count) queued requests were never sent; they are recorded as failed")
    }

    // MARK: - Routes

    /// The API's OpenAPI document (`Sources/HeraldService/openapi.yaml`, a resource of this module).
    public static let openAPIDocument: [UInt8]? = Bundle.module.url(forResource: "openapi", withExtension: "yaml")
        .flatMap { try? Data(contentsOf: $0) }.map { Array($0) }

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.add(middleware: MethodGuard())
        // HEAD wherever GET is (RFC 9110, 9.3.2): the same handler; MethodGuard drops the body.
        func getAndHead(_ path: RouterPath, _ handler: @escaping @Sendable (Request, BasicRequestContext) async throws -> Response) {
            router.get(path, use: handler)
            router.on(path, method: .head, use: handler)
        }
        getAndHead("/healthz") { _, _ in Self.json(.ok, #"{"status":"ok"}"#) }
        getAndHead("/openapi.yaml") { _, _ in
            guard let document = Self.openAPIDocument else { return Self.json(.notFound, #"{"error":"the OpenAPI document is not installed"}"#) }
            return Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
        getAndHead("/readyz") { _, _ in
            guard self.running.load(ordering: .relaxed) && !self.intakeClosed else {
                return Self.json(.serviceUnavailable, #"{"status":"not ready","reason":"the pipeline is not running (starting or shutting down)"}"#)
            }
            if let reporting = self.pipeline.transport as? any TransportHealthReporting, case .unavailable(let why) = reporting.health {
                var w = JSONWriter(capacity: 96 + why.utf8.count)
                w.raw(#"{"status":"not ready","reason":"#)
                w.string("the transport cannot deliver: \(why)")
                w.raw("}")
                return Self.json(.serviceUnavailable, w.bytes)
            }
            return Self.json(.ok, #"{"status":"ready"}"#)
        }
        getAndHead("/metrics") { request, _ in
            if let denied = self.authenticate(request) { return denied }
            self.queueDepth.record(await self.queueIntake?.depth() ?? self.intake.depth)
            await self.exportTransportCounters()
            var out: [UInt8] = []
            self.registry.emit(into: &out)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
        router.post("/v1/notifications") { request, _ in try await self.post(request) }
        getAndHead("/v1/notifications/:notification") { request, context in
            if let denied = self.authenticate(request) { return denied }
            guard let text = context.parameters.get("notification"), let id = UInt64(text) else {
                return Self.json(.badRequest, #"{"error":"the id is a notification number"}"#)
            }
            if let q = self.queueIntake {
                let (status, body) = await q.answer(id)
                return Self.json(status, body)
            }
            switch self.outcomes.lookup(id, issued: self.intake.issued) {
            case .decided(let r):
                var w = JSONWriter(capacity: 200)
                w.raw("{\"notification\":")
                w.int(Int(id))
                w.raw(",\"state\":\"decided\",\"outcome\":")
                w.bytes += OutcomeWriter.line(r)
                w.raw("}")
                return Self.json(.ok, w.bytes)
            case .pending: return Self.json(.ok, "{\"notification\":\(id),\"state\":\"pending\"}")
            case .forgotten: return Self.json(.notFound, "{\"notification\":\(id),\"error\":\"expired: its outcome is no longer kept\"}")
            case .unknown: return Self.json(.notFound, "{\"notification\":\(id),\"error\":\"no such notification\"}")
            }
        }
    }

    /// The transport's own counters (connections, handshakes, resends…), as
    /// `herald_transport_<name>_total` counters, brought up to date at each scrape.
    func exportTransportCounters() async {
        var now: [String: Int] = [:]
        let transport = pipeline.transport
        if let reporting = transport as? any DeliveryReporting {
            let d = await reporting.deliveryStatistics
            now = [
                "connections": d.connections, "handshakes": d.handshakes, "connect_failures": d.connectFailures,
                "error_responses": d.errorResponses, "shutdowns": d.shutdowns, "silent_closes": d.silentCloses, "stalls": d.stalls,
                "resent": d.resent, "possible_duplicates": d.resentAfterSilentClose,
            ]
        } else if let http2 = transport as? HTTP2Transport {
            let s = http2.statistics
            now = [
                "connections": s.delivery.connections, "handshakes": s.handshakes, "connect_failures": s.delivery.connectFailures,
                "streams": s.delivery.streams, "goaways": s.delivery.goAways, "timeouts": s.delivery.timeouts, "retried": s.delivery.retried,
                "resent": s.delivery.resentUnanswered + s.delivery.resentUnprocessed, "possible_duplicates": s.delivery.resentUnanswered,
                "provider_tokens_signed": s.tokensSigned,
            ]
        }
        let deltas = transportTotals.withLock { last -> [(String, Int)] in
            defer { last = now }
            return now.map { ($0.key, $0.value - (last[$0.key] ?? 0)) }
        }
        // Every series the transport has is made at the first scrape, at 0 until it counts something:
        // a dashboard or an alert on `…_connect_failures_total` finds it before the first failure.
        for (name, delta) in deltas {
            let counter = MetricsCounter(label: "herald_transport_\(name)_total", factory: metricsFactory)
            if delta > 0 { counter.increment(by: delta) }
        }
    }

    /// `nil` when the request carries an accepted bearer token; else the 401 to answer.
    func authenticate(_ request: Request) -> Response? {
        if let given = Self.bearerToken(request.headers[.authorization]) {
            var ok = false
            for token in configuration.apiTokens where Self.constantTimeEqual(given, Array(token.utf8)) { ok = true }
            if ok { return nil }
        }
        return Response(
            status: .unauthorized, headers: [.contentType: "application/json", .wwwAuthenticate: "Bearer"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":"a bearer token is required"}"#)))
    }

    /// The credentials of an `Authorization` header with the Bearer scheme: the scheme
    /// compared without regard to case and followed by one or more spaces (RFC 9110, 11.4).
    static func bearerToken(_ header: String?) -> [UInt8]? {
        guard let header else { return nil }
        let bytes = Array(header.utf8)
        guard bytes.count > 7, String(decoding: bytes[0..<6], as: UTF8.self).lowercased() == "bearer", bytes[6] == 0x20 else { return nil }
        let token = bytes[7...].drop { $0 == 0x20 }
        return token.isEmpty ? nil : Array(token)
    }

    /// Compares every byte whatever the first difference (the length is not secret).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }
}
