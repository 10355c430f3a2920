import HeraldCore

/// How one `send` ended, typed: what the outcome line of `herald send` says,
/// as values a program can switch on.
public struct SendOutcome: Sendable, Hashable, CustomStringConvertible {
    /// The ledger's record of it (its sequence number in the client's pipeline, token, identifiers).
    public let record: OutcomeRecord

    public init(_ record: OutcomeRecord) { self.record = record }

    /// `accepted`, `rejected`, `dropped`, `suppressed` or `failed`, with its status or reason.
    public var outcome: Outcome { record.outcome }
    public var kind: Outcome.Kind { record.outcome.kind }
    /// APNs took it.
    public var isAccepted: Bool { kind == .accepted }
    /// The status APNs refused it with (`rejected`): `.badDeviceToken`, `.unregistered` (410)…
    public var status: Status? {
        if case .rejected(let s) = record.outcome { return s }
        return nil
    }
    /// Why it was refused, dropped or failed, in words.
    public var reason: String? {
        switch record.outcome {
        case .rejected(let s): return s.description
        case .dropped(let r), .failed(let r), .cancelled(let r): return r.message
        case .accepted, .suppressed: return nil
        }
    }
    /// The code a program acts on for `dropped` and `failed` (`.gatewayUnreachable`, `.abandoned`…).
    public var reasonCode: OutcomeReason.Code? {
        switch record.outcome {
        case .dropped(let r), .failed(let r), .cancelled(let r): return r.code
        default: return nil
        }
    }
    /// APNs says the token will not work again: forget the device. (410
    /// `Unregistered` or `ExpiredToken`, 400 `BadDeviceToken`, the binary
    /// interface's status 8, or `suppressed`: Herald already knew it dead.)
    public var isTokenDead: Bool {
        switch record.outcome {
        case .suppressed: return true
        case .rejected(let s):
            if let reason = s.reason { return s.rawValue == 410 || (s.rawValue == 400 && reason == "BadDeviceToken") }
            return s == .invalidToken
        default: return false
        }
    }
    /// Sent more than once (an earlier send's answer was lost): the device may
    /// have received it twice. Only such notifications may be duplicates.
    public var possibleDuplicate: Bool { record.possibleDuplicate }
    /// HTTP/2: the `apns-id` APNs answered with.
    public var apnsID: String? { record.apnsID }
    /// HTTP/2, a 410: since when the token is dead (milliseconds since 1970).
    public var unregisteredAt: Int64? { record.apnsUnregisteredAt }

    public var description: String { record.outcome.description }
}

/// Why `send` did not take a notification: nothing of it entered the pipeline.
public enum HeraldClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The client is shutting down (or has stopped): no new notifications.
    case shutDown
    /// `run()` was called a second time.
    case alreadyRunning
    /// Scheduled sends (`send-at` to come) would be more than the client holds (`capacity`): send
    /// it later, or cancel some. Nothing of the batch was taken.
    case scheduleFull(capacity: Int)

    public var description: String {
        switch self {
        case .shutDown: return "the Herald client is shutting down: no new notifications are taken"
        case .alreadyRunning: return "the Herald client is already running: run() is called once"
        case .scheduleFull(let capacity):
            return "the Herald client holds \(capacity) scheduled sends already (send-at still to come): nothing of this batch was taken"
        }
    }
}
