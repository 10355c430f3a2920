#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Duration {
    /// The wall clock: time since 1970 (what provider tokens and APNs' timestamps count).
    package static var sinceEpoch: Duration {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        return .seconds(Int64(wall.tv_sec)) + .nanoseconds(Int64(wall.tv_nsec))
    }

    /// ``sinceEpoch`` in whole milliseconds (what a request's `send-at` counts).
    package static var sinceEpochMilliseconds: Int64 {
        let (s, attos) = sinceEpoch.components
        return s * 1_000 + attos / 1_000_000_000_000_000
    }
}

extension Duration {
    /// ``sinceEpoch`` in nanoseconds (what a span's start and end count).
    package static var sinceEpochNanoseconds: Int64 {
        let (s, attos) = sinceEpoch.components
        return s &* 1_000_000_000 &+ attos / 1_000_000_000
    }
}
