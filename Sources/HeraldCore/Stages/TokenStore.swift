import Synchronization

/// Remembers which tokens must not be sent to.
///
/// Per token and topic (the app's bundle identifier; `nil` for "the app the
/// credential names", as the binary interface's feedback and status 8 say it):
/// the newest registration and unregistration, each with its source. A request
/// is suppressed when the unregistration is not older than the last
/// registration (``SuppressionIndex`` has the rule across topics). Look-ups are
/// synchronous: the suppression stage asks once per request on the hot path.
public protocol TokenStore: Sendable {
    /// The app registered (again) with this token at `time` (UNIX seconds).
    func registered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource)
    /// APNs said the token is dead since `time`; it stays deliverable if it registered later.
    func unregistered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource)
    /// Whether sending to `token` for `topic` should be suppressed.
    func isSuppressed(_ token: DeviceToken, topic: String?) -> Bool
    /// The first change the store could not keep durably (a full disk…), if any:
    /// the change holds in memory for this process only.
    var failure: (any Error)? { get }
}

extension TokenStore {
    public var failure: (any Error)? { nil }
    /// A registration for every topic.
    public func registered(_ token: DeviceToken, at time: UInt32) { registered(token, topic: nil, at: time, source: .registration) }
    /// An unregistration for every topic (the binary interface's feedback).
    public func unregistered(_ token: DeviceToken, at time: UInt32) { unregistered(token, topic: nil, at: time, source: .feedback) }
    /// Whether a request with no topic to `token` should be suppressed.
    public func isSuppressed(_ token: DeviceToken) -> Bool { isSuppressed(token, topic: nil) }
}

/// A token store in memory: the ``SuppressionIndex`` alone, holding every event.
public final class InMemoryTokenStore: TokenStore {
    let index = Mutex(SuppressionIndex())
    /// Whether any token was ever said dead: until one is, nothing is suppressed, and the check
    /// every request makes takes no lock and hashes no token (1.5% of `herald send`'s time on one core).
    let anyDead = Atomic<Bool>(false)

    public init() {}

    public func registered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        index.withLock { $0.update(token, topic: topic, registered: time, dead: nil) }
    }

    public func unregistered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        index.withLock {
            $0.update(token, topic: topic, registered: nil, dead: time)
            // Set under the lock, after the update: a check that sees it takes the lock after this.
            anyDead.store(true, ordering: .releasing)
        }
    }

    public func isSuppressed(_ token: DeviceToken, topic: String?) -> Bool {
        guard anyDead.load(ordering: .acquiring) else { return false }
        return index.withLock { $0.isSuppressed(token, topic: topic) }
    }

    /// (token, topic) pairs currently suppressed.
    public var suppressedCount: Int { index.withLock { $0.suppressedCount } }
}
