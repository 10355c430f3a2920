import CoreMetrics
// An app imports HeraldClient alone: the requests and their builders (HeraldCore) and the
// configuration (HeraldKit) come with it.
@_exported import HeraldCore
@_exported import HeraldKit
import HeraldTracing
import Logging
import ServiceLifecycle
import Synchronization
import Tracing

/// Herald for an app that sends as things happen and awaits what became of
/// each notification: the same pipeline as `herald send` (token store,
/// localization, payload, size guard, the configured transport), long-lived,
/// run as a swift-service-lifecycle `Service` in the app's `ServiceGroup`.
///
/// ```swift
/// let client = try HeraldClient(configuration: .load(path: "herald.json"))
/// // run it in the app's ServiceGroup: ServiceGroup(services: [client, app], …)
/// let outcome = try await client.send(.alert(to: try DeviceToken(hex: hex), body: "Your order shipped"))
/// if outcome.isTokenDead { forgetDevice(hex) }
/// ```
///
/// - Concurrent `send` calls are gathered into the pipeline's batches: many
///   callers cost about what one batch of the same size does.
/// - At most ``Options/maxUndecided`` notifications are taken and not yet
///   decided; past that, `send` suspends until outcomes make room (memory
///   stays bounded); nothing is dropped.
/// - Every notification taken ends in exactly one recorded outcome (in the
///   ledger, the observers, the outcome files). A caller cancelled while it
///   waits for room withdraws its notification (nothing entered); one
///   cancelled after its notification was taken gets `CancellationError` at
///   once, and the notification goes on: it is not withdrawn once taken.
/// - Shutdown (the group's graceful shutdown): new sends throw
///   ``HeraldClientError/shutDown``; everything taken drains and its callers
///   get their outcomes. If `run()` is cancelled instead, what was not yet
///   handed to the pipeline ends `failed` (code `abandoned`).
/// - Traced (given ``ClientTracing``): a `send` made inside a sampled span (the
///   caller's task context: a traced HTTP handler's, a span the app started)
///   carries that span's trace, and its notification's wait, stages and APNs'
///   answer become spans under it (docs/service.md, "Tracing").
public final class HeraldClient: Service, Sendable {
    public struct Options: Sendable, Hashable {
        /// Notifications taken and not yet decided before `send` waits.
        public var maxUndecided: Int = 65_536
        /// Bulk-lane notifications are let into the pipeline only while fewer than this many are in
        /// it (handed on, not yet decided): the rest of a campaign waits at the intake, where a
        /// fast-lane notification overtakes it (docs/apps.md, "Lanes"). `nil`: the transport's
        /// (`LaneWindowing`: half the HTTP/2 transport's `maxQueued`, 8,192 by default; none for
        /// transports without one, such as the binary interface's); 0: none (a fast-lane
        /// notification then waits behind the campaign's part in the stages).
        public var bulkWindow: Int?
        public init(maxUndecided: Int = 65_536, bulkWindow: Int? = nil) {
            self.maxUndecided = maxUndecided
            self.bulkWindow = bulkWindow
        }
    }

    let intake: ClientIntake
    let pipeline: Pipeline
    let started = Atomic<Bool>(false)
    /// Whose spans callers send from (nil: not traced).
    let tracer: (any Tracer)?
    /// The books of everything sent through this client (``OutcomeLedger/snapshot``).
    public let ledger: OutcomeLedger

    /// A client for a configuration, as `herald send` reads it (the transport,
    /// `tokens`, `localization`, `payload`, `stages`, `pipeline`).
    public convenience init(
        configuration: HeraldConfiguration, registry: HeraldRegistry = .standard(), logger: Logger = Logger(label: "herald"),
        observers: [any OutcomeObserver] = [], metrics: (any MetricsFactory)? = nil, options: Options = Options(),
        tracing: ClientTracing? = nil
    ) throws {
        let assembly = try HeraldAssembly.configured(configuration, registry: registry, logger: logger)
        try self.init(assembly: assembly, observers: observers, metrics: metrics, options: options, tracing: tracing)
    }

    /// A client from an assembly (stages added in code, a token store of
    /// the app's own), optionally with a transport made in code
    /// (`HeraldTesting`'s simulator). `observers` see every outcome before
    /// its caller is resumed.
    public init(
        assembly: HeraldAssembly, transport: (any Transport)? = nil, observers: [any OutcomeObserver] = [],
        metrics: (any MetricsFactory)? = nil, options: Options = Options(), tracing: ClientTracing? = nil
    ) throws {
        let intake = ClientIntake(capacity: options.maxUndecided)
        let book = tracing == nil ? nil : TraceBook()
        let ledger = OutcomeLedger(observers: observers, traceBook: book)
        pipeline = try assembly.makePipeline(source: intake.requests.source, ledger: ledger, transport: transport, metrics: metrics)
        intake.requests.setBulkWindow(options.bulkWindow ?? (pipeline.transport as? any LaneWindowing)?.bulkWindow)
        if let tracing, let book {
            let tracer = tracing.tracer ?? InstrumentationSystem.tracer
            ledger.addObserver(tracing.exporter.map { NotificationSpans(book: book, exporter: $0) } ?? NotificationSpans(book: book, tracer: tracer))
            self.tracer = tracer
        } else {
            self.tracer = nil
        }
        // Last: a caller resumes once the token store and every observer have seen its outcome.
        ledger.addObserver(ClientObserver(intake: intake))
        self.intake = intake
        self.ledger = ledger
    }

    /// Runs the pipeline until the service group shuts down gracefully (then
    /// drains everything taken) or the task is cancelled. Once only.
    public func run() async throws {
        guard !started.exchange(true, ordering: .relaxed) else { throw HeraldClientError.alreadyRunning }
        let intake = self.intake, pipeline = self.pipeline, ledger = self.ledger
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            // Outcomes reach their callers from a task of their own, off the transport's thread.
            group.addTask { await intake.resumeCallers() }
            do {
                _ = try await withTaskCancellationHandler {
                    try await withGracefulShutdownHandler {
                        try await pipeline.run()
                    } onGracefulShutdown: {
                        intake.close()
                    }
                } onCancel: {
                    intake.close()
                }
            } catch {
                failure = error
            }
            intake.close()
            // Requests the pipeline never took (its run was cancelled) end failed, which resumes their callers.
            intake.requests.failQueued(ledger, reason: OutcomeReason(.abandoned, "the Herald client stopped before sending it"))
            intake.endResuming()
        }
        if let failure { throw failure }
    }

    /// Stops taking notifications; what was taken drains and `run()` returns
    /// (what the service group's graceful shutdown does).
    public func shutdown() { intake.close() }

    /// Sends one notification and returns how it ended.
    /// - Throws: ``HeraldClientError/shutDown`` when the client is shutting
    ///   down, `CancellationError` when the caller is cancelled (see the type's
    ///   notes: a notification already taken still goes).
    public func send(_ request: NotificationRequest) async throws -> SendOutcome {
        let request = traced(request)
        try await intake.reserveUnlessCancelled(1, lane: request.effectiveLane)
        let ticket = Ticket()
        let intake = self.intake
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (c: UnsafeContinuation<SendOutcome, any Error>) in
                switch intake.submit(request, waiter: .one(c)) {
                case .success(let sequence):
                    if ticket.set(sequence) { intake.detach(sequence) }
                case .failure(let error):
                    intake.unreserve(1)
                    c.resume(throwing: error)
                }
            }
        } onCancel: {
            if let sequence = ticket.cancel() { intake.detach(sequence) }
        }
    }

    /// Sends notifications together (one batch, in order) and returns how
    /// each ended, in the same order.
    public func send(_ requests: [NotificationRequest]) async throws -> [SendOutcome] {
        guard !requests.isEmpty else { return [] }
        let requests = traced(requests)
        // A batch with a fast-lane request in it is given room as the fast lane is.
        try await intake.reserveUnlessCancelled(requests.count, lane: requests.contains { $0.effectiveLane == .fast } ? .fast : .bulk)
        let waiter = BatchWaiter(count: requests.count)
        if case .failure(let error) = intake.submit(requests, waiter: { .batch(waiter, $0) }) {
            intake.unreserve(requests.count)
            throw error
        }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { waiter.wait($0) }
        } onCancel: {
            waiter.cancel()
        }
    }
}

extension HeraldClient {
    /// Takes a notification and returns at once, without waiting for its outcome: for a scheduled
    /// send (`sendAt`), held until its time, which ``ScheduledSend/cancel()`` can withdraw before
    /// then; ``ScheduledSend/outcome()`` awaits how it ended (`cancelled` if it was). Held sends
    /// count towards ``Options/maxUndecided`` and are at most 100,000 at once (past that
    /// ``HeraldClientError/scheduleFull(capacity:)``); a send-at already past sends it now.
    /// - Throws: ``HeraldClientError/shutDown`` once the client is shutting down,
    ///   `CancellationError` when the caller is cancelled while it waits for room.
    public func schedule(_ request: NotificationRequest) async throws -> ScheduledSend {
        let request = traced(request)
        try await intake.reserveUnlessCancelled(1, lane: request.effectiveLane)
        let promise = OutcomePromise()
        switch intake.submit(request, waiter: .promise(promise)) {
        case .success(let sequence): return ScheduledSend(sequence: sequence, sendAt: request.sendAt, promise: promise, client: self)
        case .failure(let error):
            intake.unreserve(1)
            throw error
        }
    }
}

extension HeraldClient {
    /// The requests as a traced client takes them (as `herald serve` takes a POST's): each
    /// without a trace of its own joins the caller's span when the caller is in a sampled one, and
    /// each traced one is queued now (its `enqueued-at`, where its wait starts) unless it says when.
    func traced(_ requests: [NotificationRequest]) -> [NotificationRequest] {
        guard let tracer else { return requests }
        var batch = IntakeBatch(requests: requests, texts: [])
        let caller = NotificationTrace.current(tracer: tracer).flatMap { $0.isSampled ? $0 : nil }
        if let caller {
            batch.join(caller, enqueuedAt: Duration.sinceEpochMilliseconds)
        } else if requests.contains(where: { $0.trace != nil && $0.trace?.enqueuedAt == nil }) {
            let now = Duration.sinceEpochMilliseconds
            for i in batch.requests.indices where batch.requests[i].trace != nil && batch.requests[i].trace?.enqueuedAt == nil {
                batch.requests[i].trace?.enqueuedAt = now
            }
        }
        return batch.requests
    }

    func traced(_ request: NotificationRequest) -> NotificationRequest {
        tracer == nil ? request : traced([request])[0]
    }
}

/// How a ``HeraldClient`` traces what it sends (issue 31): the caller's span (its task's
/// `ServiceContext`) is read with `tracer`, and each traced notification's spans (its wait in the
/// client, its send, a span per stage, APNs' answer) are made on `tracer`, or written into OTLP
/// by `exporter` (Herald's own writer: far cheaper per span; run it in the app's `ServiceGroup`
/// before the client, so it stops after it).
public struct ClientTracing: Sendable {
    /// The tracer the app's spans are made on; nil: the process's (`InstrumentationSystem.tracer`).
    public var tracer: (any Tracer)?
    /// Herald's OTLP writer for the notifications' spans; nil: they are made on `tracer`.
    public var exporter: OTLPTraceExporter?

    public init(tracer: (any Tracer)? = nil, exporter: OTLPTraceExporter? = nil) {
        self.tracer = tracer
        self.exporter = exporter
    }
}

/// A notification taken by ``HeraldClient/schedule(_:)``: cancel it before its time, or await its outcome.
public struct ScheduledSend: Sendable {
    /// Its number in the client (the `sequence` of its outcome record).
    public let sequence: UInt64
    /// When it is to go (epoch milliseconds), as the request said; `nil`: now.
    public let sendAt: Int64?
    let promise: OutcomePromise
    let client: HeraldClient

    /// Withdraws it if its time has not come: it then ends `cancelled` (code `cancelled`), which
    /// ``outcome()`` returns, and is never sent. False when it is on its way or decided already.
    @discardableResult
    public func cancel() -> Bool { client.intake.cancel(sequence, ledger: client.ledger) }

    /// How it ended, once it has (at its time and the transport's answer, or when cancelled).
    /// - Throws: `CancellationError` when the awaiting task is cancelled (the notification is not).
    public func outcome() async throws -> SendOutcome { try await promise.value() }
}

/// An outcome kept for any number of callers, who may ask before or after it comes.
final class OutcomePromise: Sendable {
    struct State {
        var outcome: SendOutcome?
        var waiting: [Int: UnsafeContinuation<SendOutcome, any Error>] = [:]
        var next = 0
    }
    let state = Mutex(State())

    func fulfil(_ outcome: SendOutcome) {
        let waiting = state.withLock { s in
            s.outcome = outcome
            defer { s.waiting = [:] }
            return s.waiting.values
        }
        for c in waiting { c.resume(returning: outcome) }
    }

    func value() async throws -> SendOutcome {
        let ticket = state.withLock { s in
            defer { s.next += 1 }
            return s.next
        }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (c: UnsafeContinuation<SendOutcome, any Error>) in
                let now: Result<SendOutcome, any Error>? = state.withLock { s in
                    if let outcome = s.outcome { return .success(outcome) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiting[ticket] = c
                    return nil
                }
                if let now { c.resume(with: now) }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: ticket) }?.resume(throwing: CancellationError())
        }
    }
}

/// A `send`'s sequence number once taken, and whether its caller was
/// cancelled: whichever of the two comes second detaches the caller.
final class Ticket: Sendable {
    static let cancelledBit: UInt64 = 1 << 63
    static let unset: UInt64 = (1 << 63) - 1
    let value = Atomic<UInt64>(unset)

    /// Records the sequence number; true if the caller was already cancelled.
    func set(_ sequence: UInt64) -> Bool {
        let (exchanged, original) = value.compareExchange(expected: Self.unset, desired: sequence, ordering: .acquiringAndReleasing)
        return !exchanged && original & Self.cancelledBit != 0
    }

    /// Marks the caller cancelled; the sequence number if it was already taken.
    func cancel() -> UInt64? {
        let original = value.bitwiseOr(Self.cancelledBit, ordering: .acquiringAndReleasing).oldValue
        return original == Self.unset ? nil : original
    }
}

/// Hands each outcome to the caller waiting for it.
struct ClientObserver: OutcomeObserver {
    let intake: ClientIntake
    func observe(_ records: [OutcomeRecord]) { intake.decided(records) }
}
