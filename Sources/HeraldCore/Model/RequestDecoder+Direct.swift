import HeraldJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The direct path of ``RequestDecoder/decode(line:)`` (issue 29): the
/// request shapes nearly every line has (a device token, an id, a topic, an
/// alert as text or as an object of texts and localization keys, a badge, a
/// sound, priority, expiry, language, thread and category, the two flags,
/// custom keys) read straight from the bytes, key by key, with no
/// ``JSONValue`` tree and no string made for a key. Anything else (an unknown
/// or repeated key, a value of the wrong type, a key with escapes, invalid
/// JSON, a broadcast, a raw payload) makes it give up, and the line goes the
/// tree's way, which decodes it or says what is wrong with it: the direct
/// path never decides an error, and what it decodes equals the tree's result
/// (`RequestDecoderDirectTests` holds it to both over generated lines).
extension RequestDecoder {
    /// Top-level keys the direct path reads, one bit each (a repeat gives up).
    enum DirectKey: UInt8 {
        case token, id, topic, app, lane, alert, badge, sound, priority, expiry, language, threadID, category, contentAvailable, mutableContent, custom,
            traceparent, enqueuedAt

        init?(_ k: UnsafeRawBufferPointer) {
            switch k.count {
            case 2 where equal(k, "id"): self = .id
            case 3 where equal(k, "app"): self = .app
            case 4 where equal(k, "lane"): self = .lane
            case 5 where equal(k, "token"): self = .token
            case 5 where equal(k, "topic"): self = .topic
            case 5 where equal(k, "alert"): self = .alert
            case 5 where equal(k, "badge"): self = .badge
            case 5 where equal(k, "sound"): self = .sound
            case 6 where equal(k, "expiry"): self = .expiry
            case 6 where equal(k, "custom"): self = .custom
            case 8 where equal(k, "priority"): self = .priority
            case 8 where equal(k, "language"): self = .language
            case 8 where equal(k, "category"): self = .category
            case 9 where equal(k, "thread-id"): self = .threadID
            case 11 where equal(k, "traceparent"): self = .traceparent
            case 11 where equal(k, "enqueued-at"): self = .enqueuedAt
            case 15 where equal(k, "mutable-content"): self = .mutableContent
            case 17 where equal(k, "content-available"): self = .contentAvailable
            default: return nil
            }
        }
    }

    /// Alert keys the direct path reads.
    enum DirectAlertKey: UInt8 {
        case title, subtitle, body, launchImage, locKey, locArgs, titleLocKey, titleLocArgs, subtitleLocKey, subtitleLocArgs

        init?(_ k: UnsafeRawBufferPointer) {
            switch k.count {
            case 4 where equal(k, "body"): self = .body
            case 5 where equal(k, "title"): self = .title
            case 7 where equal(k, "loc-key"): self = .locKey
            case 8 where equal(k, "subtitle"): self = .subtitle
            case 8 where equal(k, "loc-args"): self = .locArgs
            case 12 where equal(k, "launch-image"): self = .launchImage
            case 13 where equal(k, "title-loc-key"): self = .titleLocKey
            case 14 where equal(k, "title-loc-args"): self = .titleLocArgs
            case 16 where equal(k, "subtitle-loc-key"): self = .subtitleLocKey
            case 17 where equal(k, "subtitle-loc-args"): self = .subtitleLocArgs
            default: return nil
            }
        }
    }

    /// The request, or nil when the line is not of a shape this path reads.
    package func decodeDirect(_ line: UnsafeRawBufferPointer) -> NotificationRequest? {
        var r = NotificationRequest.blank
        return decodeDirect(line, into: &r) ? r : nil
    }

    /// Decodes the line into `r`, a ``NotificationRequest/blank`` request (built where it is to
    /// stay, such as an envelope in a batch: a request returned is moved and copied on its way
    /// there, some 350 bytes and a retain and release of each reference, a fifth of what
    /// decoding cost); false when the line is not of a shape this path reads, `r` then part
    /// written, to be discarded.
    package func decodeDirect(_ line: UnsafeRawBufferPointer, into r: inout NotificationRequest) -> Bool {
        decodeDirectFields(line, &r) != nil
    }

    /// ``decodeDirect(_:into:)``, nil for false (so `guard` can leave early).
    private func decodeDirectFields(_ line: UnsafeRawBufferPointer, _ r: inout NotificationRequest) -> Void? {
        var p = JSONParser(fields: line)
        guard p.consume(UInt8(ascii: "{")) else { return nil }
        var seen: UInt32 = 0
        var enqueuedAt: Int64?
        repeat {
            guard let key = Self.directKey(&p, &seen, DirectKey.init) else { return nil }
            switch key {
            case .token:
                guard let hex = p.plainString(), let token = try? DeviceToken(hexUTF8: hex) else { return nil }
                r.token = token
            case .id:
                guard let n = p.integer(), n >= 0, n <= Int(UInt32.max) else { return nil }
                r.id = UInt32(n)
            case .expiry:
                guard let n = p.integer(), n >= 0, n <= Int(UInt32.max) else { return nil }
                r.expiry = UInt32(n)
            case .priority:
                guard let n = p.integer(), n == 10 || n == 5 || n == 1 else { return nil }
                r.priority = Priority(rawValue: UInt8(n))
            case .badge:
                guard let n = p.integer() else { return nil }
                r.aps.badge = n
            case .topic:
                guard let s = p.string() else { return nil }
                r.topic = s
            case .app:
                guard let s = p.string(), Self.isAppName(s) else { return nil }
                r.app = s
            case .lane:
                guard let s = p.string(), let lane = Lane.named(s) else { return nil }
                r.lane = lane
            case .language:
                guard let s = p.string() else { return nil }
                r.language = s
            case .sound:
                guard let s = p.string() else { return nil }
                r.aps.sound = .named(s)
            case .threadID:
                guard let s = p.string() else { return nil }
                r.aps.threadID = s
            case .category:
                guard let s = p.string() else { return nil }
                r.aps.category = s
            case .contentAvailable:
                guard let f = Self.directFlag(&p) else { return nil }
                r.aps.contentAvailable = f
            case .mutableContent:
                guard let f = Self.directFlag(&p) else { return nil }
                r.aps.mutableContent = f
            case .custom:
                guard p.peek() == UInt8(ascii: "{"), case .object(let c)? = p.value(depth: 1) else { return nil }
                r.custom = c
            case .traceparent:
                guard let s = p.string(), let trace = NotificationTrace(traceparent: s) else { return nil }
                r.trace = trace
            case .enqueuedAt:
                guard let n = p.integer(), n >= 0 else { return nil }
                enqueuedAt = Int64(n)
            case .alert:
                if p.peek() == UInt8(ascii: "{") {
                    var alert = Alert()
                    guard Self.directAlert(&p, into: &alert) else { return nil }
                    r.aps.alert = consume alert
                } else {
                    guard let s = p.string() else { return nil }
                    r.aps.alert = Alert(body: s)
                }
            }
        } while p.consume(UInt8(ascii: ","))
        guard p.consume(UInt8(ascii: "}")), p.atEnd(), seen & (1 << DirectKey.token.rawValue) != 0 else { return nil }
        if let enqueuedAt {
            // Without a traceparent the tree says what is wrong.
            guard r.trace != nil else { return nil }
            r.trace?.enqueuedAt = enqueuedAt
        }
        return ()
    }

    /// An object's next key and its `:`, if it is one `make` knows and not in `seen` (then
    /// added); nil for an unknown, repeated or escaped key.
    static func directKey<K: RawRepresentable<UInt8>>(_ p: inout JSONParser, _ seen: inout UInt32, _ make: (UnsafeRawBufferPointer) -> K?) -> K? {
        guard let raw = p.plainString(), let key = make(raw), p.consume(UInt8(ascii: ":")) else { return nil }
        let bit: UInt32 = 1 << key.rawValue
        guard seen & bit == 0 else { return nil }
        seen |= bit
        return key
    }

    /// `content-available` / `mutable-content`: `true`, `false`, 1 or 0, as ``flag(_:_:)`` takes them.
    static func directFlag(_ p: inout JSONParser) -> Bool? {
        if let b = p.bool() { return b }
        guard let n = p.integer(), n == 0 || n == 1 else { return nil }
        return n == 1
    }

    /// An alert object of texts and localization keys, read into `alert` (an empty one, in
    /// place); false when it is not of a shape this path reads.
    static func directAlert(_ p: inout JSONParser, into alert: inout Alert) -> Bool {
        guard p.consume(UInt8(ascii: "{")) else { return false }
        if p.consume(UInt8(ascii: "}")) { return true }
        var seen: UInt32 = 0
        repeat {
            guard let key = directKey(&p, &seen, DirectAlertKey.init) else { return false }
            switch key {
            case .locArgs, .titleLocArgs, .subtitleLocArgs:
                guard let args = directStrings(&p) else { return false }
                switch key {
                case .locArgs: alert.locArgs = args
                case .titleLocArgs: alert.titleLocArgs = args
                default: alert.subtitleLocArgs = args
                }
            default:
                guard let s = p.string() else { return false }
                switch key {
                case .title: alert.title = s
                case .subtitle: alert.subtitle = s
                case .body: alert.body = s
                case .launchImage: alert.launchImage = s
                case .locKey: alert.locKey = s
                case .titleLocKey: alert.titleLocKey = s
                default: alert.subtitleLocKey = s
                }
            }
        } while p.consume(UInt8(ascii: ","))
        return p.consume(UInt8(ascii: "}"))
    }

    /// An array of strings.
    static func directStrings(_ p: inout JSONParser) -> [String]? {
        guard p.consume(UInt8(ascii: "[")) else { return nil }
        var out: [String] = []
        if p.consume(UInt8(ascii: "]")) { return out }
        repeat {
            guard let s = p.string() else { return nil }
            out.append(s)
        } while p.consume(UInt8(ascii: ","))
        guard p.consume(UInt8(ascii: "]")) else { return nil }
        return out
    }
}

/// Whether raw bytes spell `literal` (same length assumed checked by the caller).
@inline(__always) private func equal(_ raw: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
    raw.count == literal.utf8CodeUnitCount && memcmp(raw.baseAddress!, literal.utf8Start, raw.count) == 0
}
