import HeraldCore
import HeraldJSON
import HeraldPayload

/// One HTTP/2 request to APNs: `POST /3/device/<token>` with its headers and
/// the payload, ready for any HTTP/2 client.
public struct APNsRequest: Sendable, Hashable {
    public var method = "POST"
    public var path: String
    /// Header names in lowercase, in the order they are sent.
    public var headers: [Header]
    public var body: [UInt8]
    public var pushType: PushType
    /// The `apns-id` sent (and echoed back).
    public var apnsID: String

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The value of a header, if present.
    public subscript(header name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// Turns envelopes whose payload is built into ``APNsRequest``s: infers and
/// checks the push type, adds the topic's suffix, picks the priority, and
/// refuses what APNs would refuse (a ``StageFailure``: the request ends
/// `dropped` with the reason, before it reaches the wire).
public struct APNsRequestBuilder: Sendable {
    /// The topic for requests that name none (the app's bundle identifier).
    public var defaultTopic: String?

    public init(defaultTopic: String? = nil) { self.defaultTopic = defaultTopic }

    /// The request for `envelope`; `makeID` makes the `apns-id` when the request has none.
    public func request(for envelope: Envelope, makeID: () -> String = APNsID.random) throws(StageFailure) -> APNsRequest {
        let r = envelope.request
        guard !envelope.payload.isEmpty else { throw StageFailure("no payload was built for this request", code: .internalFailure) }
        let pushType = try Self.pushType(of: r)
        guard envelope.payload.count <= pushType.payloadLimit else {
            throw StageFailure("payload is \(envelope.payload.count) bytes, over the \(pushType) limit of \(pushType.payloadLimit)", code: .payloadTooLarge)
        }
        guard let base = r.topic ?? defaultTopic, !base.isEmpty else {
            throw StageFailure("no topic: give the request a \"topic\" (the app's bundle identifier) or configure one")
        }
        var topic = base
        if let suffix = pushType.topicSuffix, !suffix.isEmpty, !base.hasSuffix(suffix) { topic += suffix }
        let priority = try Self.priority(of: r, pushType: pushType)
        if let c = r.collapseID, c.utf8.count > 64 { throw StageFailure("\"collapse-id\" is \(c.utf8.count) bytes; at most 64") }

        let id = r.apnsID?.lowercased() ?? makeID()
        var headers = [APNsRequest.Header("apns-push-type", pushType.rawValue), .init("apns-topic", topic), .init("apns-id", id)]
        if let e = r.expiry { headers.append(.init("apns-expiration", String(e))) }
        if let priority { headers.append(.init("apns-priority", String(priority.rawValue))) }
        if let c = r.collapseID { headers.append(.init("apns-collapse-id", c)) }
        return APNsRequest(path: "/3/device/" + r.token.hex, headers: headers, body: envelope.payload, pushType: pushType, apnsID: id)
    }

    /// The push type the request names, checked against its payload, or the
    /// one its payload implies: a Live Activity `event` → `liveactivity`;
    /// `content-available` alone → `background`; otherwise `alert`.
    public static func pushType(of r: NotificationRequest) throws(StageFailure) -> PushType {
        let aps = PayloadShape(r)
        guard let named = r.pushType else {
            if aps.hasEvent { return .liveActivity }
            if aps.contentAvailableOnly { return .background }
            return .alert
        }
        switch named {
        case .alert where !aps.alerts:
            throw StageFailure("push type alert needs an alert, a badge or a sound in \"aps\"")
        case .background where aps.alerts:
            throw StageFailure("push type background cannot carry an alert, a badge or a sound (use alert)")
        case .background where !aps.contentAvailable:
            throw StageFailure("push type background needs \"content-available\": 1")
        case .liveActivity where !aps.hasEvent:
            throw StageFailure("push type liveactivity needs a Live Activity \"event\" (start, update or end)")
        default:
            if aps.hasEvent && named != .liveActivity {
                throw StageFailure("a Live Activity \"event\" needs push type liveactivity, not \(named)")
            }
            return named
        }
    }

    /// `apns-priority`: as given, checked against the push type (background
    /// pushes must be 5 or 1; APNs refuses 10); a background push without one gets 5.
    static func priority(of r: NotificationRequest, pushType: PushType) throws(StageFailure) -> Priority? {
        guard pushType == .background else { return r.priority }
        guard let p = r.priority else { return Priority(rawValue: 5) }
        if p.rawValue == 10 { throw StageFailure("push type background must use priority 5 or 1, not 10") }
        return p
    }
}

/// What the payload says about the push type, for structured and raw requests alike.
struct PayloadShape {
    var alerts = false
    var contentAvailable = false
    var hasEvent = false
    var contentAvailableOnly: Bool { contentAvailable && !alerts }

    init(_ r: NotificationRequest) {
        if let raw = r.rawPayload {
            guard case .object(let aps)? = raw.objectValue?["aps"] else { return }
            alerts = aps["alert"] != nil || aps["badge"] != nil || aps["sound"] != nil
            contentAvailable = aps["content-available"]?.numberValue?.intValue == 1
            hasEvent = aps["event"] != nil
        } else {
            alerts = r.aps.alert != nil || r.aps.badge != nil || r.aps.sound != nil
            contentAvailable = r.aps.contentAvailable
            hasEvent = r.aps.event != nil
        }
    }
}

/// `apns-id` values: random (version 4) UUIDs in canonical lowercase text.
public enum APNsID {
    public static func random() -> String {
        var g = SystemRandomNumberGenerator()
        return make(using: &g)
    }

    public static func make(using generator: inout some RandomNumberGenerator) -> String {
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // RFC 4122 variant
        var hex: [UInt8] = []
        hex.reserveCapacity(36)
        for (i, b) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { hex.append(UInt8(ascii: "-")) }
            Hex.append(CollectionOfOne(b), to: &hex)
        }
        return String(decoding: hex, as: UTF8.self)
    }
}
