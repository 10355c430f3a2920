#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import ServiceLifecycle
import UnixSignals

/// How every long-running `herald` command runs: its services in one
/// swift-service-lifecycle `ServiceGroup`, started in order and stopped in
/// reverse, `main` last; when `main` returns the group shuts down gracefully.
/// Signals one way for all: the first SIGTERM or SIGINT shuts the group down
/// gracefully (`main` drains first, then each service before it); a second
/// calls `abandon` (what is not sent ends `failed`, code `abandoned`); a
/// third exits at once (status 130).
package enum SignalledServiceGroup {
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
        let watcher = Task {
            var seen = 0
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
