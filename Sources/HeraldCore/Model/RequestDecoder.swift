import HeraldJSON
/// Decodes the JSON Lines request contract into a ``NotificationRequest``.
///
/// Structured form:
/// `{"token":"<hex>","topic":"…","alert":"Hi"|{…},"badge":5,"sound":"default","custom":{…},"language":"fr-CA","expiry":1700000000,"priority":10,"id":42}`
/// Raw form: `{"token":"<hex>","payload":{"aps":{…},…}}`.
/// A broadcast (HTTP/2, iOS 18 Live Activities) names `"channel-id"` instead of `"token"`.
/// Unknown keys and wrongly typed values are errors naming the key.
public struct RequestDecoder: Sendable {
    public init() {}

    /// Decodes one line's bytes: the common shapes straight from the bytes
    /// (``decodeDirect(_:)``), anything else through the parsed tree.
    public func decode(line: UnsafeRawBufferPointer) throws(RequestError) -> NotificationRequest {
        var r = NotificationRequest.blank
        try decode(line: line, into: &r)
        return r
    }

    /// ``decode(line:)`` into `r`, a ``NotificationRequest/blank`` request where it is to stay
    /// (``decodeDirect(_:into:)``); after an error `r` is part written, to be discarded.
    package func decode(line: UnsafeRawBufferPointer, into r: inout NotificationRequest) throws(RequestError) {
        if decodeDirect(line, into: &r) { return }
        r = try decodeTree(line: line)
    }

    /// Decodes one line's bytes through the parsed ``JSONValue`` tree: every
    /// shape, and the error for any line that is not a request.
    package func decodeTree(line: UnsafeRawBufferPointer) throws(RequestError) -> NotificationRequest {
        let value: JSONValue
        do { value = try JSONParser.parse(line) } catch { throw RequestError(error.description) }
        return try decode(value)
    }

    /// Decodes a parsed JSON value.
    public func decode(_ value: JSONValue) throws(RequestError) -> NotificationRequest {
        guard case .object(let o) = value else { throw RequestError("request must be a JSON object, got \(value.typeName)") }
        var r: NotificationRequest
        if let channel = o["channel-id"] {
            guard o["token"] == nil else { throw RequestError("\"token\" and \"channel-id\" cannot both be given: a push goes to a device or to a broadcast channel") }
            let id = try string(channel, "channel-id")
            guard Self.isChannelID(id) else { throw RequestError("\"channel-id\" must be a channel id as APNs issues them (base64 text)") }
            r = NotificationRequest(channelID: id)
        } else {
            guard let tokenValue = o["token"] else { throw RequestError("missing \"token\" (or \"channel-id\" for a broadcast)") }
            guard case .string(let hex) = tokenValue else { throw RequestError("\"token\" must be a hex string") }
            let token: DeviceToken
            do { token = try DeviceToken(hex: hex) } catch { throw RequestError("\"token\": \(error)") }
            r = NotificationRequest(token: token)
        }
        var enqueuedAt: Int64?
        for (key, v) in o {
            switch key {
            case "token", "channel-id": break
            case "id":
                guard let n = v.numberValue?.intValue, n >= 0, n <= Int(UInt32.max) else {
                    throw RequestError("\"id\" must be an integer from 0 to \(UInt32.max)")
                }
                r.id = UInt32(n)
            case "topic": r.topic = try string(v, key)
            case "app": r.app = try Self.appName(string(v, key))
            case "lane":
                guard let lane = Lane.named(try string(v, key)) else { throw RequestError("\"lane\" must be \"fast\" or \"bulk\"") }
                r.lane = lane
            case "language": r.language = try string(v, key)
            case "send-at": r.sendAt = try Self.sendAt(v)
            case "traceparent":
                let text = try string(v, key)
                guard let trace = NotificationTrace(traceparent: text) else {
                    throw RequestError("\"traceparent\" must be a W3C trace context: version-traceid-parentid-flags in lowercase hex, such as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                }
                r.trace = trace
            case "enqueued-at":
                guard let n = v.numberValue?.intValue, n >= 0 else { throw RequestError("\"enqueued-at\" must be epoch milliseconds") }
                enqueuedAt = Int64(n)
            case "expiry":
                guard let n = v.numberValue?.intValue, n >= 0, n <= Int(UInt32.max) else {
                    throw RequestError("\"expiry\" must be UNIX seconds (0 to \(UInt32.max))")
                }
                r.expiry = UInt32(n)
            case "priority":
                guard let n = v.numberValue?.intValue, [1, 5, 10].contains(n) else {
                    throw RequestError("\"priority\" must be 10, 5 or 1")
                }
                r.priority = Priority(rawValue: UInt8(n))
            case "localization", "localize":
                let m = try string(v, key)
                guard m == "server" || m == "client" else { throw RequestError("\"\(key)\" must be \"server\" or \"client\"") }
                r.localization = LocalizationMode(rawValue: m)
            case "payload": r.rawPayload = v
            case "push-type":
                let t = PushType(rawValue: try string(v, key))
                guard PushType.known.contains(t) else {
                    throw RequestError("\"push-type\" must be one of \(PushType.known.map(\.rawValue).joined(separator: ", "))")
                }
                r.pushType = t
            case "collapse-id":
                let c = try string(v, key)
                guard c.utf8.count <= 64 else { throw RequestError("\"collapse-id\" is \(c.utf8.count) bytes; at most 64") }
                r.collapseID = c
            case "apns-id":
                let u = try string(v, key)
                guard Self.isCanonicalUUID(u) else { throw RequestError("\"apns-id\" must be a UUID (8-4-4-4-12 hex digits)") }
                r.apnsID = u
            case "custom":
                guard case .object(let c) = v else { throw RequestError("\"custom\" must be an object") }
                r.custom = c
            case "aps":
                guard case .object(let a) = v else { throw RequestError("\"aps\" must be an object") }
                for (k, av) in a { try decodeAPSKey(k, av, into: &r.aps, context: "aps.") }
            default:
                try decodeAPSKey(key, v, into: &r.aps, context: "")
            }
        }
        if let enqueuedAt {
            guard r.trace != nil else { throw RequestError("\"enqueued-at\" is the start of a traced request's queue wait: it needs a \"traceparent\"") }
            r.trace?.enqueuedAt = enqueuedAt
        }
        if r.rawPayload != nil {
            let structured = o.keys.filter {
                !["token", "channel-id", "id", "topic", "app", "lane", "language", "expiry", "priority", "payload", "push-type", "collapse-id", "apns-id", "send-at",
                  "traceparent", "enqueued-at"].contains($0)
            }
            if !structured.isEmpty {
                throw RequestError("\"payload\" (raw form) cannot be combined with \(structured.map { "\"\($0)\"" }.joined(separator: ", "))")
            }
        }
        return r
    }

    /// Decodes one Apple-defined `aps` key.
    public func decodeAPSKey(_ key: String, _ v: JSONValue, into aps: inout APS, context: String) throws(RequestError) {
        let name = context + key
        switch key {
        case "alert":
            switch v {
            case .string(let s): aps.alert = Alert(body: s)
            case .object(let a): aps.alert = try decodeAlert(a, name: name)
            default: throw RequestError("\"\(name)\" must be a string or an object")
            }
        case "badge":
            aps.badge = try int(v, name)
        case "sound":
            switch v {
            case .string(let s): aps.sound = .named(s)
            case .object(let s):
                var soundName = "default", volume = 1.0, critical = false
                for (k, sv) in s {
                    switch k {
                    case "name": soundName = try string(sv, "\(name).name")
                    case "volume":
                        guard let d = sv.numberValue?.doubleValue else { throw RequestError("\"\(name).volume\" must be a number") }
                        volume = d
                    case "critical":
                        if let b = sv.boolValue { critical = b } else if let n = sv.numberValue?.intValue, n == 0 || n == 1 { critical = n == 1 } else {
                            throw RequestError("\"\(name).critical\" must be 0 or 1")
                        }
                    default: throw RequestError("unknown key \"\(name).\(k)\"")
                    }
                }
                aps.sound = .critical(name: soundName, volume: volume, critical: critical)
            default: throw RequestError("\"\(name)\" must be a string or an object")
            }
        case "thread-id": aps.threadID = try string(v, name)
        case "category": aps.category = try string(v, name)
        case "content-available": aps.contentAvailable = try flag(v, name)
        case "mutable-content": aps.mutableContent = try flag(v, name)
        case "target-content-id": aps.targetContentID = try string(v, name)
        case "interruption-level": aps.interruptionLevel = try string(v, name)
        case "relevance-score":
            guard let d = v.numberValue?.doubleValue else { throw RequestError("\"\(name)\" must be a number") }
            aps.relevanceScore = d
        case "filter-criteria": aps.filterCriteria = try string(v, name)
        case "timestamp": aps.timestamp = try int(v, name)
        case "event": aps.event = try string(v, name)
        case "content-state": aps.contentState = v
        case "stale-date": aps.staleDate = try int(v, name)
        case "dismissal-date": aps.dismissalDate = try int(v, name)
        case "attributes-type": aps.attributesType = try string(v, name)
        case "attributes": aps.attributes = v
        case "input-push-token": aps.inputPushToken = try flag(v, name)
        case "input-push-channel": aps.inputPushChannel = try string(v, name)
        default: throw RequestError("unknown key \"\(name)\"")
        }
    }

    /// Whether `s` looks like a broadcast channel id: base64 text (APNs issues
    /// 16 random bytes, `dHN0LXNyY2gtY2hubA==`), at most 256 characters.
    package static func isChannelID(_ s: String) -> Bool {
        let u = s.utf8
        guard !u.isEmpty, u.count <= 256, u.count % 4 == 0 else { return false }
        var padding = 0
        for c in u {
            switch c {
            case UInt8(ascii: "="): padding += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "+"), UInt8(ascii: "/"):
                if padding > 0 { return false }
            default: return false
            }
        }
        return padding <= 2
    }

    /// An app's name as a request (`app`) or the configuration (`apps[].name`) gives it: 1 to 64
    /// letters, digits, `-`, `_` or `.` (a metrics label and a path segment as it is).
    package static let appNameRule = "1 to 64 letters, digits, '-', '_' or '.'"

    package static func isAppName(_ s: some StringProtocol) -> Bool {
        (1...64).contains(s.utf8.count) && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F || c == 0x2E
        }
    }

    /// `send-at`: RFC 3339 text or epoch milliseconds.
    static func sendAt(_ v: JSONValue) throws(RequestError) -> Int64 {
        if let text = v.stringValue {
            guard let ms = SendAt.milliseconds(rfc3339: text) else {
                throw RequestError("\"send-at\" must be an RFC 3339 date-time such as 2026-11-27T18:30:00Z, got \"\(text.prefix(40))\"")
            }
            return ms
        }
        guard let n = v.numberValue?.intValue, n >= 0 else {
            throw RequestError("\"send-at\" must be an RFC 3339 date-time or epoch milliseconds")
        }
        guard Int64(n) >= SendAt.smallestMilliseconds else {
            throw RequestError("\"send-at\" \(n) is epoch milliseconds before 1973: seconds? (multiply by 1000)")
        }
        guard Int64(n) <= SendAt.largestMilliseconds else { throw RequestError("\"send-at\" \(n) is after the year 9999") }
        return Int64(n)
    }

    static func appName(_ s: String) throws(RequestError) -> String {
        guard isAppName(s) else { throw RequestError("\"app\" must be an app's name: \(appNameRule)") }
        return s
    }

    /// Whether `s` is a UUID in its canonical text form (either case).
    package static func isCanonicalUUID(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if Hex.nibble(c) == nil {
                return false
            }
        }
        return true
    }

    func decodeAlert(_ a: JSONObject, name: String) throws(RequestError) -> Alert {
        var alert = Alert()
        for (k, v) in a {
            let n = "\(name).\(k)"
            switch k {
            case "title": alert.title = try string(v, n)
            case "subtitle": alert.subtitle = try string(v, n)
            case "body": alert.body = try string(v, n)
            case "launch-image": alert.launchImage = try string(v, n)
            case "action-loc-key": alert.actionLocKey = v.isNull ? .some(nil) : .some(try string(v, n))
            case "loc-key": alert.locKey = try string(v, n)
            case "loc-args": alert.locArgs = try strings(v, n)
            case "title-loc-key": alert.titleLocKey = try string(v, n)
            case "title-loc-args": alert.titleLocArgs = try strings(v, n)
            case "subtitle-loc-key": alert.subtitleLocKey = try string(v, n)
            case "subtitle-loc-args": alert.subtitleLocArgs = try strings(v, n)
            case "action": alert.actionLocKey = .some(try string(v, n))
            default: throw RequestError("unknown key \"\(n)\"")
            }
        }
        return alert
    }

    func string(_ v: JSONValue, _ name: String) throws(RequestError) -> String {
        guard case .string(let s) = v else { throw RequestError("\"\(name)\" must be a string, got \(v.typeName)") }
        return s
    }
    func int(_ v: JSONValue, _ name: String) throws(RequestError) -> Int {
        guard let n = v.numberValue, n.isInteger else { throw RequestError("\"\(name)\" must be an integer") }
        guard let i = n.intValue else { throw RequestError("\"\(name)\" is out of range: \(n.text) (from \(Int.min) to \(Int.max))") }
        return i
    }
    func strings(_ v: JSONValue, _ name: String) throws(RequestError) -> [String] {
        guard case .array(let a) = v else { throw RequestError("\"\(name)\" must be an array of strings") }
        var out: [String] = []
        for e in a {
            guard case .string(let s) = e else { throw RequestError("\"\(name)\" must contain only strings (loc-args are always strings), got \(e.typeName)") }
            out.append(s)
        }
        return out
    }
    func flag(_ v: JSONValue, _ name: String) throws(RequestError) -> Bool {
        if let b = v.boolValue { return b }
        if let n = v.numberValue?.intValue, n == 0 || n == 1 { return n == 1 }
        throw RequestError("\"\(name)\" must be 1 (or 0)")
    }
}

/// Why a request line could not be decoded.
public struct RequestError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
