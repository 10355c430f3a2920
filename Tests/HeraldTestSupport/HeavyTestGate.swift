/// Runs the heaviest tests (full-speed runs of tens of thousands of requests
/// over TLS) one at a time: on two cores, two of them at once with the rest of
/// the parallel suite starve the timing-sensitive tests.
public actor HeavyTestGate {
    public static let shared = HeavyTestGate()
    var busy = false
    var waiters: [CheckedContinuation<Void, Never>] = []

    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { waiters.append($0) }
        }
        busy = true
        defer {
            if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
        }
        return try await body()
    }
}
