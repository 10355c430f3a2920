/// How a request ended. Every request that enters a pipeline ends in exactly one.
public enum Outcome: Sendable, Hashable, CustomStringConvertible {
    /// APNs took the notification (on the binary interface: no error came back for it).
    case accepted
    /// APNs refused it with a status code.
    case rejected(Status)
    /// Herald did not send it: invalid input, over size, a bad template…
    case dropped(String)
    /// The token is known to be unregistered; nothing was sent.
    case suppressed
    /// Herald gave up on it (retries exhausted, shutdown deadline, transport error).
    case failed(String)

    /// The outcome's kind as used in the JSON Lines output.
    public var kind: Kind {
        switch self {
        case .accepted: return .accepted
        case .rejected: return .rejected
        case .dropped: return .dropped
        case .suppressed: return .suppressed
        case .failed: return .failed
        }
    }

    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case accepted, rejected, dropped, suppressed, failed
    }

    public var description: String {
        switch self {
        case .accepted: return "accepted"
        case .rejected(let s): return "rejected(\(s.rawValue): \(s))"
        case .dropped(let r): return "dropped(\(r))"
        case .suppressed: return "suppressed"
        case .failed(let r): return "failed(\(r))"
        }
    }
}

/// An APNs status code (the binary interface's error-response statuses).
/// Unknown codes are kept as their number.
public struct Status: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let noErrors = Status(rawValue: 0)
    public static let processingError = Status(rawValue: 1)
    public static let missingDeviceToken = Status(rawValue: 2)
    public static let missingTopic = Status(rawValue: 3)
    public static let missingPayload = Status(rawValue: 4)
    public static let invalidTokenSize = Status(rawValue: 5)
    public static let invalidTopicSize = Status(rawValue: 6)
    public static let invalidPayloadSize = Status(rawValue: 7)
    public static let invalidToken = Status(rawValue: 8)
    public static let shutdown = Status(rawValue: 10)
    public static let unknown = Status(rawValue: 255)

    public var description: String {
        switch rawValue {
        case 0: return "no errors encountered"
        case 1: return "processing error"
        case 2: return "missing device token"
        case 3: return "missing topic"
        case 4: return "missing payload"
        case 5: return "invalid token size"
        case 6: return "invalid topic size"
        case 7: return "invalid payload size"
        case 8: return "invalid token"
        case 10: return "shutdown"
        case 255: return "none (unknown)"
        default: return "unknown status \(rawValue)"
        }
    }
}
