import AsyncHTTPClient
import DequeModule
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// Exports notification spans over OTLP/HTTP (protobuf) itself (issue 31): ``NotificationSpans``
/// hands over each traced notification's passage as its outcome comes (``write(_:)``: a
/// sampling decision and an append, nothing more on the outcome observers' path); this service's
/// encoder writes them into batches (``OTLPSpanBatch``) and its poster POSTs each full batch to
/// the collector, one at a time. Everything else (`herald serve`'s HTTP request spans) stays on
/// swift-otel.
///
/// Bounded: at most `maxQueuedSpans` wait to be encoded and as many to be sent; past that they
/// are dropped and counted (``dropped``), with a warning at most every 10 s: tracing never holds
/// the pipeline, and a slow or absent collector costs spans, not notifications. A failed POST is
/// retried (429, 502, 503, 504 and no answer, OTLP's retryable cases) with a doubling pause
/// within the export timeout, then dropped and counted.
///
/// As a service it runs first in the group (stops last): when the group stops it encodes what
/// was handed over and sends every batch, within the export timeout, then ends.
public final class OTLPTraceExporter: Service, Sendable {
    public let configuration: OTLPExportConfiguration
    let logger: Logger
    let seed: UInt64

    /// Outcomes as the ledger gave them (shared, not copied), the book their passages are in, and
    /// when they were handed over (the spans' end).
    struct Handed: Sendable {
        let records: [OutcomeRecord]
        let book: TraceBook
        let ended: Int64
    }

    struct State {
        /// Handed over, not yet encoded, and their spans (the records times the spans a record
        /// has made lately: the passages are taken from the book by the encoder).
        var pending: [Handed] = []
        var pendingSpans = 0
        var spansPerRecord = 8.0
        /// Encoded batches waiting to be sent, and their spans.
        var ready = Deque<(body: ByteBuffer, spans: Int)>()
        var queuedSpans = 0
        var poster: CheckedContinuation<Void, Never>?
        /// The encoder sleeps on ``OTLPTraceExporter/encoderWake`` (nothing handed over for a
        /// while, no batch open): the next handing-over or stop wakes it.
        var encoderParked = false
        var stopping = false
        /// The encoder has ended (stopping, everything handed over encoded).
        var encoded = false
        var exported = 0
        var dropped = 0
        var lastWarning: ContinuousClock.Instant?
    }
    let state = Mutex(State())
    /// What the parked encoder sleeps on (signalled by whoever clears ``State/encoderParked``).
    let encoderWake = DispatchSemaphore(value: 0)

    public init(configuration: OTLPExportConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        var seed: UInt64 = 0
        while seed == 0 { seed = UInt64.random(in: .min ... .max) }
        self.seed = seed
    }

    /// Spans the collector took (its answer was a success).
    public var exported: Int { state.withLock { $0.exported } }
    /// Spans lost: a queue full, or their POST given up.
    public var dropped: Int { state.withLock { $0.dropped } }

    /// Whether a trace's spans are recorded (the sampler: parent-based ones follow the caller's flag).
    @inline(__always) func samples(_ trace: NotificationTrace) -> Bool {
        configuration.sampler.samples(trace)
    }

    /// Hands these outcomes to the encoder, which takes their passages from `book` and writes
    /// the sampled ones' spans; or, when `maxQueuedSpans` wait already, takes the passages here
    /// and drops them. Nothing else is done on the outcome observers' path: the book's work is
    /// the encoder's, on its own thread.
    func write(_ records: [OutcomeRecord], from book: TraceBook) {
        let handed = Handed(records: records, book: book, ended: Duration.sinceEpochNanoseconds)
        // No thread is woken while outcomes come: the encoder looks every `encoderPoll`. Only a
        // parked one (idle for a while) is woken.
        let (queued, wake) = state.withLock { s -> (Bool, Bool) in
            let spans = Int((Double(records.count) * s.spansPerRecord).rounded(.up))
            guard s.pendingSpans + spans <= configuration.maxQueuedSpans else { return (false, false) }
            s.pending.append(handed)
            s.pendingSpans += spans
            defer { s.encoderParked = false }
            return (true, s.encoderParked)
        }
        if wake { encoderWake.signal() }
        if queued { return }
        var spans = 0
        for (_, passage) in book.passages(of: records, at: handed.ended) where samples(passage.trace) { spans += OTLPSpanBatch.spans(of: passage) }
        guard spans > 0 else { return }
        state.withLock {
            lose(spans, "the encoder's queue is full (\(configuration.maxQueuedSpans) spans: spans come faster than they are written)", &$0)
        }
    }

    fileprivate func lose(_ spans: Int, _ why: String, _ s: inout State) {
        s.dropped += spans
        let now = ContinuousClock.now
        if let last = s.lastWarning, last.duration(to: now) < .seconds(10) { return }
        s.lastWarning = now
        logger.warning("tracing: \(spans) notification spans not exported to \(configuration.endpoint): \(why); \(s.dropped) dropped so far")
    }

    public func run() async throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = configuration.certificateFile { tls.trustRoots = .file(ca) }
        if let cert = configuration.clientCertificateFile, let key = configuration.clientKeyFile {
            tls.certificateChain = try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
        }
        var http = HTTPClient.Configuration(tlsConfiguration: tls)
        http.connectionPool.idleTimeout = .seconds(60)
        http.redirectConfiguration = .disallow
        // Its own event loop and thread: a megabyte per export written on the event loops that
        // serve the process's own connections (Hummingbird's, the shared group) would hold them up.
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = HTTPClient(eventLoopGroup: loop, configuration: http, backgroundActivityLogger: logger)
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                async let encoding: Void = self.encode(on: thread)
                while let (body, spans) = await self.next() { await self.post(body, spans: spans, with: client) }
                await encoding
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            // The group is going down at once: what is held is tried once more (a cancelled POST
            // fails at once and is counted), then the service ends.
            self.stop()
        }
        try await client.shutdown()
        try await thread.shutdownGracefully()
        try await loop.shutdownGracefully()
    }

    /// Stopping: the encoder writes what was handed over and ends, the poster sends what is left.
    func stop() {
        let (poster, parked) = state.withLock { s in
            s.stopping = true
            defer { (s.poster, s.encoderParked) = (nil, false) }
            return (s.poster, s.encoderParked)
        }
        if parked { encoderWake.signal() }
        poster?.resume()
    }

    /// The encoder: writes what is handed over into the open batch, which goes to the poster when
    /// full, when `scheduleDelay` old, or when the service stops. It runs on `thread` (its own):
    /// the writing is steady work, and on Swift's cooperative pool (a thread per core) it would
    /// hold a thread the pipeline's tasks wait for. While outcomes come it looks for what was
    /// handed over every ``encoderPoll`` instead of being woken: waking a thread for each
    /// handing-over (a few dozen outcomes) cost the pipeline more than the writing did. Idle for
    /// ``encoderIdlePolls`` looks with no batch open, it sleeps until the next handing-over.
    func encode(on thread: NIOThreadPool) async {
        let encoder = Encoder(self)
        // The pool refuses work only once shut down, which run() does after this ends; were it
        // not running, a thread of its own, not a blocked thread of Swift's cooperative pool.
        if (try? await thread.runIfActive({ self.encodeLoop(encoder) })) != nil { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                self.encodeLoop(encoder)
                done.resume()
            }
        }
    }

    /// How often the encoder looks for what was handed over.
    static let encoderPoll = 0.005
    /// Looks finding nothing, with no batch open, before the encoder sleeps until woken (0.1 s).
    static let encoderIdlePolls = 20

    /// The encoder's loop, on its thread: what was handed over into the batch, until stopped.
    func encodeLoop(_ encoder: Encoder) {
        var idle = 0
        while true {
            enum Step { case encode([Handed]), stop, idle, park }
            let park = idle >= Self.encoderIdlePolls && encoder.openedAt == nil
            let step: Step = state.withLock { s in
                if !s.pending.isEmpty {
                    var taken: [Handed] = []
                    swap(&taken, &s.pending)
                    s.pendingSpans = 0
                    return .encode(taken)
                }
                if s.stopping { return .stop }
                guard park else { return .idle }
                s.encoderParked = true
                return .park
            }
            switch step {
            case .encode(let handed):
                idle = 0
                encoder.write(handed)
            case .park:
                // Whoever clears `encoderParked` signals (a signal before this wait is kept).
                encoderWake.wait()
                idle = 0
            case .stop:
                encoder.close()
                let poster = state.withLock { s in
                    s.encoded = true
                    defer { s.poster = nil }
                    return s.poster
                }
                poster?.resume()
                return
            case .idle:
                idle += 1
                encoder.closeIfDue()
                Thread.sleep(forTimeInterval: Self.encoderPoll)
            }
        }
    }

    /// The open batch, used by the encoder's loop alone (on the encoder's thread).
    final class Encoder: @unchecked Sendable {
        let exporter: OTLPTraceExporter
        var batch: OTLPSpanBatch
        var openedAt: ContinuousClock.Instant?
        /// One hand-over's requests taken from the book, and the routes they were on (kept:
        /// their room is reused).
        var taken: [TraceBook.Taken] = []
        var routes: [TraceBook.Route] = []

        init(_ exporter: OTLPTraceExporter) {
            self.exporter = exporter
            batch = OTLPSpanBatch(resource: exporter.configuration.resource, scope: "herald", version: "1", seed: exporter.seed)
        }

        /// These outcomes' passages (taken from their book) written into the batch, the sampled
        /// ones, each full batch to the poster.
        func write(_ handed: [Handed]) {
            let most = exporter.configuration.maxBatchSpans
            var records = 0, spans = 0
            for h in handed {
                records += h.records.count
                // Read in place: the records are shared with the other observers' threads, and
                // counting references to them (or their strings) from here contends with those.
                // Each request's route uncounted (`routes` keeps them): a count per request, on
                // objects the pipeline's threads also count, was a sixth of the encoder's time.
                h.records.withUnsafeBufferPointer { recs in
                    h.book.take(recs, into: &taken, keeping: &routes)
                    taken.withUnsafeBufferPointer { requests in
                        for t in requests {
                            t.route._withUnsafeGuaranteedRef { route in
                                let trace = route.trace(t.member)
                                guard exporter.samples(trace) else { return }
                                if openedAt == nil { openedAt = .now }
                                let before = batch.count
                                batch.append(recs, t.index, on: route, trace, route.lane(t.member), end: h.ended)
                                spans += batch.count - before
                                if batch.count >= most { close() }
                            }
                        }
                    }
                }
            }
            taken.removeAll(keepingCapacity: true)
            routes.removeAll(keepingCapacity: true)
            if records > 0 {
                let rate = Double(spans) / Double(records)
                exporter.state.withLock { $0.spansPerRecord = max(rate, 0.01) }
            }
            closeIfDue()
        }

        func closeIfDue() {
            if let opened = openedAt, opened.duration(to: .now) >= exporter.configuration.scheduleDelay { close() }
        }

        /// The open batch to the poster (or dropped, counted, when `maxQueuedSpans` wait to be sent).
        func close() {
            guard batch.count > 0 else { return }
            let (body, spans) = batch.take()
            openedAt = nil
            let most = exporter.configuration.maxQueuedSpans
            let wake = exporter.state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard s.queuedSpans + spans <= most else {
                    exporter.lose(spans, "the export queue is full (\(most) spans: the collector is slower than the spans come)", &s)
                    return nil
                }
                s.ready.append((body, spans))
                s.queuedSpans += spans
                defer { s.poster = nil }
                return s.poster
            }
            wake?.resume()
        }
    }

    /// The poster waits to be woken (a batch ready, or the encoder ended), unless it is so already.
    private func parkPoster() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.ready.isEmpty || s.encoded { return true }
                s.poster = c
                return false
            }
            if now { c.resume() }
        }
    }

    /// The next batch to send; nil once the service stops and everything encoded was taken.
    func next() async -> (body: ByteBuffer, spans: Int)? {
        while true {
            enum Step { case take((body: ByteBuffer, spans: Int)), done, wait }
            let step: Step = state.withLock { s in
                if let first = s.ready.popFirst() {
                    s.queuedSpans -= first.spans
                    return .take(first)
                }
                return s.encoded ? .done : .wait
            }
            switch step {
            case .take(let batch): return batch
            case .done: return nil
            case .wait:
                await parkPoster()
            }
        }
    }

    /// One batch to the collector, retried while OTLP says a retry may work and the export
    /// timeout allows.
    func post(_ body: ByteBuffer, spans: Int, with client: HTTPClient) async {
        var request = HTTPClientRequest(url: configuration.endpoint)
        request.method = .POST
        for (name, value) in configuration.headers { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: "Content-Type", value: "application/x-protobuf")
        request.headers.replaceOrAdd(name: "User-Agent", value: "herald")
        request.body = .bytes(body)
        let deadline = ContinuousClock.now.advanced(by: configuration.exportTimeout)
        var pause = Duration.milliseconds(100)
        while true {
            let problem: String
            var retryable = true
            let left = ContinuousClock.now.duration(to: deadline)
            do {
                let timeout = TimeAmount.nanoseconds(max(1, min(left, configuration.timeout).nanoseconds))
                let response = try await client.execute(request, timeout: timeout, logger: logger)
                _ = try? await response.body.collect(upTo: 1 << 20)
                let status = Int(response.status.code)
                if (200...299).contains(status) {
                    state.withLock { $0.exported += spans }
                    return
                }
                problem = "the collector answered HTTP \(status)"
                retryable = [429, 502, 503, 504].contains(status)
            } catch {
                problem = "no answer from the collector (\(error))"
            }
            let stopping = state.withLock { $0.stopping }
            if !retryable || Task.isCancelled || ContinuousClock.now.advanced(by: pause) >= deadline || (stopping && pause > .seconds(1)) {
                state.withLock { lose(spans, problem, &$0) }
                return
            }
            try? await Task.sleep(for: pause)
            pause *= 2
        }
    }
}

extension Duration {
    fileprivate var nanoseconds: Int64 {
        let (s, a) = components
        return s &* 1_000_000_000 &+ a / 1_000_000_000
    }
}

/// Where and how ``OTLPTraceExporter`` sends, read from OpenTelemetry's standard variables.
public struct OTLPExportConfiguration: Sendable {
    public var endpoint = "http://localhost:4318/v1/traces"
    public var headers: [(String, String)] = []
    /// One POST's limit (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s).
    public var timeout: Duration = .seconds(10)
    /// A batch's limit, retries included (`OTEL_BSP_EXPORT_TIMEOUT`, 30 s).
    public var exportTimeout: Duration = .seconds(30)
    /// How long a batch stays open before it is sent however few spans it holds (`OTEL_BSP_SCHEDULE_DELAY`, 5 s).
    public var scheduleDelay: Duration = .seconds(5)
    /// Spans per POST (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`; Herald's default 8,192, about 1 MiB).
    public var maxBatchSpans = 8192
    /// Spans waiting to be sent at most (`OTEL_BSP_MAX_QUEUE_SIZE`; Herald's default 131,072, about 16 MiB).
    public var maxQueuedSpans = 131_072
    /// Herald's defaults for swift-otel's batch processor, which carries the HTTP requests' spans
    /// (a span a POST), where the `OTEL_BSP_*` variables do not say otherwise (they are applied
    /// over these): its own, the specification's queue of 2,048 and batches of 512, export 512 spans
    /// every 5 s until the queue is full, so `herald serve` past a few hundred POSTs a second kept
    /// that queue full and dropped spans. A swift-otel span is larger than one of ours: a smaller queue.
    package static let requestSpansQueue = 16_384, requestSpansBatch = 4_096
    public var sampler = Sampler.parentBased(.alwaysOn)
    /// The resource's attributes: `service.name` first.
    public var resource: [(String, String)] = [("service.name", "herald")]
    public var certificateFile: String?
    public var clientCertificateFile: String?
    public var clientKeyFile: String?

    public init() {}

    /// OpenTelemetry's samplers (`OTEL_TRACES_SAMPLER`), for a notification's trace, whose parent
    /// is always the caller's span.
    public indirect enum Sampler: Sendable, Equatable {
        case alwaysOn
        case alwaysOff
        /// A share of traces by their id (`traceidratio`): the id's last 8 bytes below the ratio of 2⁶³.
        case ratio(Double)
        /// The parent's sampled flag decides (a notification always has a parent).
        case parentBased(Sampler)

        public func samples(_ trace: NotificationTrace) -> Bool {
            switch self {
            case .alwaysOn: return true
            case .alwaysOff: return false
            case .parentBased: return trace.isSampled
            case .ratio(let r):
                if r >= 1 { return true }
                if r <= 0 { return false }
                return trace.traceLow & 0x7FFF_FFFF_FFFF_FFFF < UInt64(r * 0x1p63)
            }
        }
    }

    /// The configuration the environment gives; nil when it asks for what this exporter does not
    /// do (an exporter other than `otlp`, a protocol other than `http/protobuf`, compression):
    /// the spans then go through the process's tracer. An error names a variable with a bad value.
    public static func fromEnvironment(_ env: [String: String]) throws(OTLPConfigurationError) -> OTLPExportConfiguration? {
        func value(_ key: String) -> String? {
            guard let v = env[key]?.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
            return v
        }
        func signal(_ key: String) -> (name: String, value: String)? {
            let own = "OTEL_EXPORTER_OTLP_TRACES_" + key, shared = "OTEL_EXPORTER_OTLP_" + key
            if let v = value(own) { return (own, v) }
            return value(shared).map { (shared, $0) }
        }
        func milliseconds(_ name: String, _ text: String) throws(OTLPConfigurationError) -> Duration {
            guard let ms = Int(text), ms >= 0 else { throw OTLPConfigurationError(variable: name, value: text, expected: "milliseconds") }
            return .milliseconds(ms)
        }
        var c = OTLPExportConfiguration()
        let exporters = (value("OTEL_TRACES_EXPORTER") ?? "otlp").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard exporters == ["otlp"] else { return nil }
        if let p = signal("PROTOCOL"), p.value != "http/protobuf" { return nil }
        if let z = signal("COMPRESSION"), z.value.lowercased() != "none" { return nil }
        if let e = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            c.endpoint = e
        } else if let e = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            c.endpoint = e.hasSuffix("/") ? e + "v1/traces" : e + "/v1/traces"
        }
        guard let url = URL(string: c.endpoint), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw OTLPConfigurationError(variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", value: c.endpoint, expected: "an http or https URL")
        }
        if let h = signal("HEADERS") {
            c.headers = try pairs(h.value, variable: h.name)
        }
        if let t = signal("TIMEOUT") { c.timeout = try milliseconds(t.name, t.value) }
        c.certificateFile = signal("CERTIFICATE")?.value
        c.clientCertificateFile = signal("CLIENT_CERTIFICATE")?.value
        c.clientKeyFile = signal("CLIENT_KEY")?.value
        if (c.clientCertificateFile == nil) != (c.clientKeyFile == nil) {
            throw OTLPConfigurationError(
                variable: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", value: c.clientCertificateFile ?? "", expected: "a certificate and a key (OTEL_EXPORTER_OTLP_CLIENT_KEY) together")
        }
        if let d = value("OTEL_BSP_SCHEDULE_DELAY") { c.scheduleDelay = try milliseconds("OTEL_BSP_SCHEDULE_DELAY", d) }
        if let d = value("OTEL_BSP_EXPORT_TIMEOUT") { c.exportTimeout = try milliseconds("OTEL_BSP_EXPORT_TIMEOUT", d) }
        for (key, path) in [("OTEL_BSP_MAX_QUEUE_SIZE", \OTLPExportConfiguration.maxQueuedSpans), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", \.maxBatchSpans)] {
            guard let text = value(key) else { continue }
            guard let n = Int(text), n > 0 else { throw OTLPConfigurationError(variable: key, value: text, expected: "a positive number") }
            c[keyPath: path] = n
        }
        c.maxBatchSpans = min(c.maxBatchSpans, c.maxQueuedSpans)
        c.sampler = try sampler(value("OTEL_TRACES_SAMPLER"), argument: value("OTEL_TRACES_SAMPLER_ARG"))
        var resource: [(String, String)] = []
        if let attributes = value("OTEL_RESOURCE_ATTRIBUTES") { resource = try pairs(attributes, variable: "OTEL_RESOURCE_ATTRIBUTES") }
        let name = value("OTEL_SERVICE_NAME") ?? resource.last { $0.0 == "service.name" }?.1 ?? "herald"
        resource.removeAll { $0.0 == "service.name" }
        c.resource = [("service.name", name)] + resource
        return c
    }

    static func sampler(_ name: String?, argument: String?) throws(OTLPConfigurationError) -> Sampler {
        func ratio() throws(OTLPConfigurationError) -> Double {
            guard let argument else { return 1 }
            guard let r = Double(argument), (0...1).contains(r) else {
                throw OTLPConfigurationError(variable: "OTEL_TRACES_SAMPLER_ARG", value: argument, expected: "a ratio from 0 to 1")
            }
            return r
        }
        switch name?.lowercased() ?? "parentbased_always_on" {
        case "always_on": return .alwaysOn
        case "always_off": return .alwaysOff
        case "traceidratio": return .ratio(try ratio())
        case "parentbased_always_on": return .parentBased(.alwaysOn)
        case "parentbased_always_off": return .parentBased(.alwaysOff)
        case "parentbased_traceidratio": return .parentBased(.ratio(try ratio()))
        default:
            throw OTLPConfigurationError(
                variable: "OTEL_TRACES_SAMPLER", value: name ?? "",
                expected: "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
        }
    }

    /// `key=value,key=value`, values percent-decoded (W3C Baggage's format, as OpenTelemetry reads these variables).
    static func pairs(_ text: String, variable: String) throws(OTLPConfigurationError) -> [(String, String)] {
        var out: [(String, String)] = []
        for item in text.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1)
            let key = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard parts.count == 2, !key.isEmpty, let value = parts[1].trimmingCharacters(in: .whitespaces).removingPercentEncoding else {
                throw OTLPConfigurationError(variable: variable, value: "…", expected: "key=value pairs separated by commas")
            }
            out.append((key, value))
        }
        return out
    }
}

/// A variable with a value the exporter cannot use. The value is not repeated when it may hold a secret (headers).
public struct OTLPConfigurationError: Error, CustomStringConvertible {
    public let variable: String
    public let value: String
    public let expected: String
    public var description: String { "\(variable)=\(value): expected \(expected)" }
}
