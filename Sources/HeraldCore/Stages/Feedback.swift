import Synchronization

/// A device token APNs reported as no longer valid for the app, and since when.
public struct FeedbackEntry: Sendable, Hashable {
    public var token: DeviceToken
    /// UNIX seconds when APNs found the app gone.
    public var timestamp: UInt32
    public init(token: DeviceToken, timestamp: UInt32) {
        self.token = token
        self.timestamp = timestamp
    }
}

/// A feedback fetch that went wrong part-way (a torn stream, a tuple that
/// cannot be a device token): `entries` holds the complete, valid tuples
/// before the problem. The binary feedback service forgets what it has sent,
/// so the caller should keep them.
public struct FeedbackIncomplete: Error, Sendable, CustomStringConvertible {
    public let entries: [FeedbackEntry]
    public let reason: String
    public init(entries: [FeedbackEntry], reason: String) {
        self.entries = entries
        self.reason = reason
    }
    public var description: String { "\(reason) (\(entries.count) complete tuples before it were kept)" }
}

/// Something that tells which tokens are dead: the feedback service, HTTP 410s.
public protocol FeedbackSource: Sendable {
    /// Fetches the current list (the binary feedback service empties it on read).
    func fetchFeedback() async throws -> [FeedbackEntry]
}

extension Status {
    /// Whether the answer says the token is dead: the binary interface's status 8
    /// (invalid token) or HTTP/2's 410 with a reason (`Unregistered`, `ExpiredToken`…).
    public var meansDeadToken: Bool { self == .invalidToken || (reason != nil && rawValue == 410) }
}

/// The suppression stage: requests to dead tokens end as `suppressed`.
public struct SuppressionStage: EnvelopeStage, ConcurrentStage {
    public let store: any TokenStore
    public init(store: any TokenStore) { self.store = store }
    public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        if store.isSuppressed(envelope.request.token, topic: envelope.request.topic) { envelope.outcome = .suppressed }
    }
}

/// Closes the feedback loop: `rejected(invalid token)` outcomes (the binary
/// interface's status 8) and HTTP/2's 410 answers mark the token dead in the
/// store, so later requests to it are suppressed. A 410 carries the time APNs
/// says the token died, so a registration after it still wins.
public struct TokenStoreFeedbackObserver: OutcomeObserver {
    public let store: any TokenStore
    public let clock: @Sendable () -> UInt32
    public init(store: any TokenStore, clock: @escaping @Sendable () -> UInt32) {
        self.store = store
        self.clock = clock
    }
    public func observe(_ records: [OutcomeRecord]) {
        for r in records {
            guard case .rejected(let s) = r.outcome, s.meansDeadToken, let t = r.token else { continue }
            if s == .invalidToken {
                store.unregistered(t, topic: nil, at: clock(), source: .invalidToken)
            } else {
                store.unregistered(t, topic: r.topic, at: r.apnsUnregisteredAt.map { UInt32(clamping: $0 / 1000) } ?? clock(), source: .gone)
            }
        }
    }
}
