/// How a request ended. Every request that enters a pipeline ends in exactly one.
public enum Outcome: Sendable, Hashable, CustomStringConvertible {
    /// APNs took the notification (on the binary interface: no error came back for it).
    case accepted
    /// APNs refused it with a status code.
    case rejected(Status)
    /// Herald did not send it: invalid input, over size, a bad template…
    case dropped(OutcomeReason)
    /// The token is known to be unregistered; nothing was sent.
    case suppressed
    /// Herald gave up on it (retries exhausted, shutdown deadline, transport error).
    case failed(OutcomeReason)
    /// Cancelled before it was sent (a scheduled send, `DELETE /v1/notifications/{id}`).
    case cancelled(OutcomeReason)

    /// The outcome's kind as used in the JSON Lines output.
    public var kind: Kind {
        switch self {
        case .accepted: return .accepted
        case .rejected: return .rejected
        case .dropped: return .dropped
        case .suppressed: return .suppressed
        case .failed: return .failed
        case .cancelled: return .cancelled
        }
    }

    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case accepted, rejected, dropped, suppressed, failed, cancelled
    }

    public var description: String {
        switch self {
        case .accepted: return "accepted"
        case .rejected(let s): return "rejected(\(s.rawValue): \(s))"
        case .dropped(let r): return "dropped(\(r))"
        case .suppressed: return "suppressed"
        case .failed(let r): return "failed(\(r))"
        case .cancelled(let r): return "cancelled(\(r))"
        }
    }
}

/// Why a request was dropped or failed: a ``Code`` a program can act on, and
/// a message a person can read. A string literal or interpolation makes one
/// with ``Code/unspecified``.
///
/// ```swift
/// .failed(OutcomeReason(.gatewayUnreachable, "the gateway … could not be reached for 300 s"))
/// if case .failed(let why) = outcome, why.code == .gatewayUnreachable { retryLater() }
/// ```
public struct OutcomeReason: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// A kind of reason. Open, like ``Status``: codes added later are values, not crashes.
    public struct Code: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
        public let name: String
        public init(_ name: String) { self.name = name }
        public init(stringLiteral value: String) { name = value }
        public var description: String { name }

        /// No code was given.
        public static let unspecified: Code = "unspecified"
        /// The request itself is wrong: malformed line, bad JSON, a bad key or value.
        public static let invalidRequest: Code = "invalid-request"
        /// The payload is over the size limit.
        public static let payloadTooLarge: Code = "payload-too-large"
        /// The gateway closed on it alone, again and again, while answering for others.
        public static let closedWithoutAnswer: Code = "closed-without-answer"
        /// The gateway could not be reached, or ended every connection with no answer, for too long.
        public static let gatewayUnreachable: Code = "gateway-unreachable"
        /// TLS refused the gateway or our certificate: retrying cannot help.
        public static let tlsRefused: Code = "tls-refused"
        /// Shutdown came before the gateway confirmed it.
        public static let shutdownDeadline: Code = "shutdown-deadline"
        /// Given up at once (a second signal).
        public static let abandoned: Code = "abandoned"
        /// A stage or transport failed on its batch.
        public static let internalFailure: Code = "internal-failure"
        /// APNs refused the credential (certificate or provider token): nothing more can be sent with it.
        public static let credentialRejected: Code = "credential-rejected"
        /// The request names an app the configuration's `apps` section does not have, or its
        /// topic belongs to none of them.
        public static let unknownApp: Code = "unknown-app"
        /// Its `expiry` passed while it waited for its `send-at`: APNs would not have delivered it.
        public static let expired: Code = "expired"
        /// Cancelled before it was sent (`DELETE /v1/notifications/{id}`, ``HeraldClient``'s cancel).
        public static let cancelled: Code = "cancelled"
        /// Replaced, while it waited for its device token's pace, by a newer notification to the same
        /// token with the same `collapse-id` (pacing with `collapse`).
        public static let collapsed: Code = "collapsed"
        /// More scheduled sends wait than the service holds in memory.
        public static let scheduleFull: Code = "schedule-full"
        /// APNs kept answering "try again" (429, 500, 503) until the attempts ran out.
        public static let apnsUnavailable: Code = "apns-unavailable"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public init(stringLiteral value: String) { self.init(.unspecified, value) }
    public init(stringInterpolation: DefaultStringInterpolation) { self.init(.unspecified, String(stringInterpolation: stringInterpolation)) }

    public var description: String { message }
}

/// Why APNs refused a notification: a binary-interface error-response status
/// (0–255), or an HTTP/2 answer's HTTP status and `reason` (`400
/// BadDeviceToken`). Unknown codes are kept as their number.
public struct Status: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    /// HTTP/2 only: APNs' reason string.
    public let reason: String?
    /// A binary-interface status.
    public init(rawValue: UInt8) {
        self.rawValue = Int(rawValue)
        reason = nil
    }
    /// An HTTP/2 answer.
    public init(http status: Int, reason: String?) {
        rawValue = status
        self.reason = reason
    }
    /// The binary interface's byte (only meaningful for binary statuses).
    public var byte: UInt8 { UInt8(truncatingIfNeeded: rawValue) }

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
        if let reason { return reason }
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
