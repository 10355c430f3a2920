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

    public init(
        seed: UInt64 = 0, closeAfter: [Int] = [], closeProbability: Double = 0, shutdownAfter: [Int] = [],
        responseDelayWrites: Int = 0, partialWriteProbability: Double = 0, readDelayProbability: Double = 0,
        readDelay: Duration = .milliseconds(1)
    ) {
        self.seed = seed
        self.closeAfter = closeAfter
        self.closeProbability = closeProbability
        self.shutdownAfter = shutdownAfter
        self.responseDelayWrites = responseDelayWrites
        self.partialWriteProbability = partialWriteProbability
        self.readDelayProbability = readDelayProbability
        self.readDelay = readDelay
    }

    /// Whether any fault is configured.
    public var isEmpty: Bool {
        closeAfter.isEmpty && closeProbability == 0 && shutdownAfter.isEmpty && responseDelayWrites == 0
            && partialWriteProbability == 0 && readDelayProbability == 0
    }
}

/// SplitMix64: a small, fast, seedable generator; the same seed gives the same sequence everywhere.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A uniform double in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }
    /// True with probability `p`; draws nothing when `p` is 0, so disabled faults do not shift the sequence.
    public mutating func chance(_ p: Double) -> Bool { p > 0 && unit() < p }
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
