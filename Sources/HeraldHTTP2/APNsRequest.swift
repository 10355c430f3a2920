import Synchronization
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
    /// The `apns-id` sent (and echoed back); for a broadcast, its `apns-request-id`.
    public var apnsID: String
    /// A broadcast push's `apns-channel-id` (nil for a push to a device).
    public var channelID: String?

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

    /// A request as a server reads it off the wire (`headers` without the
    /// pseudo-headers and `authorization`): the push type and `apns-id` come
    /// from their headers (`alert` and empty when absent; checking them is the server's job).
    public init(method: String, path: String, headers: [Header], body: [UInt8]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        pushType = headers.first { $0.name == "apns-push-type" }.map { PushType(rawValue: $0.value) } ?? .alert
        // A push to a device is named by `apns-id`; a broadcast and channel management by `apns-request-id`.
        let idHeader = path.hasPrefix("/3/") ? "apns-id" : "apns-request-id"
        apnsID = headers.first { $0.name == idHeader }?.value ?? ""
        channelID = headers.first { $0.name == "apns-channel-id" }?.value
    }

    init(path: String, headers: [Header], body: [UInt8], pushType: PushType, apnsID: String, channelID: String? = nil) {
        self.path = path
        self.headers = headers
        self.body = body
        self.pushType = pushType
        self.apnsID = apnsID
        self.channelID = channelID
    }
}

/// Turns envelopes whose payload is built into ``APNsRequest``s: infers and
/// checks the push type, adds the topic's suffix, picks the priority, and
/// refuses what APNs would refuse (a ``StageFailure``: the request ends
/// `dropped` with the reason, before it reaches the wire).
public struct APNsRequestBuilder: Sendable {
    /// The topic for requests that name none (the app's bundle identifier).
    public var defaultTopic: String?

    public init(defaultTopic: String? = nil) { self.defaultTopic = defaultTopic }

    /// A batch as HTTP/2 items, in order, and the records of the envelopes
    /// refused before the wire (each `dropped`, with the builder's reason).
    public func items(for batch: [Envelope]) -> (items: [HTTP2Item], dropped: [OutcomeRecord]) {
        var items: [HTTP2Item] = []
        items.reserveCapacity(batch.count)
        var dropped: [OutcomeRecord] = []
        for i in batch.indices {
            do throws(StageFailure) {
                // Read through the array: `let e = batch[i]` copied the whole envelope (some twenty
                // references) for every read. The call below still copies it once (its disassembly).
                let request = try request(for: batch[i])
                let lane = batch[i].request.lane(pushType: request.pushType)
                items.append(HTTP2Item(
                    sequence: batch[i].sequence, line: batch[i].line, id: batch[i].request.id, token: batch[i].request.token,
                    request: request, topic: batch[i].request.topic, app: batch[i].request.app, lane: lane))
            } catch {
                dropped.append(batch[i].record(.dropped(OutcomeReason(error.code, error.reason))))
            }
        }
        return (items, dropped)
    }

    /// The request for `envelope`; `makeID` makes the `apns-id` when the request has none.
    public func request(for envelope: Envelope, makeID: () -> String = APNsID.random) throws(StageFailure) -> APNsRequest {
        // A `let`: the `var` it was copied the request (some twenty references) to change its priority.
        let r = envelope.request
        guard !envelope.payload.isEmpty else { throw StageFailure("no payload was built for this request", code: .internalFailure) }
        // The `aps` dictionary as a model: the raw payload's, or the request's own (read where it is).
        // The choice is written out here and for the priority below: through a closure taking the
        // model, the sending thread took about a sixth more CPU (perf, bench http2 --url).
        let rawAPS: APS? = if let raw = r.rawPayload { try PayloadValidator.validateRaw(raw) } else { nil }
        let pushType = if let rawAPS { try Self.pushType(of: r, aps: rawAPS) } else { try Self.pushType(of: r, aps: r.aps) }
        let limit = r.isBroadcast ? Self.broadcastPayloadLimit : pushType.payloadLimit
        guard envelope.payload.count <= limit else {
            let what = r.isBroadcast ? "broadcast" : "\(pushType)"
            throw StageFailure("payload is \(envelope.payload.count) bytes, over the \(what) limit of \(limit)", code: .payloadTooLarge)
        }
        guard let base = r.topic ?? defaultTopic, !base.isEmpty else {
            throw StageFailure("no topic: give the request a \"topic\" (the app's bundle identifier) or configure one")
        }
        if let channel = r.channelID { return try broadcast(r, to: channel, bundleID: base, pushType: pushType, body: envelope.payload, makeID: makeID) }
        var topic = base
        if let suffix = pushType.topicSuffix, !suffix.isEmpty, !base.hasSuffix(suffix) { topic += suffix }
        // A background push is content-available only: the payload builder's priority rule
        // (5 when none is given, 10 refused) is APNs' rule for it.
        var priority = r.priority
        if pushType == .background {
            priority = if let rawAPS { try PayloadValidator.priority(priority, underRuleFor: rawAPS) }
                else { try PayloadValidator.priority(priority, underRuleFor: r.aps) }
        }
        if let c = r.collapseID, c.utf8.count > 64 { throw StageFailure("\"collapse-id\" is \(c.utf8.count) bytes; at most 64") }

        let id = r.apnsID?.lowercased() ?? makeID()
        var headers = [APNsRequest.Header("apns-push-type", pushType.rawValue), .init("apns-topic", topic), .init("apns-id", id)]
        if let e = r.expiry { headers.append(.init("apns-expiration", String(e))) }
        if let priority { headers.append(.init("apns-priority", String(priority.rawValue))) }
        if let c = r.collapseID { headers.append(.init("apns-collapse-id", c)) }
        return APNsRequest(path: r.token.hex(after: "/3/device/"), headers: headers, body: envelope.payload, pushType: pushType, apnsID: id)
    }

    /// Broadcasts (like VoIP pushes) may carry 5120 bytes.
    public static let broadcastPayloadLimit = 5120

    /// `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`: a Live
    /// Activity update for every device subscribed to the channel. No topic,
    /// no collapse id; `apns-request-id` plays `apns-id`'s part.
    func broadcast(
        _ r: NotificationRequest, to channel: String, bundleID base: String, pushType: PushType, body: [UInt8], makeID: () -> String
    ) throws(StageFailure) -> APNsRequest {
        guard pushType == .liveActivity else {
            throw StageFailure("a broadcast is a Live Activity update: push type liveactivity, with an \"event\" in \"aps\", not \(pushType)")
        }
        if r.collapseID != nil { throw StageFailure("a broadcast takes no \"collapse-id\"") }
        let suffix = PushType.liveActivity.topicSuffix ?? ""
        let bundleID = !suffix.isEmpty && base.hasSuffix(suffix) ? String(base.dropLast(suffix.count)) : base
        let id = r.apnsID?.lowercased() ?? makeID()
        var headers = [APNsRequest.Header("apns-push-type", pushType.rawValue), .init("apns-channel-id", channel), .init("apns-request-id", id)]
        if let e = r.expiry { headers.append(.init("apns-expiration", String(e))) }
        if let priority = r.priority { headers.append(.init("apns-priority", String(priority.rawValue))) }
        return APNsRequest(
            path: "/4/broadcasts/apps/" + bundleID, headers: headers, body: body, pushType: pushType, apnsID: id, channelID: channel)
    }

    /// The push type the request names, checked against its payload (`aps`),
    /// or the one its payload implies: a Live Activity `event` → `liveactivity`;
    /// `content-available` alone → `background`; otherwise `alert`.
    public static func pushType(of r: NotificationRequest, aps: APS) throws(StageFailure) -> PushType {
        let alerts = aps.alert != nil || aps.badge != nil || aps.sound != nil
        let hasEvent = aps.event != nil
        guard let named = r.pushType else {
            if hasEvent { return .liveActivity }
            if PayloadValidator.isContentAvailableOnly(aps) { return .background }
            return .alert
        }
        switch named {
        case .alert where !alerts:
            throw StageFailure("push type alert needs an alert, a badge or a sound in \"aps\"")
        case .background where alerts:
            throw StageFailure("push type background cannot carry an alert, a badge or a sound (use alert)")
        case .background where !aps.contentAvailable:
            throw StageFailure("push type background needs \"content-available\": 1")
        case .liveActivity where !hasEvent:
            throw StageFailure("push type liveactivity needs a Live Activity \"event\" (start, update or end)")
        default:
            if hasEvent && named != .liveActivity {
                throw StageFailure("a Live Activity \"event\" needs push type liveactivity, not \(named)")
            }
            return named
        }
    }
}

/// `apns-id` values: random (version 4) UUIDs in canonical lowercase text.
public enum APNsID {
    /// A new id. Its bits come from SplitMix64 over a per-process counter,
    /// seeded once from the system's generator: no two ids of a process are
    /// alike (the mix is a bijection, and each id draws two fresh counter
    /// values), and processes start from random points. An `apns-id` names a
    /// notification; it is not a secret. Two system-generator draws an id (a
    /// `getrandom` call each) were 15% of one HTTP/2 connection's time.
    public static func random() -> String {
        let n = counter.add(1, ordering: .relaxed).oldValue
        var g = SeededGenerator(seed: seed &+ n &* (2 &* 0x9E37_79B9_7F4A_7C15))
        return make(using: &g)
    }

    static let seed: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()
    static let counter = Atomic<UInt64>(0)

    public static func make(using generator: inout some RandomNumberGenerator) -> String {
        // Two draws, not sixteen: the system generator is a system call each.
        var high = generator.next(), low = generator.next()
        high = high & ~(0xF << 12) | (0x4 << 12)  // version 4 (byte 6's high nibble)
        low = low & ~(0xC0 << 56) | (0x80 << 56)  // RFC 4122 variant (byte 8's top bits)
        return String(unsafeUninitializedCapacity: 36) { out in
            var k = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[k] = UInt8(ascii: "-")
                    k += 1
                }
                let b = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> (8 * (7 - (i & 7))))
                out[k] = Hex.digit(b >> 4)
                out[k + 1] = Hex.digit(b & 0xF)
                k += 2
            }
            return 36
        }
    }
}
