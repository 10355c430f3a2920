import HeraldClient
import HeraldCore
import HeraldKit
import Synchronization

/// A transport that holds every notification (with `passFast`, every
/// bulk-lane one; the fast lane's are accepted at once) until the test lets it
/// go: what is held, and when, is the test's to decide.
final class GateTransport: Transport {
    struct State {
        var held: [Envelope] = []
        var open = false
        var ledger: OutcomeLedger?
        var most = 0
    }
    let state = Mutex(State())
    let passFast: Bool

    init(passFast: Bool = false) { self.passFast = passFast }

    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let pass = state.withLock { s -> [Envelope] in
            s.ledger = outcomes
            if s.open { return batch }
            var pass: [Envelope] = []
            for e in batch {
                if passFast && e.request.effectiveLane == .fast { pass.append(e) } else { s.held.append(e) }
            }
            s.most = max(s.most, s.held.count)
            return pass
        }
        if !pass.isEmpty { outcomes.record(pass, as: .accepted) }
    }

    /// The most held at once.
    var mostHeld: Int { state.withLock { $0.most } }

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

/// Polls `condition` until it holds or `seconds` pass. The default is long:
/// in the parallel run's first minute the cooperative pool is shared by every
/// suite starting at once, and a pipeline here once needed more than 60 s to
/// take 10 notifications (a passing test returns as soon as it holds).
func eventually(_ seconds: Double = 300, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
