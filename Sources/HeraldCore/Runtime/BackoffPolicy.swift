/// Reconnection delays: exponential, capped, with jitter (a random delay in
/// the upper half of the exponential bound), so many providers restarting at
/// once do not reconnect in lockstep and one provider never loops rapidly.
public struct BackoffPolicy: Sendable, Hashable {
    /// The bound after the first failure.
    public var initial: Duration = .milliseconds(100)
    /// The largest bound.
    public var maximum: Duration = .seconds(30)
    /// How much the bound grows per consecutive failure.
    public var multiplier: Double = 2

    public init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(30), multiplier: Double = 2) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
    }

    /// The upper bound of the delay after `failures` consecutive failures (1 = the first).
    public func bound(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        var base = initial.inSeconds
        for _ in 1..<min(failures, 64) where base < maximum.inSeconds { base *= multiplier }
        return .seconds(min(base, maximum.inSeconds))
    }

    /// A delay drawn uniformly from `[bound/2, bound]`: jittered, never near zero after a failure.
    public func delay<G: RandomNumberGenerator>(afterFailures failures: Int, using g: inout G) -> Duration {
        let b = bound(afterFailures: failures).inSeconds
        guard b > 0 else { return .zero }
        return .seconds(Double.random(in: (b / 2)...b, using: &g))
    }
}
