/// A step of the pipeline that works on batches of envelopes.
///
/// This is the protocol for custom stages (filters, enrichers, rate limiters)
/// and the one every built-in stage is adapted to. The contract:
/// - Work on the envelopes whose `outcome` is `nil`; leave the others as they are.
/// - To end a request early, set its `outcome` (`dropped`, `suppressed`…); the
///   runtime records it and removes it from the batch. Never remove an
///   envelope from the batch yourself: that would lose it.
/// - Keep the order of the envelopes.
/// - A thrown error fails every undecided envelope of the batch (recorded as
///   `failed`, naming the stage); the pipeline carries on with the next batch.
///
/// ```swift
/// struct DropTopic: PipelineStage {
///     let topic: String
///     func process(_ batch: inout [Envelope]) async throws {
///         for i in batch.indices where batch[i].outcome == nil && batch[i].request.topic == topic {
///             batch[i].outcome = .dropped("topic \(topic) is paused")
///         }
///     }
/// }
/// ```
public protocol PipelineStage: Sendable {
    func process(_ batch: inout [Envelope]) async throws
}

/// A stage whose `process` may run on several batches at once, from several
/// tasks (issue 29): with `pipeline.threads` above 1, a run of consecutive
/// concurrent stages works on up to twice that many batches at once, each
/// batch through the whole run in order, and the batches go on in the order
/// they came. Conform only a stage that keeps no state between batches (or
/// guards what it keeps and does not care in which order batches reach it),
/// does not wait, and skips envelopes that already have an outcome (the
/// runtime records a batch's outcomes when its turn comes, so a later stage
/// of the run still sees them). The built-in stages conform; a stage that
/// counts, paces or orders (`RateLimitStage`) must not.
public protocol ConcurrentStage: PipelineStage {}

/// A reason a single request cannot go on, which becomes its `dropped` outcome.
public struct StageFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String
    /// What kind of problem it is (the outcome's reason code).
    public var code: OutcomeReason.Code
    public init(_ reason: String, code: OutcomeReason.Code = .invalidRequest) {
        self.reason = reason
        self.code = code
    }
    public var description: String { reason }
}

/// Renders or checks a request's localization keys.
public protocol Localizer: Sendable {
    /// Localizes `request` in place (server-side) or checks its keys (client-side).
    func localize(_ request: inout NotificationRequest) throws(StageFailure)
}

/// Turns a request into its compact JSON payload.
public protocol PayloadBuilder: Sendable {
    /// Builds the payload bytes. May adjust the request (e.g. choose a priority).
    func build(_ request: inout NotificationRequest) throws(StageFailure) -> [UInt8]
}

/// Keeps payloads within the interface's limit.
public protocol SizeGuard: Sendable {
    /// The limit in bytes.
    var limit: Int { get }
    /// Checks `envelope.payload`; may shorten it (and the request's text) or throw.
    func enforce(_ envelope: inout Envelope) throws(StageFailure)
}

/// Encodes a notification for the wire.
public protocol Framer: Sendable {
    /// Encodes the envelope's token, payload, expiry and priority.
    func frame(_ envelope: Envelope) throws(StageFailure) -> Frame
    /// Sets `envelope.frame` to ``frame(_:)``'s. The default calls it; ``FrameStage`` calls this,
    /// which lends the envelope by address: lent to `frame(_:)` from the stage's generic code,
    /// it was first copied whole (473 bytes) for every notification.
    func frame(into envelope: inout Envelope) throws(StageFailure)
}

extension Framer {
    @inlinable public func frame(into envelope: inout Envelope) throws(StageFailure) {
        let frame = try frame(envelope)
        envelope.frame = frame
    }
}

/// Delivers framed notifications and reports how each ended.
///
/// The contract: every envelope handed to `send` ends in exactly one outcome
/// reported through `outcomes`, during `send` or later; by the time `finish`
/// returns, all of them have been reported.
public protocol Transport: Sendable {
    /// Sends a batch, in order. Waiting here slows the whole pipeline (backpressure).
    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws
    /// No more batches will come: flush, make sure everything sent has an outcome, close.
    func finish(outcomes: OutcomeLedger) async
    /// The pipeline was asked to stop (a signal): stop waiting for room
    /// (``send(_:outcomes:)`` must not hold the drain up) and start the
    /// shutdown deadline now. Called from any thread, possibly more than once.
    func shutdownRequested()
    /// Give up now (a second signal): everything queued or unconfirmed, and
    /// everything handed over later, ends `failed` with `reason`.
    func abandon(_ reason: String)
}

/// A transport whose lanes gain from a short queue before it: bulk-lane requests
/// are let into the pipeline ahead of it (by `herald serve`'s and `HeraldClient`'s
/// in-memory intake) only while fewer than ``bulkWindow`` requests are in it, so a
/// fast-lane request overtakes a campaign at the intake, not behind it in the
/// stages' buffers. Transports that do not conform get no window: nothing limits
/// what enters (the binary interface confirms in bulk, and would slow with a window).
public protocol LaneWindowing: Sendable {
    /// Requests the transport needs in flight to stay busy, and under which a fast-lane batch
    /// never waits for the bulk lane's room in it.
    var bulkWindow: Int { get }
}

/// Whether a transport can deliver now, for readiness probes (`herald serve`'s `/readyz`).
public enum TransportHealth: Sendable, Hashable {
    case ready
    /// It cannot deliver now, and why (naming the endpoint; never a secret).
    case unavailable(String)
}

/// A transport that knows whether it can deliver (its connections, its
/// credentials). Transports that do not conform are taken as always ready.
public protocol TransportHealthReporting: Sendable {
    var health: TransportHealth { get }
}

/// A transport that counts what its connections did: every transport's
/// counters in one shape, for `herald send`'s summary and `herald serve`'s
/// `/metrics` (as `herald_transport_<name>_total`), with no downcast to a
/// transport's own type. Names are snake_case; every name a transport has is
/// listed from the start, at 0 until it counts something. Names shared by
/// transports mean the same: `connections`, `handshakes`, `connect_failures`,
/// `resent`, and `possible_duplicates` (notifications sent again after an
/// answer was lost: the only ones a device may have received twice).
public protocol TransportReporting: Sendable {
    /// Totals since the transport started, in a fixed order.
    var counters: [(name: String, value: Int)] { get async }
}

extension Transport {
    /// Transports that never wait for long need do nothing.
    public func shutdownRequested() {}
    /// Transports that never hold notifications for long need do nothing.
    public func abandon(_ reason: String) {}
}

/// Per-request check applied by a `PipelineStage` adapter: the built-in stage
/// families are all of this shape.
public protocol EnvelopeStage: PipelineStage {
    func apply(_ envelope: inout Envelope) throws(StageFailure)
}

extension EnvelopeStage {
    /// Applies the stage to each undecided envelope in place. Inlinable, so a
    /// conforming stage gets a specialized loop calling its `apply` directly.
    @inlinable public func process(_ batch: inout [Envelope]) async throws {
        batch.withUnsafeMutableBufferPointer { envelopes in
            for i in envelopes.indices {
                guard case .none = envelopes[i].outcome else { continue }
                do throws(StageFailure) {
                    try apply(&envelopes[i])
                } catch {
                    envelopes[i].outcome = .dropped(OutcomeReason(error.code, error.reason))
                }
            }
        }
    }
}

/// The localize stage.
public struct LocalizeStage<L: Localizer>: EnvelopeStage, ConcurrentStage {
    public let localizer: L
    public init(_ localizer: L) { self.localizer = localizer }
    @inlinable public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        try localizer.localize(&envelope.request)
    }
}

/// The payload build stage.
public struct BuildPayloadStage<B: PayloadBuilder>: EnvelopeStage, ConcurrentStage {
    public let builder: B
    public init(_ builder: B) { self.builder = builder }
    @inlinable public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        envelope.payload = try builder.build(&envelope.request)
    }
}

/// The size guard stage.
public struct SizeGuardStage<G: SizeGuard>: EnvelopeStage, ConcurrentStage {
    public let guardPolicy: G
    public init(_ guardPolicy: G) { self.guardPolicy = guardPolicy }
    @inlinable public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        try guardPolicy.enforce(&envelope)
    }
}

/// The frame stage.
public struct FrameStage<F: Framer>: EnvelopeStage, ConcurrentStage {
    public let framer: F
    public init(_ framer: F) { self.framer = framer }
    @inlinable public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        try framer.frame(into: &envelope)
    }
}
