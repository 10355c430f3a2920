import HeraldJSON

/// APNs' answer to one request: the status, the echoed `apns-id`, the
/// development environment's `apns-unique-id`, and for errors the body's
/// `reason` (and, with 410, the `timestamp` since when the token is dead).
public struct APNsResponse: Sendable, Hashable {
    public var status: Int
    public var apnsID: String?
    public var uniqueID: String?
    public var reason: String?
    /// Milliseconds since 1970 (410 only): the token has been invalid since then.
    public var timestamp: Int64?
    /// Channel management: the `apns-channel-id` of the channel created (or read).
    public var channelID: String?
    /// A successful answer's body (channel management's JSON; empty for pushes).
    public var content: [UInt8] = []

    public init(status: Int, apnsID: String? = nil, uniqueID: String? = nil, reason: String? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.reason = reason
        self.timestamp = timestamp
    }

    /// Reads the answer from its status, headers and body. A body that is not
    /// the documented JSON keeps the status; the reason then says what it was.
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.init(status: status)
        for (name, value) in headers {
            // HTTP/2 sends header names in lowercase: lowered (a new string) only if not.
            switch name.utf8.contains(where: { $0 &- 65 < 26 }) ? name.lowercased() : name {
            // A broadcast, and channel management, answer with `apns-request-id` where pushes have `apns-id`.
            case "apns-id", "apns-request-id": apnsID = value
            case "apns-unique-id": uniqueID = value
            case "apns-channel-id": channelID = value
            default: break
            }
        }
        guard !body.isEmpty else { return }
        if (200..<300).contains(status) {
            content = body
            return
        }
        guard let object = (try? JSONParser.parse(body))?.objectValue else {
            reason = "unreadable error body (\(body.count) bytes, not JSON)"
            return
        }
        reason = object["reason"]?.stringValue
        timestamp = object["timestamp"]?.numberValue?.intValue.map(Int64.init)
    }

    /// The body APNs sends with this answer: `{"reason":…}` (410 adds
    /// `"timestamp"`), or ``content`` (nothing for a push's 200).
    public var body: [UInt8] {
        guard let reason else { return content }
        var w = JSONWriter(capacity: 64)
        w.raw("{\"reason\":")
        w.string(reason)
        if let timestamp {
            w.raw(",\"timestamp\":")
            w.int(Int(timestamp))
        }
        w.raw("}")
        return w.bytes
    }

    /// What Herald does with this answer.
    public var disposition: APNsDisposition { APNsDisposition(status: status, reason: reason) }
}

/// What an answer means for the request and the connection, for every status
/// and reason APNs documents (`docs/http2.md` has the table).
public enum APNsDisposition: Sendable, Hashable {
    /// 200.
    case accepted
    /// A request error or a bad token: the request ends `rejected`, never retried.
    case rejected
    /// 410: the token is dead (since the response's timestamp); `rejected` and into the token store.
    case unregistered
    /// 429 `TooManyRequests`: this device token gets too many; retry it after a delay.
    case retryLater
    /// 500, 503, `Shutdown`, `IdleTimeout`: retry with backoff on another (or a new) connection.
    case retryElsewhere
    /// 403 `ExpiredProviderToken`: sign a new token and resend.
    case refreshToken
    /// 429 `TooManyProviderTokenUpdates`: stop signing for a while, resend later.
    case tooManyTokenUpdates
    /// 403 `UnrelatedKeyIdInToken`: the connection is bound to another key; resend on a new connection.
    case newConnection
    /// 403 credential errors: stop using the credential, fail what is left, say so once.
    case credentialRejected

    public init(status: Int, reason: String?) {
        switch (status, reason ?? "") {
        case (200..<300, _): self = .accepted
        case (_, "ExpiredProviderToken"): self = .refreshToken
        case (_, "TooManyProviderTokenUpdates"): self = .tooManyTokenUpdates
        case (_, "UnrelatedKeyIdInToken"): self = .newConnection
        case (_, "IdleTimeout"), (_, "Shutdown"): self = .retryElsewhere
        case (403, "TopicMismatch"): self = .rejected  // a broadcast to another app's bundle id: that request's fault
        case (410, _): self = .unregistered
        case (429, _): self = .retryLater
        case (403, _): self = .credentialRejected
        case (500..<600, _): self = .retryElsewhere
        default: self = .rejected
        }
    }

    /// Whether the request goes out again.
    public var resends: Bool {
        switch self {
        case .retryLater, .retryElsewhere, .refreshToken, .tooManyTokenUpdates, .newConnection: return true
        case .accepted, .rejected, .unregistered, .credentialRejected: return false
        }
    }
}
