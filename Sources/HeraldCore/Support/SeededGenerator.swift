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

extension Duration {
    /// The duration in seconds, as a floating-point number.
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration in whole nanoseconds.
    package var inNanoseconds: Int64 {
        // `components` once: each read divides the 128-bit count of attoseconds (a time an answer).
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
