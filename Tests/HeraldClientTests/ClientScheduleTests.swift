import Foundation
import HeraldClient
import HeraldCore
import HeraldKit
import Synchronization
import Testing

/// Accepts everything at once and notes when each notification (by id) reached it, in epoch milliseconds.
final class StampTransport: Transport {
    let stamps = Mutex<[UInt32: Int64]>([:])
    var sent: [UInt32: Int64] { stamps.withLock { $0 } }

    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        stamps.withLock { s in for e in batch { if let id = e.request.id { s[id] = now } } }
        outcomes.record(batch, as: .accepted)
    }

    func finish(outcomes: OutcomeLedger) async {}
}

@Suite("HeraldClient: scheduled sends, held until their time and cancelled before it")
struct ClientScheduleTests {
    static func at(_ i: Int, _ sendAt: Int64) -> NotificationRequest {
        var r = alert(i)
        r.sendAt = sendAt
        return r
    }

    @Test("schedule returns at once; one 300 ms ahead goes at its time, not before; one an hour ahead cancelled (outcome cancelled, never sent; cancelling again says no); a send-at already past goes now; the books balance")
    func scheduleAndCancel() async throws {
        let transport = StampTransport()
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: transport)
        let runner = Task { try await client.run() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let soon = try await client.schedule(Self.at(1, now + 300))
        let later = try await client.schedule(Self.at(2, now + 3_600_000))
        let past = try await client.schedule(Self.at(3, now - 1000))
        #expect(soon.sendAt == now + 300 && soon.sequence != later.sequence)

        #expect(later.cancel())
        let cancelled = try await later.outcome()
        #expect(cancelled.kind == .cancelled && cancelled.reasonCode == .cancelled, "\(cancelled)")
        #expect(!later.cancel())
        #expect(try await past.outcome().isAccepted)
        let first = try await soon.outcome()
        #expect(first.isAccepted)
        // Asked again: the same outcome, at once.
        #expect(try await soon.outcome() == first)

        let sent = transport.sent
        #expect(sent[2] == nil, "the cancelled notification was sent")
        #expect(sent.count == 2)
        if let went = sent[1] { #expect(went >= now + 300, "sent \(now + 300 - went) ms early") } else { Issue.record("the scheduled send never went") }
        client.shutdown()
        try await runner.value
        let books = client.ledger.snapshot
        #expect(books.isBalanced && books.cancelled == 1 && books.accepted == 2, "\(books)")
    }

    @Test("an awaiting task cancelled gets CancellationError; the notification is not cancelled and still ends once; shutting down ends what is still held, failed")
    func awaitingCancelledAndShutdown() async throws {
        let client = try HeraldClient(assembly: HeraldAssembly(), transport: StampTransport())
        let runner = Task { try await client.run() }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let held = try await client.schedule(Self.at(1, now + 3_600_000))
        let waiting = Task { try await held.outcome() }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        client.shutdown()
        try await runner.value
        #expect(try await held.outcome().kind == .failed)
        let books = client.ledger.snapshot
        #expect(books.isBalanced && books.failed == 1, "\(books)")
        await #expect(throws: HeraldClientError.shutDown) { try await client.schedule(Self.at(2, now)) }
    }
}
