import HeraldBinary
import HeraldCore
import Synchronization

/// An in-memory Apple Push Notification service that speaks the binary
/// interface byte for byte: the test double the tests, the benchmarks and
/// `herald send`'s embedded default rely on (as SwiftNIO ships `NIOEmbedded`).
///
/// - Open gateway connections with ``openConnection(topic:)`` and feed them
///   the bytes a provider writes; each answers as the gateway does (see
///   ``GatewayConnection``). The core is synchronous and transport-agnostic:
///   the in-memory ``SimulatorTransport`` drives it directly, a socket server
///   drives it with what it reads.
/// - A device registry: ``register(_:online:)``, ``uninstall(_:at:)``,
///   ``markInvalid(_:)``, ``setOnline(_:_:)``. Tokens it does not know follow
///   ``SimulatorConfiguration/unknownTokens``.
/// - Store-and-forward: a notification for an offline device is kept (only
///   the last one per app and device) until its expiry, and delivered when
///   the device comes online. Expiry 0 means "do not store".
/// - Feedback: notifications to uninstalled apps are accepted (APNs cannot
///   know at the gateway) and recorded as failed deliveries; their tokens go
///   to the feedback list with the time, served as tuples by
///   ``takeFeedbackTuples()`` and then emptied.
/// - Every accepted notification is recorded, in order: ``deliveries``.
/// - Time comes from an injected clock (UNIX seconds), so tests control expiry and timestamps.
///
/// Thread-safe: one lock guards the shared state; each connection has its own.
public final class APNsSimulator: Sendable {
    public let configuration: SimulatorConfiguration
    let clock: @Sendable () -> UInt32
    let state: Mutex<SimulatorState>

    /// - Parameters:
    ///   - configuration: limits, the unknown-token policy and the faults.
    ///   - clock: UNIX seconds now; ``ManualClock/function`` in tests.
    public init(configuration: SimulatorConfiguration = SimulatorConfiguration(), clock: @escaping @Sendable () -> UInt32 = systemUnixTime) {
        self.configuration = configuration
        self.clock = clock
        self.state = Mutex(SimulatorState(configuration: configuration))
    }

    /// Opens a gateway connection for the app `topic` (the binary interface
    /// does not carry the topic: on the real service it comes from the
    /// provider's certificate).
    public func openConnection(topic: String = "default") -> GatewayConnection {
        let (id, stalled, delay, refused) = state.withLock { s in
            s.counters.connections += 1
            let faults = s.configuration.faults
            let stalled = s.random.chance(faults.stallProbability)
            let slow = s.random.chance(faults.slowHandshakeProbability)
            if stalled { s.counters.stalledConnections += 1 }
            if slow { s.counters.slowHandshakes += 1 }
            let refused = faults.refusedConnections?.contains(s.counters.connections) ?? false
            if refused { s.counters.refusedConnections += 1 }
            return (s.counters.connections, stalled, slow ? faults.handshakeDelay : nil, refused)
        }
        return GatewayConnection(simulator: self, id: id, topic: topic, stalled: stalled, handshakeDelay: delay, refused: refused)
    }

    // MARK: device registry

    /// The app is installed on the device with this token.
    public func register(_ token: DeviceToken, online: Bool = true) {
        state.withLock { $0.devices[token] = online ? .online : .offline }
    }

    /// The app was removed: later notifications are accepted, fail on the device and
    /// put the token on the feedback list.
    public func uninstall(_ token: DeviceToken) {
        state.withLock { $0.devices[token] = .uninstalled }
    }

    /// APNs calls this token invalid: status 8.
    public func markInvalid(_ token: DeviceToken) {
        state.withLock { $0.devices[token] = .invalid }
    }

    /// Brings a registered device online or takes it offline. Coming online,
    /// it receives what was stored for it and has not expired (by the clock
    /// now); expired ones are dropped. Returns what was forwarded.
    @discardableResult
    public func setOnline(_ token: DeviceToken, _ online: Bool) -> [Delivery] {
        let now = clock()
        return state.withLock { s in
            s.devices[token] = online ? .online : .offline
            guard online else { return [] }
            var forwarded: [Delivery] = []
            for key in s.stored.keys where key.token == token {
                var d = s.stored.removeValue(forKey: key)!
                if let e = d.expiry, now > e {
                    s.counters.expired += 1
                    continue
                }
                d.fate = .forwarded
                forwarded.append(d)
            }
            forwarded.sort { $0.sequence < $1.sequence }
            s.counters.forwarded += forwarded.count
            if s.configuration.recordsDeliveries { s.inboxes[token, default: []].append(contentsOf: forwarded) }
            return forwarded
        }
    }

    /// How the registry sees a token now.
    public func deviceState(_ token: DeviceToken) -> DeviceState? {
        state.withLock { $0.devices[token] }
    }

    // MARK: what happened

    /// Every accepted notification, in the order accepted (if ``SimulatorConfiguration/recordsDeliveries``).
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    /// What reached the device: delivered at once, or forwarded when it came online.
    public func inbox(_ token: DeviceToken) -> [Delivery] { state.withLock { $0.inboxes[token] ?? [] } }

    /// The notification held for an offline device and app, if any.
    public func stored(for token: DeviceToken, topic: String = "default") -> Delivery? {
        state.withLock { $0.stored[StoreKey(topic: topic, token: token)] }
    }

    /// Counters: connections, accepted, rejections by status, faults fired…
    public var counters: SimulatorCounters { state.withLock { $0.counters } }

    // MARK: feedback service

    /// The feedback list as the service sends it, then empties it.
    public func takeFeedback() -> [FeedbackEntry] {
        state.withLock { s in
            let out = s.feedback
            s.feedback.removeAll()
            s.feedbackIndex.removeAll()
            return out
        }
    }

    /// The feedback list as the bytes the feedback service writes (tuples
    /// `|timestamp (4)|token length (2)|token|`), then empties it.
    public func takeFeedbackTuples() -> [UInt8] {
        FeedbackTuple.bytes(takeFeedback())
    }

    /// The feedback list without emptying it.
    public var pendingFeedback: [FeedbackEntry] { state.withLock { $0.feedback } }
}

extension APNsSimulator: FeedbackSource {
    /// The feedback service: the list, emptied on read.
    public func fetchFeedback() async throws -> [FeedbackEntry] { takeFeedback() }
}

/// A device's state in the simulator's registry.
public struct DeviceState: Sendable, Hashable, CustomStringConvertible {
    let name: String
    /// Installed, device reachable: notifications are delivered at once.
    public static let online = DeviceState(name: "online")
    /// Installed, device unreachable: the last notification per app is stored until its expiry.
    public static let offline = DeviceState(name: "offline")
    /// The app was removed: notifications are accepted, fail, and feed the feedback list.
    public static let uninstalled = DeviceState(name: "uninstalled")
    /// APNs refuses the token: status 8.
    public static let invalid = DeviceState(name: "invalid")
    public var description: String { name }
}

/// One notification the gateway accepted, as it arrived, and what became of it.
public struct Delivery: Sendable, Hashable {
    /// Order of acceptance over the simulator's lifetime, from 0.
    public var sequence: Int
    public var token: DeviceToken
    public var payload: [UInt8]
    /// The identifier on the wire (`nil` for the simple format).
    public var identifier: UInt32?
    /// The expiry on the wire (`nil` for the simple format).
    public var expiry: UInt32?
    /// The priority in force (10 unless a frame said 5).
    public var priority: UInt8
    public var format: NotificationFormat
    /// The app (the connection's topic).
    public var topic: String
    /// The connection it arrived on.
    public var connection: Int
    /// The clock when it was accepted.
    public var time: UInt32
    public var fate: Fate

    /// What became of an accepted notification.
    public struct Fate: Sendable, Hashable, CustomStringConvertible {
        let name: String
        /// Reached the device at once.
        public static let delivered = Fate(name: "delivered")
        /// The device was offline: stored (replacing any earlier one for the app and device).
        public static let stored = Fate(name: "stored")
        /// Forwarded from storage when the device came online.
        public static let forwarded = Fate(name: "forwarded")
        /// The device was offline and the expiry was 0 or past: not stored.
        public static let notStored = Fate(name: "not stored")
        /// The app was uninstalled: delivery failed, the token went to the feedback list.
        public static let failed = Fate(name: "failed")
        public var description: String { name }
    }
}

/// The simulator's counters.
public struct SimulatorCounters: Sendable, Hashable {
    public var connections = 0
    public var accepted = 0
    /// Rejections by status code (including those of the simple format, which gets no response).
    public var rejected: [UInt8: Int] = [:]
    public var delivered = 0
    public var stored = 0
    /// Stored notifications replaced by a later one for the same app and device.
    public var replaced = 0
    public var forwarded = 0
    public var notStored = 0
    public var expired = 0
    public var failedDeliveries = 0
    /// Bytes written by providers after an error or close, discarded unread.
    public var discardedBytes = 0
    public var injectedCloses = 0
    public var injectedShutdowns = 0
    public var partialWrites = 0
    public var readDelays = 0
    public var lostAnswers = 0
    public var midFrameCloses = 0
    public var stalledConnections = 0
    public var slowHandshakes = 0
    public var refusedConnections = 0
}

struct StoreKey: Hashable, Sendable {
    var topic: String
    var token: DeviceToken
}

struct SimulatorState: Sendable {
    let configuration: SimulatorConfiguration
    var devices: [DeviceToken: DeviceState] = [:]
    var stored: [StoreKey: Delivery] = [:]
    var inboxes: [DeviceToken: [Delivery]] = [:]
    var deliveries: [Delivery] = []
    var feedback: [FeedbackEntry] = []
    var feedbackIndex: [DeviceToken: Int] = [:]
    var counters = SimulatorCounters()
    var random: SeededGenerator
    var closeAfter: Set<Int>
    var shutdownAfter: Set<Int>
    let rejectsUnknownTokens: Bool

    init(configuration: SimulatorConfiguration) {
        self.configuration = configuration
        random = SeededGenerator(seed: configuration.faults.seed)
        closeAfter = Set(configuration.faults.closeAfter)
        shutdownAfter = Set(configuration.faults.shutdownAfter)
        rejectsUnknownTokens = configuration.unknownTokens == .invalid
    }

    /// Adds a token to the feedback list, or moves its timestamp forward.
    mutating func addFeedback(_ token: DeviceToken, at time: UInt32) {
        if let i = feedbackIndex[token] {
            feedback[i].timestamp = max(feedback[i].timestamp, time)
        } else {
            feedbackIndex[token] = feedback.count
            feedback.append(FeedbackEntry(token: token, timestamp: time))
        }
    }
}
