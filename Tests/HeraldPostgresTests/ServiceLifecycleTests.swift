import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import HeraldPostgres

/// A service that starts an outcome writer as `herald serve`'s pipeline does
/// (``PostgresIntake/pipelineStarting()``), and, once shut down gracefully,
/// goes on draining: the outcomes it observes after the signal must still be
/// written. (A task inherits its creator's graceful shutdown: a writer that
/// stopped on it left a drained run's outcomes unwritten and its rows leased,
/// to be sent again after the lease: one CI-like run in two of IdempotencyQueueTests.)
final class DrainingService: Service, Sendable {
    let writer: QueueOutcomeWriter
    let held: [PostgresQueue.Claimed]
    let report = Mutex<QueueOutcomeWriter.Report?>(nil)
    let signalled = Latch()

    init(writer: QueueOutcomeWriter, held: [PostgresQueue.Claimed]) {
        self.writer = writer
        self.held = held
    }

    func run() async throws {
        writer.start()
        await withGracefulShutdownHandler {
            await signalled.wait()
        } onGracefulShutdown: {
            self.signalled.open()
        }
        // The drain after the signal: outcomes decided now.
        try await Task.sleep(for: .milliseconds(200))
        writer.observe(held.indices.map { OutcomeRecord(sequence: UInt64($0), line: nil, id: nil, token: nil, outcome: .accepted) })
        let r = await writer.finish()
        report.withLock { $0 = r }
    }
}

@Suite("The queue's services and a graceful shutdown", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct ServiceLifecycleTests {
    @Test("a writer started by a service goes on after that service's graceful shutdown, until finish(): every outcome observed after the signal is written, no lease left")
    func writerOutlastsItsStartersShutdown() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db))
        let group = ServiceGroup(configuration: .init(services: [.init(service: queue)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        try await queue.migrate()
        #expect(try await queue.enqueue(requestLines(50).lines) == 50)
        let held = try await claimSoon(queue, limit: 50)
        let book = LeaseBook()
        book.claim(held)
        book.hold(held, from: 0)
        let draining = DrainingService(writer: QueueOutcomeWriter(queue: queue, book: book), held: held)
        let inner = ServiceGroup(configuration: .init(services: [.init(service: draining)], logger: Logger(label: "test")))
        let innerRun = Task { try await inner.run() }
        try await Task.sleep(for: .milliseconds(100))
        await inner.triggerGracefulShutdown()
        try await innerRun.value
        let report = try #require(draining.report.withLock { $0 })
        #expect(report.written == 50 && report.notWritten == 0, "\(report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 50])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases WHERE owner <> ''") == "0")
        // The queue in its group: a graceful shutdown stops it.
        await group.triggerGracefulShutdown()
        try await running.value
    }
}
