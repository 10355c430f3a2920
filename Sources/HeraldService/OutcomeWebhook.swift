import AsyncHTTPClient
import DequeModule
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOSSL
import ServiceLifecycle
import Synchronization

/// Posts chosen outcomes (dead tokens and failures by default) to the
/// caller's URL in batches, with retries (``WebhookVerdict``), on
/// AsyncHTTPClient.
///
/// Each POST is `{"batch":"<id>","outcomes":[{"notification":N,"outcome":{…}}]}`
/// with the batch id also in `Idempotency-Key`, so a receiver can discard a
/// batch it already took when an answer was lost and the batch came again.
/// The queue is bounded (`maxQueued`): past it outcomes are counted as
/// overflow and logged, never held without bound; they stay readable through
/// `GET /v1/notifications/{id}` and the outcomes file.
///
/// As a service it runs after the pipeline in the service group: on shutdown
/// it posts what is left for at most `drainTimeout`, then reports what it
/// could not deliver.
public final class OutcomeWebhook: OutcomeObserver, Service {
    struct State {
        var queue = Deque<OutcomeRecord>()
        var oldest: ContinuousClock.Instant?
        var waiter: CheckedContinuation<Void, Never>?
        var stopping: ContinuousClock.Instant?
        var abandoned = false
    }
    let state = Mutex(State())
    public let configuration: WebhookConfiguration
    let logger: Logger
    let batchPrefix: String
    let nextBatch = Atomic<Int>(1)
    let delivered, undelivered, overflow, postsOK, postsRetried, postsGivenUp: Counter
    let depth: Gauge
    /// Outcomes delivered, given up, or refused for a full queue (for the summary and tests).
    let totals = Mutex((delivered: 0, undelivered: 0, overflow: 0))

    /// What the receiver knows a notification by: its pipeline sequence number unless this maps it
    /// (with the PostgreSQL queue, to its row id).
    let notificationID: (@Sendable (UInt64) -> UInt64?)?
    /// What an outcome's `line` is called (``NotificationSource/lineKey``: `row` for a queue's rows).
    let lineKey: StaticString

    public init(
        configuration: WebhookConfiguration, logger: Logger, metrics: any MetricsFactory,
        notificationID: (@Sendable (UInt64) -> UInt64?)? = nil, lineKey: StaticString = "line"
    ) {
        self.notificationID = notificationID
        self.lineKey = lineKey
        self.configuration = configuration
        self.logger = logger
        batchPrefix = "\(getpid())-\(Int(Date().timeIntervalSince1970))"
        func outcomes(_ result: String) -> Counter {
            Counter(label: "herald_webhook_outcomes_total", dimensions: [("result", result)], factory: metrics)
        }
        func posts(_ result: String) -> Counter {
            Counter(label: "herald_webhook_posts_total", dimensions: [("result", result)], factory: metrics)
        }
        delivered = outcomes("delivered")
        undelivered = outcomes("undelivered")
        overflow = outcomes("overflow")
        postsOK = posts("delivered")
        postsRetried = posts("retried")
        postsGivenUp = posts("given_up")
        depth = Gauge(label: "herald_webhook_queue_depth", factory: metrics)
    }

    /// Outcomes delivered to the receiver, given up, and refused for a full queue, so far.
    public var counts: (delivered: Int, undelivered: Int, overflow: Int) { totals.withLock { $0 } }

    /// The URL without credentials or query, for logs.
    var target: String {
        guard var c = URLComponents(string: configuration.url) else { return "(the webhook URL)" }
        c.user = nil
        c.password = nil
        c.query = nil
        return c.string ?? "(the webhook URL)"
    }

    public func observe(_ records: [OutcomeRecord]) {
        var chosen = records.filter { configuration.kinds.contains($0.outcome.kind) }
        guard !chosen.isEmpty else { return }
        if let map = notificationID {
            for i in chosen.indices { chosen[i].sequence = map(chosen[i].sequence) ?? chosen[i].sequence }
        }
        let (waiter, refused) = state.withLock { s -> (CheckedContinuation<Void, Never>?, Int) in
            let room = max(0, configuration.maxQueued - s.queue.count)
            s.queue.append(contentsOf: chosen.prefix(room))
            if s.oldest == nil && !s.queue.isEmpty { s.oldest = .now }
            defer { s.waiter = nil }
            return (s.waiter, chosen.count - min(room, chosen.count))
        }
        if refused > 0 {
            overflow.increment(by: refused)
            let before = totals.withLock { t in defer { t.overflow += refused }; return t.overflow }
            if before == 0 {
                logger.error("webhook queue full (\(configuration.maxQueued) outcomes): outcomes not posted are counted in herald_webhook_outcomes_total{result=\"overflow\"}")
            }
        }
        waiter?.resume()
    }

    /// No more outcomes will come: post what is left, for at most `drainTimeout`.
    public func finishPosting() {
        let waiter = state.withLock { s in
            if s.stopping == nil { s.stopping = .now.advanced(by: configuration.drainTimeout) }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Stop posting at once (a second signal): what is left, and what comes
    /// later, is counted as undelivered; the service itself ends with the
    /// group's shutdown, in its turn.
    public func abandon() {
        let waiter = state.withLock { s in
            s.abandoned = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    public func run() async throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = configuration.caFile { tls.additionalTrustRoots = [.file(ca)] }
        var http = HTTPClient.Configuration(tlsConfiguration: tls)
        http.connectionPool.idleTimeout = .seconds(30)
        // A redirect would turn the POST into a GET without a body, then count as delivered: a 3xx gives up instead.
        http.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http, backgroundActivityLogger: logger)
        logger.info("posting \(configuration.kinds.map(\.rawValue).sorted().joined(separator: ", ")) outcomes to \(target)")
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                while let batch = await self.takeBatch() { await self.post(batch, with: client) }
            } onGracefulShutdown: {
                self.finishPosting()
            }
        } onCancel: {
            // The group is going down (a service failed): stop now.
            self.finishPosting()
            self.abandon()
        }
        let left = state.withLock { s in defer { s.queue.removeAll() }; return s.queue.count }
        if left > 0 { giveUp(left, "the service stopped before they were posted") }
        try await client.shutdown()
    }

    /// The next batch: full, or its oldest outcome waited `flushInterval`, or
    /// the service is stopping; `nil` when stopped and empty (or abandoned, or past the drain deadline).
    func takeBatch() async -> [OutcomeRecord]? {
        while true {
            enum Step { case take([OutcomeRecord]), done, wait, sleep(Duration), drop(Int) }
            let step: Step = state.withLock { s in
                if s.abandoned {
                    if !s.queue.isEmpty {
                        defer { s.queue.removeAll() }
                        return .drop(s.queue.count)
                    }
                    return s.stopping != nil ? .done : .wait
                }
                if let deadline = s.stopping, s.queue.isEmpty || deadline < .now { return .done }
                guard let oldest = s.oldest, !s.queue.isEmpty else { return .wait }
                let due = oldest.advanced(by: configuration.flushInterval)
                guard s.queue.count >= configuration.batchSize || s.stopping != nil || due <= .now else {
                    return .sleep(min(ContinuousClock.now.duration(to: due), .milliseconds(50)))
                }
                let n = min(configuration.batchSize, s.queue.count)
                let batch = Array(s.queue.prefix(n))
                s.queue.removeFirst(n)
                s.oldest = s.queue.isEmpty ? nil : .now
                depth.record(s.queue.count)
                return .take(batch)
            }
            switch step {
            case .take(let batch): return batch
            case .done: return nil
            case .sleep(let d): try? await Task.sleep(for: d)
            case .drop(let n): giveUp(n, "abandoned by a second signal")
            case .wait:
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { s -> Bool in
                        if !s.queue.isEmpty || s.stopping != nil { return true }
                        s.waiter = c
                        return false
                    }
                    if now { c.resume() }
                }
            }
        }
    }

    /// The body of one POST.
    static func body(_ batch: [OutcomeRecord], id: String, lineKey: StaticString = "line") -> [UInt8] {
        var w = JSONWriter(capacity: 64 + batch.count * 200)
        w.raw("{\"batch\":")
        w.string(id)
        w.raw(",\"outcomes\":[")
        var first = true
        for r in batch {
            w.separator(&first)
            w.raw("{\"notification\":")
            w.int(Int(r.sequence))
            w.raw(",\"outcome\":")
            r.writeJSON(to: &w, lineKey: lineKey)
            w.raw("}")
        }
        w.raw("]}")
        return w.bytes
    }

    func post(_ batch: [OutcomeRecord], with client: HTTPClient) async {
        let id = "\(batchPrefix)-\(nextBatch.wrappingAdd(1, ordering: .relaxed).oldValue)"
        var request = HTTPClientRequest(url: configuration.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: id)
        request.headers.add(name: "User-Agent", value: "herald")
        if let token = configuration.bearerToken { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.body = .bytes(ByteBuffer(bytes: Self.body(batch, id: id, lineKey: lineKey)))
        let timeout = TimeAmount.nanoseconds(Int64(configuration.timeout.components.seconds) * 1_000_000_000)
        var attempt = 0
        while true {
            attempt += 1
            var status: Int?, retryAfter: Int?, problem = ""
            do {
                let response = try await client.execute(request, timeout: timeout, logger: logger)
                status = Int(response.status.code)
                retryAfter = response.headers.first(name: "Retry-After").flatMap { Int($0) }
                _ = try? await response.body.collect(upTo: 1 << 20)
            } catch {
                problem = ": \(error)"
            }
            switch WebhookVerdict.after(status: status, retryAfterSeconds: retryAfter, attempt: attempt, attempts: configuration.attempts) {
            case .delivered:
                postsOK.increment()
                delivered.increment(by: batch.count)
                totals.withLock { $0.delivered += batch.count }
                return
            case .giveUp(let why):
                postsGivenUp.increment()
                giveUp(batch.count, "batch \(id): \(why)\(problem)")
                return
            case .retry(let delay):
                postsRetried.increment()
                logger.warning("webhook batch \(id) (\(batch.count) outcomes), attempt \(attempt): \(status.map { "HTTP \($0)" } ?? "no answer")\(problem); retrying in \(delay)")
                guard await pause(for: delay) else {
                    postsGivenUp.increment()
                    giveUp(batch.count, "batch \(id): the service is stopping and its drain time is over")
                    return
                }
            }
        }
    }

    /// Waits `delay` before a retry, in short steps so that a shutdown ends
    /// the wait; `false` when abandoned, or when the retry would come after the drain deadline.
    func pause(for delay: Duration) async -> Bool {
        let until = ContinuousClock.now.advanced(by: delay)
        while true {
            let (abandoned, deadline) = state.withLock { ($0.abandoned, $0.stopping) }
            if abandoned || (deadline.map { $0 < until } ?? false) { return false }
            let left = ContinuousClock.now.duration(to: until)
            if left <= .zero { return true }
            try? await Task.sleep(for: min(left, .milliseconds(100)))
        }
    }

    func giveUp(_ count: Int, _ why: String) {
        undelivered.increment(by: count)
        totals.withLock { $0.undelivered += count }
        logger.error("webhook: \(count) outcomes not delivered to \(target): \(why); GET /v1/notifications/{id} still answers them while kept (and the outcomes file has them, if configured)")
    }
}
