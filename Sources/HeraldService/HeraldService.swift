import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldTracing
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
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
    /// Scheduled sends (`send-at` to come) held in memory before `POST` answers 429 (without the
    /// PostgreSQL queue: with it they wait in the database).
    public var scheduledCapacity = 100_000
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
    /// The configuration's apps (`apps[].name`): `/metrics` counts each one's outcomes as
    /// `herald_app_outcomes_total{app,outcome}` (names from requests alone are not labels).
    public var apps: [String] = []
    /// How often the operator's page's history takes the service's totals (`statusSeconds`; it keeps 120).
    public var statusInterval: Duration = .seconds(5)
    /// Traces (issue 31) on swift-distributed-tracing's global tracer, which the process set up
    /// (`herald serve` does from the `OTEL_*` variables): a span per HTTP request, its trace
    /// context (or a request's own `traceparent`) carried by each notification it takes, and
    /// each notification's spans (`HeraldTracing`'s `NotificationSpans`). Off by default.
    public var tracing = false
    /// With `tracing`: the exporter the notifications' spans are written into (OTLP batches,
    /// `HeraldTracing`'s ``OTLPTraceExporter``), rather than made on the global tracer; run it as
    /// a service, first in the group. `herald serve` sets it when the `OTEL_*` variables allow.
    public var spanExporter: OTLPTraceExporter?
    /// With a queue: whether this service's pipeline also sends what it queues (`worker`, the
    /// default), or only takes requests in for other processes (`herald work`) to send.
    public var worker = true
    public init() {}

    /// Reads the `serve` node: `host`, `port`, `apiTokensFile` (one per line) or
    /// `apiTokensEnv` (comma-separated), `maxBodyMiB`, `queue`, `scheduled`, `keepOutcomes`, `idleTimeoutSeconds`, `headerTimeoutSeconds`,
    /// `idempotencyHours`, `idempotencyKeys`, `statusSeconds`, `worker`.
    public static func load(_ node: ConfigNode) throws(ConfigError) -> ServiceConfiguration {
        var c = ServiceConfiguration()
        c.host = try node.string("host") ?? c.host
        c.port = try node.int("port", in: 0...65535) ?? c.port
        if let mib = try node.int("maxBodyMiB", in: 1...1024) { c.maxBodyBytes = mib << 20 }
        c.queueCapacity = try node.int("queue", in: 1...100_000_000) ?? c.queueCapacity
        c.scheduledCapacity = try node.int("scheduled", in: 1...100_000_000) ?? c.scheduledCapacity
        c.keepOutcomes = try node.int("keepOutcomes", in: 1...100_000_000) ?? c.keepOutcomes
        if let s = try node.int("idleTimeoutSeconds", in: 1...3600) { c.idleTimeout = .seconds(s) }
        if let s = try node.int("headerTimeoutSeconds", in: 1...600) { c.headerTimeout = .seconds(s) }
        if let h = try node.int("idempotencyHours", in: 1...720) { c.idempotencyWindow = .seconds(h * 3600) }
        c.idempotencyKeys = try node.int("idempotencyKeys", in: 1...100_000_000) ?? c.idempotencyKeys
        if let s = try node.int("statusSeconds", in: 1...60) { c.statusInterval = .seconds(s) }
        c.worker = try node.bool("worker") ?? c.worker
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
    /// Where accepted requests wait and ids are answered from: in memory, or a database queue.
    public let intake: any NotificationIntake
    public let outcomes: OutcomeIndex
    public let registry: PrometheusCollectorRegistry
    let pipeline: Pipeline
    let ledger: OutcomeLedger
    let logger: Logger
    let running = Atomic<Bool>(false)
    /// A second signal came: what is left ends `failed`, code `abandoned`.
    let abandoned = Atomic<Bool>(false)
    let queueDepth: MetricsGauge
    /// `herald_queue_oldest_waiting_seconds`: how long the longest-waiting request has waited (0: none waits).
    let oldestWaiting: MetricsGauge
    let requestsIn: MetricsCounter
    let metricsFactory: PrometheusMetricsFactory
    /// The transport's counters as last exported (counters grow by the difference).
    let transportTotals = Mutex<[String: Int]>([:])
    /// Posts dead tokens and failures to the caller (`outcomes.webhook`).
    public let webhook: OutcomeWebhook?
    /// Requests taken (`herald_requests_total`), for the operator's page.
    let requestsTaken = StatusHistory.Count()
    /// UNIX milliseconds when the service was made.
    let startedAt = Duration.sinceEpochMilliseconds
    /// The totals every few seconds, for the operator's page's rates.
    let statusHistory: StatusHistory

    /// `intake`: where accepted requests wait (`nil`: in memory, bounded by
    /// `queueCapacity`, outcomes kept for `GET` by the ``OutcomeIndex``); with a
    /// queue's (`HeraldPostgres.PostgresIntake`) requests become its rows and
    /// this service's pipeline is one of its workers. `makePipeline` builds the
    /// pipeline from the intake's source, the ledger and the service's metrics
    /// factory (for the pipeline's own metrics).
    public init(
        configuration: ServiceConfiguration, logger: Logger, observers: [any OutcomeObserver] = [], intake given: (any NotificationIntake)? = nil,
        makePipeline: (any NotificationSource, OutcomeLedger, any MetricsFactory) throws -> Pipeline
    ) rethrows {
        self.configuration = configuration
        self.logger = logger
        registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        // With an intake of its own (a queue), GET reads it: the index only counts (it keeps no records).
        outcomes = OutcomeIndex(capacity: given == nil ? configuration.keepOutcomes : 0, metrics: factory, apps: configuration.apps)
        let intake = given ?? MemoryIntake(configuration: configuration, outcomes: outcomes)
        self.intake = intake
        // The webhook names notifications as the API does (a queue's by their rows).
        webhook = configuration.webhook.map {
            OutcomeWebhook(
                configuration: $0, logger: logger, metrics: factory, notificationID: { intake.notificationID(ofSequence: $0) },
                lineKey: intake.source.lineKey)
        }
        // The intake's observers come last: observers before them can still map sequence numbers to ids.
        let book = configuration.tracing ? TraceBook() : nil
        let spans: [any OutcomeObserver] = book.map { [NotificationSpans(book: $0, exporter: configuration.spanExporter)] } ?? []
        ledger = OutcomeLedger(
            observers: [outcomes] + spans + observers + (webhook.map { [$0] } ?? []) + intake.observers, traceBook: book)
        metricsFactory = factory
        queueDepth = MetricsGauge(label: "herald_queue_depth", factory: factory)
        oldestWaiting = MetricsGauge(label: "herald_queue_oldest_waiting_seconds", factory: factory)
        requestsIn = MetricsCounter(label: "herald_requests_total", factory: factory)
        pipeline = try makePipeline(intake.source, ledger, factory)
        statusHistory = StatusHistory(interval: configuration.statusInterval) { [outcomes, requestsTaken] in
            StatusHistory.Sample(
                at: Duration.sinceEpochMilliseconds, outcomes: outcomes.counts, requests: requestsTaken.value,
                queueDepth: await intake.lastCountedDepth() ?? 0)
        }
        (intake as? MemoryIntake)?.queue.setBulkWindow((pipeline.transport as? any LaneWindowing)?.bulkWindow)
    }

    /// Whether new requests are refused (shutting down).
    var intakeClosed: Bool { intake.isClosed }

    /// Runs until SIGTERM or SIGINT (then: intake closed, pipeline drained,
    /// every outcome recorded) or a second signal (then: what is left fails).
    /// `onListening` gets the bound port. `services` (a queue, a token store)
    /// start before the HTTP server and the pipeline, and stop after them.
    public func run(services: [any Service] = [], onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> LedgerSnapshot {
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
        // Shut down in reverse order: the pipeline first (intake closed, 503s while it drains),
        // then, once it has drained, the webhook (it posts what is left), then the HTTP server,
        // then the services given (the token store writes what is left, the queue's connections
        // close). A second signal abandons what is left.
        do {
            try await SignalledServiceGroup.run(
                services + [statusHistory, app] + (webhook.map { [$0] } ?? []), main: PipelineService(service: self), logger: logger,
                abandon: { [self] in
                    logger.warning("second signal: stopping now; what was not sent ends failed")
                    closeIntake()
                    abandon()
                    webhook?.abandon()
                })
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
            s.intake.pipelineStarting(ledger: s.ledger)
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
            // What was taken but never reached the pipeline ends failed; what the intake owes is finished.
            let why = s.abandoned.load(ordering: .relaxed)
                ? OutcomeReason(.abandoned, HeraldService.abandonReason) : OutcomeReason(.unspecified, "the service stopped before sending it")
            if let line = await s.intake.pipelineStopped(ledger: s.ledger, reason: why) { s.logger.notice("\(line)") }
        }
    }

    static let abandonReason = "abandoned: a second signal came before it was sent"

    /// Gives up on what is not sent (a second signal): the pipeline fails what it holds, and what
    /// is still queued in memory is recorded failed with the same reason.
    func abandon() {
        abandoned.store(true, ordering: .relaxed)
        pipeline.abandon(Self.abandonReason)
    }

    /// No more requests (a queue's worker also stops claiming rows: what it
    /// holds drains, the rest stays queued for other workers).
    func closeIntake() { intake.close() }

    // MARK: - Routes

    /// The page loads nothing from anywhere, and fetches only this service.
    static let operatorPagePolicy = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The API's OpenAPI document (`Sources/HeraldService/openapi.yaml`, a resource of this module).
    public static let openAPIDocument: [UInt8]? = Bundle.module.url(forResource: "openapi", withExtension: "yaml")
        .flatMap { try? Data(contentsOf: $0) }.map { Array($0) }

    func addRoutes(to router: Router<BasicRequestContext>) {
        // First: its span covers the whole request, and the handlers run in it (a POST's
        // notifications carry its trace context). No header is recorded (Authorization is one).
        if configuration.tracing { router.add(middleware: TracingMiddleware()) }
        router.add(middleware: HTTPMetrics(factory: metricsFactory))
        router.add(middleware: MethodGuard())
        // HEAD wherever GET is (RFC 9110, 9.3.2): the same handler; MethodGuard drops the body.
        func getAndHead(
            _ routes: some RouterMethods<BasicRequestContext>, _ path: RouterPath,
            _ handler: @escaping @Sendable (Request, BasicRequestContext) async throws -> Response
        ) {
            routes.get(path, use: handler)
            routes.on(path, method: .head, use: handler)
        }
        // The probes and the API's description answer anyone.
        getAndHead(router, "/healthz") { _, _ in Self.json(.ok, #"{"status":"ok"}"#) }
        getAndHead(router, "/openapi.yaml") { _, _ in
            guard let document = Self.openAPIDocument else { return Self.json(.notFound, #"{"error":"the OpenAPI document is not installed"}"#) }
            return Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
        getAndHead(router, "/readyz") { _, _ in self.readiness() }
        // The rest wants a bearer token.
        let authenticated = router.group().add(middleware: BearerAuthentication(tokens: configuration.apiTokens))
        getAndHead(authenticated, "/metrics") { _, _ in
            self.queueDepth.record(await self.intake.depth())
            let oldest = await self.intake.oldestWaiting()
            self.oldestWaiting.record(oldest.map { Double(max(0, Duration.sinceEpochMilliseconds - $0)) / 1000 } ?? 0)
            await self.exportTransportCounters()
            var out: [UInt8] = []
            self.registry.emit(into: &out)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
        authenticated.post("/v1/notifications") { request, _ in try await self.post(request) }
        // The operator's page: the page itself holds nothing (it asks for the token and keeps it
        // in the tab's session storage); its figures come from /v1/status, which wants the token.
        getAndHead(router, "/") { _, _ in
            guard let page = Self.operatorPage else { return Self.json(.notFound, #"{"error":"the operator's page is not installed"}"#) }
            return Response(
                status: .ok,
                headers: [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: Self.operatorPagePolicy, .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: page)))
        }
        getAndHead(authenticated, "/v1/status") { _, _ in Self.json(.ok, await self.statusDocument()) }
        getAndHead(authenticated, "/v1/notifications/:notification") { _, context in
            guard let text = context.parameters.get("notification"), let id = UInt64(text) else {
                return Self.json(.badRequest, #"{"error":"the id is a notification number"}"#)
            }
            let (status, body) = Self.answer(id, await self.intake.state(of: id))
            return Self.json(status, body, retryAfter: status == .serviceUnavailable)
        }
        authenticated.delete("/v1/notifications/:notification") { _, context in
            guard let text = context.parameters.get("notification"), let id = UInt64(text) else {
                return Self.json(.badRequest, #"{"error":"the id is a notification number"}"#)
            }
            let (status, body) = Self.cancelAnswer(id, await self.intake.cancel(id))
            return Self.json(status, body, retryAfter: status == .serviceUnavailable)
        }
    }

    /// `DELETE /v1/notifications/{id}`'s answer: 200 with the `cancelled` outcome, as `GET` answers
    /// it; 409 with what it is when it can no longer be cancelled (on its way, or decided); 404
    /// when there is no such notification; 503 when the intake's storage did not answer.
    static func cancelAnswer(_ id: UInt64, _ result: CancelAnswer) -> (status: HTTPResponse.Status, body: [UInt8]) {
        switch result {
        case .cancelled(let record): return answer(id, .decided(record))
        case .unavailable(let why): return answer(id, .unavailable(why))
        case .notCancelled(let state):
            switch state {
            case .pending:
                return (.conflict, answer(id, state, error: "not cancelled: it is on its way (only a scheduled send whose send-at has not come can be cancelled)").body)
            case .decided:
                return (.conflict, answer(id, state, error: "not cancelled: it is decided already").body)
            default: return answer(id, state)
            }
        }
    }

    /// `GET /readyz`: ready while the pipeline runs, the intake is open and the transport can deliver.
    func readiness() -> Response {
        guard running.load(ordering: .relaxed) && !intakeClosed else {
            return Self.json(.serviceUnavailable, #"{"status":"not ready","reason":"the pipeline is not running (starting or shutting down)"}"#)
        }
        if let reporting = pipeline.transport as? any TransportHealthReporting, case .unavailable(let why) = reporting.health {
            var w = JSONWriter(capacity: 96 + why.utf8.count)
            w.raw(#"{"status":"not ready","reason":"#)
            w.string("the transport cannot deliver: \(why)")
            w.raw("}")
            return Self.json(.serviceUnavailable, w.bytes)
        }
        return Self.json(.ok, #"{"status":"ready"}"#)
    }

    /// `GET /v1/notifications/{id}`'s answer, one shape whatever the intake:
    /// `{"notification":17,"state":"decided","outcome":{…the outcome line…}}`,
    /// `"state":"pending"`, `"state":"scheduled","send-at":<epoch ms>`, or 404 / 503 with an `error`
    /// (`error` adds one to the others).
    static func answer(_ id: UInt64, _ state: NotificationState, error: String? = nil) -> (status: HTTPResponse.Status, body: [UInt8]) {
        var w = JSONWriter(capacity: 200)
        w.raw("{\"notification\":")
        w.int(Int(clamping: id))
        let status: HTTPResponse.Status
        switch state {
        case .decided(let record):
            w.raw(",\"state\":\"decided\",\"outcome\":")
            record.writeJSON(to: &w)
            status = .ok
        case .pending:
            w.raw(",\"state\":\"pending\"")
            status = .ok
        case .scheduled(let at):
            w.raw(",\"state\":\"scheduled\",\"send-at\":")
            w.int(Int(at))
            status = .ok
        case .forgotten:
            w.raw(",\"error\":\"expired: its outcome is no longer kept\"")
            status = .notFound
        case .unknown:
            w.raw(",\"error\":\"no such notification\"")
            status = .notFound
        case .unavailable(let why):
            w.raw(",\"error\":")
            w.string(why)
            status = .serviceUnavailable
        }
        if let error {
            w.raw(",\"error\":")
            w.string(error)
        }
        w.raw("}")
        return (status, w.bytes)
    }

    /// The transport's own counters (connections, handshakes, resends…), as
    /// `herald_transport_<name>_total` counters, brought up to date at each scrape.
    func exportTransportCounters() async {
        var now: [String: Int] = [:]
        for (name, value) in await (pipeline.transport as? any TransportReporting)?.counters ?? [] { now[name] = value }
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
}
