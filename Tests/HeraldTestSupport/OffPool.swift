import Foundation

/// Runs blocking work (a child process and its output, a `waitpid`, a server's
/// first line) on a thread of its own instead of a thread of Swift
/// concurrency's cooperative pool. That pool has one thread per core: on a
/// 2-core machine two tests blocked in such waits would stall every other
/// test of the parallel run, whose timers and answers then come late.
public func offPool<T>(_ body: @escaping @Sendable () throws -> sending T) async throws -> sending T {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            do {
                let value = try body()
                c.resume(returning: value)
            } catch {
                c.resume(throwing: error)
            }
        }
        thread.start()
    }
}

/// `Result { … }` for a body that awaits: its value or the error it threw.
public func catching<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
