import Synchronization

/// No answer came in time.
struct NoAnswer: Error, CustomStringConvertible {
    let timeout: Duration
    var description: String { "no answer from the server in \(timeout) (given up; retried as after a lost connection)" }
}

/// `body`'s result, or ``NoAnswer`` once `timeout` has passed without one: `body`
/// then runs on in a task of its own, cancelled, and its result is dropped.
/// Cancelling the caller cancels `body` and returns at once (`CancellationError`),
/// whether or not `body` heeds it. With `meanwhile`, its `check` runs once `after` has
/// passed with no answer yet (on the timer's task: no task more per call), cancelled when
/// the answer comes.
func answered<T: Sendable>(
    within timeout: Duration, meanwhile: (after: Duration, check: @Sendable () async -> Void)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = AnswerRace<T>()
    let deadline = ContinuousClock.now + timeout
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.waiting.withLock { $0 = continuation }
            // Cancelled before the handler could see a caller to resume.
            if Task.isCancelled {
                race.waiting.withLock { $0.take() }?.resume(throwing: CancellationError())
                return
            }
            let timer = Task {
                if let meanwhile, meanwhile.after < timeout {
                    guard (try? await Task.sleep(for: meanwhile.after)) != nil else { return }
                    await meanwhile.check()
                }
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil, let c = race.waiting.withLock({ $0.take() }) else { return }
                race.tasks.withLock { $0.work }?.cancel()
                c.resume(throwing: NoAnswer(timeout: timeout))
            }
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                guard let c = race.waiting.withLock({ $0.take() }) else { return }
                race.tasks.withLock { $0.timer }?.cancel()
                c.resume(with: result)
            }
            race.tasks.withLock { $0 = (work, timer) }
        }
    } onCancel: {
        let (work, timer) = race.tasks.withLock { $0 }
        work?.cancel()
        timer?.cancel()
        race.waiting.withLock { $0.take() }?.resume(throwing: CancellationError())
    }
}

/// The caller waiting in ``answered(within:_:)``, resumed once by whichever ends first, and the two tasks.
final class AnswerRace<T: Sendable>: Sendable {
    let waiting = Mutex<CheckedContinuation<T, any Error>?>(nil)
    let tasks = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
}
