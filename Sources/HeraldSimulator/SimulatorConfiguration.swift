import HeraldCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the simulator behaves: its limits, its policy for tokens it has never
/// seen, and the faults it injects.
public struct SimulatorConfiguration: Sendable {
    /// The payload limit in bytes: a larger payload is status 7.
    public var payloadLimit: Int = 2048
    /// What to do with a token the registry does not know.
    public var unknownTokens: UnknownTokenPolicy = .deliver
    /// Whether to record every accepted notification (``APNsSimulator/deliveries``)
    /// and the devices' inboxes. Off, only counters are kept (for benchmarks).
    public var recordsDeliveries = true
    /// Faults to inject.
    public var faults = FaultPlan()

    public init(payloadLimit: Int = 2048, unknownTokens: UnknownTokenPolicy = .deliver, recordsDeliveries: Bool = true, faults: FaultPlan = FaultPlan()) {
        self.payloadLimit = payloadLimit
        self.unknownTokens = unknownTokens
        self.recordsDeliveries = recordsDeliveries
        self.faults = faults
    }
}

/// What the simulator does with a token its registry does not know.
public struct UnknownTokenPolicy: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    /// Treat it as an installed app on an online device (the embedded default of `herald send`).
    public static let deliver = UnknownTokenPolicy(name: "deliver")
    /// Answer status 8, invalid token (a strict gateway that knows every device).
    public static let invalid = UnknownTokenPolicy(name: "invalid")
    public var description: String { name }
}

/// Faults the simulator injects, all driven by one seeded generator so a run
/// can be reproduced exactly (same seed, same writes → same faults).
///
/// Counts are over the simulator's lifetime, across connections, so a fault
/// fires once and the provider can make progress after reconnecting.
public struct FaultPlan: Sendable, Hashable {
    /// Seed of the generator behind every random fault.
    public var seed: UInt64 = 0
    /// Close the connection abruptly, with no error response, right after the
    /// Nth accepted notification, for each N listed. Later bytes on that
    /// connection are discarded.
    public var closeAfter: [Int] = []
    /// After each accepted notification, close abruptly with this probability.
    public var closeProbability: Double = 0
    /// Shut down (status 10, naming the last notification accepted on the
    /// connection) right after the Nth accepted notification, for each N listed.
    public var shutdownAfter: [Int] = []
    /// Hold each error response and close back for this many further writes
    /// from the provider (which it writes, unknowing, and which are discarded):
    /// the provider reads the error late, as on a real network.
    public var responseDelayWrites: Int = 0
    /// With this probability a write is only partly read: the reply's
    /// `consumed` covers a random non-empty prefix, and the provider must write the rest again.
    public var partialWriteProbability: Double = 0
    /// With this probability the gateway pauses before reading the next write
    /// (the reply's `readDelay`), as a slow gateway applies backpressure.
    public var readDelayProbability: Double = 0
    /// How long a read pause lasts.
    public var readDelay: Duration = .milliseconds(1)
    /// After each accepted notification, answer status 10 (shutdown) with this probability.
    public var shutdownProbability: Double = 0
    /// With this probability an error response the gateway should write is
    /// lost: the connection closes with no answer (as providers report of APNs).
    public var lostAnswerProbability: Double = 0
    /// With this probability a write is cut inside a frame: the gateway takes
    /// the complete notifications before the cut and closes with no answer.
    public var midFrameCloseProbability: Double = 0
    /// With this probability a new connection stalls: the handshake completes,
    /// then the gateway never reads nor answers.
    public var stallProbability: Double = 0
    /// With this probability a new connection's handshake takes ``handshakeDelay``.
    public var slowHandshakeProbability: Double = 0
    /// How long a slow handshake takes.
    public var handshakeDelay: Duration = .milliseconds(200)
    /// Connection attempts refused (numbered from 1 over the simulator's
    /// lifetime): an outage, and the gateway coming back after it.
    public var refusedConnections: ClosedRange<Int>?

    public init(
        seed: UInt64 = 0, closeAfter: [Int] = [], closeProbability: Double = 0, shutdownAfter: [Int] = [],
        responseDelayWrites: Int = 0, partialWriteProbability: Double = 0, readDelayProbability: Double = 0,
        readDelay: Duration = .milliseconds(1), shutdownProbability: Double = 0, lostAnswerProbability: Double = 0,
        midFrameCloseProbability: Double = 0, stallProbability: Double = 0, slowHandshakeProbability: Double = 0,
        handshakeDelay: Duration = .milliseconds(200)
    ) {
        self.seed = seed
        self.closeAfter = closeAfter
        self.closeProbability = closeProbability
        self.shutdownAfter = shutdownAfter
        self.responseDelayWrites = responseDelayWrites
        self.partialWriteProbability = partialWriteProbability
        self.readDelayProbability = readDelayProbability
        self.readDelay = readDelay
        self.shutdownProbability = shutdownProbability
        self.lostAnswerProbability = lostAnswerProbability
        self.midFrameCloseProbability = midFrameCloseProbability
        self.stallProbability = stallProbability
        self.slowHandshakeProbability = slowHandshakeProbability
        self.handshakeDelay = handshakeDelay
    }

    /// Apple's gateway as providers meet it: a silent close about every 1,000
    /// accepted notifications, status 10 about every 1,500, one answer in 50
    /// lost, a write cut mid-frame now and then, the odd stalled connection
    /// and slow handshake. Error responses are followed by an immediate close.
    public static func appleLike(seed: UInt64) -> FaultPlan {
        FaultPlan(seed: seed, closeProbability: 0.001, shutdownProbability: 1.0 / 1500, lostAnswerProbability: 0.02,
                  midFrameCloseProbability: 0.0005, stallProbability: 0.002, slowHandshakeProbability: 0.01)
    }

    /// Whether any fault is configured.
    public var isEmpty: Bool {
        closeAfter.isEmpty && closeProbability == 0 && shutdownAfter.isEmpty && responseDelayWrites == 0
            && partialWriteProbability == 0 && readDelayProbability == 0 && shutdownProbability == 0
            && lostAnswerProbability == 0 && midFrameCloseProbability == 0 && stallProbability == 0
            && slowHandshakeProbability == 0 && refusedConnections == nil
    }
}

/// A clock tests set by hand: UNIX seconds.
public final class ManualClock: Sendable {
    let seconds: Atomic<UInt32>
    public init(_ now: UInt32 = 1_700_000_000) { seconds = Atomic(now) }
    /// The current time.
    public var now: UInt32 { seconds.load(ordering: .relaxed) }
    /// Sets the time.
    public func set(_ t: UInt32) { seconds.store(t, ordering: .relaxed) }
    /// Moves time forward.
    public func advance(by s: UInt32) { seconds.add(s, ordering: .relaxed) }
    /// The clock as the closure ``APNsSimulator`` takes.
    public var function: @Sendable () -> UInt32 { { [self] in self.now } }
}

/// The system's UNIX time in seconds.
public func systemUnixTime() -> UInt32 {
    UInt32(truncatingIfNeeded: time(nil))
}
