#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HeraldCore
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// How every long-running `herald` command runs: its services in one
/// swift-service-lifecycle `ServiceGroup`, started in order and stopped in
/// reverse, `main` last; when `main` returns the group shuts down gracefully.
/// Signals one way for all: the first SIGTERM or SIGINT shuts the group down
/// gracefully (`main` drains first, then each service before it); a second
/// calls `abandon` (what is not sent ends `failed`, code `abandoned`); a
/// third exits at once (status 130).
package enum SignalledServiceGroup {
    /// Signals that came after ``trapSignalsEarly()`` and before the group ran, and what counts them.
    static let earlySignals = Atomic<Int>(0)
    static let earlyWatch = Mutex<Task<Void, Never>?>(nil)

    /// Called first by a long-running command (`herald work`, `herald serve`): a SIGTERM or SIGINT
    /// from then until its group runs (while it connects, migrates, loads) is kept, and shuts the
    /// group down as soon as it starts, rather than ending the process on the spot with no summary
    /// (status 143: a worker restarted and stopped again at once, `CrashMatrixTests.workersKilled`).
    /// A second signal before then ends the process at once (status 130), as a set-up can wait
    /// (a server that does not answer: `connectTimeout`).
    package static func trapSignalsEarly() async {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        earlyWatch.withLock { watch in
            watch = Task {
                for await _ in signals {
                    if earlySignals.add(1, ordering: .relaxed).newValue == 1 {
                        writeToStandardError("herald: stopping as soon as it has started (signal again to stop now)\n")
                    } else {
                        exit(130)
                    }
                }
            }
        }
    }

    package static func run(
        _ services: [any Service], main: any Service, logger: Logger,
        onFirstSignal: @escaping @Sendable () -> Void = {}, abandon: @escaping @Sendable () -> Void
    ) async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) } + [.init(service: main, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        // The group shuts down gracefully on the first signal; this counts them for the second and third.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        // A signal taken before the group ran (a second one then had ended the process) counts as its first.
        earlyWatch.withLock { $0?.cancel() }
        let early = earlySignals.exchange(0, ordering: .relaxed)
        if early > 0 {
            await group.triggerGracefulShutdown()
            onFirstSignal()
        }
        let watcher = Task {
            var seen = early
            for await _ in signals {
                seen += 1
                switch seen {
                case 1: onFirstSignal()
                case 2: abandon()
                default: exit(130)
                }
            }
        }
        defer { watcher.cancel() }
        try await group.run()
    }
}

/// A command's one-off work as the main service of its group: cancelled by a
/// graceful shutdown (the first signal), its error ends the group.
package struct CommandJob: Service {
    let body: @Sendable () async throws -> Void
    package init(_ body: @escaping @Sendable () async throws -> Void) { self.body = body }
    package func run() async throws { try await cancelWhenGracefulShutdown(body) }
}
