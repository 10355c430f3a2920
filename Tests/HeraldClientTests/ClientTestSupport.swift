import HeraldClient
import HeraldCore
import HeraldKit
import Synchronization

/// A transport that holds every notification until the test lets it go:
/// what is held, and when, is the test's to decide.
final class GateTransport: Transport {
    struct State {
        var held: [Envelope] = []
        var open = false
        var ledger: OutcomeLedger?
    }
    let state = Mutex(State())

    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let pass = state.withLock { s -> Bool in
            s.ledger = outcomes
            if s.open { return true }
            s.held += batch
            return false
        }
        if pass { outcomes.record(batch, as: .accepted) }
    }

    func finish(outcomes: OutcomeLedger) async { release() }

    /// Notifications held now.
    var heldCount: Int { state.withLock { $0.held.count } }

    /// Accepts everything held, and from now on everything at once.
    func release() {
        let (held, ledger) = state.withLock { s in
            s.open = true
            defer { s.held.removeAll() }
            return (s.held, s.ledger)
        }
        if let ledger, !held.isEmpty { ledger.record(held, as: .accepted) }
    }
}

func token(_ i: Int) -> DeviceToken {
    DeviceToken(bytes: [0xC1, UInt8(truncatingIfNeeded: i >> 16), UInt8(truncatingIfNeeded: i >> 8), UInt8(truncatingIfNeeded: i)] + [UInt8](repeating: 3, count: 28))
}

func alert(_ i: Int, topic: String? = "com.example.app") -> NotificationRequest {
    var aps = APS()
    aps.alert = Alert(body: "n\(i)")
    return NotificationRequest(token: token(i), aps: aps, id: UInt32(i), topic: topic)
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(_ seconds: Double = 60, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
