import HeraldCore
import HeraldJSON

/// Builds the compact JSON payload of a request: `{"aps":{…},<custom keys>}`.
///
/// The contract:
/// - Output is strict, compact JSON (RFC 8259): no whitespace, strings escaped
///   as ``JSONWriter`` does (quotes, backslash, control characters; non-ASCII
///   as UTF-8), integers without a fraction, `volume` and `relevance-score`
///   in plain decimal (``JSONNumber/init(_:)-(Double)``), never an exponent.
/// - Key order is fixed: the `aps` keys in the order of ``APSKey/order``, the
///   alert's keys in the order of ``APSKey/alertOrder``, the critical sound as
///   `critical`, `name`, `volume`; then custom keys in the request's order.
/// - An alert with only a body is written as a plain string (it saves bytes
///   and gets the default buttons, as the payload guides advise).
/// - Invalid requests (see ``PayloadValidator``) throw a ``StageFailure``: the
///   request ends as `dropped` with that reason. Nothing here traps on input.
/// - A `content-available`-only push with no priority gets priority 5
///   (`request.priority` is set); with an explicit priority 10 it is dropped.
/// - The raw form (`request.rawPayload`) is validated (an object with an `aps`
///   object; Apple's keys in it checked like the structured ones; unknown keys
///   inside `aps` pass through, APNs ignores them) and re-emitted compactly,
///   keeping its key order.
///
/// ```swift
/// var request = NotificationRequest(token: token)
/// request.aps.alert = Alert(body: "Hello")
/// request.aps.badge = 3
/// let bytes = try APSPayloadBuilder().build(&request)   // {"aps":{"alert":"Hello","badge":3}}
/// ```
public struct APSPayloadBuilder: PayloadBuilder {
    public init() {}

    public func build(_ request: inout NotificationRequest) throws(StageFailure) -> [UInt8] {
        if let raw = request.rawPayload {
            let aps = try PayloadValidator.validateRaw(raw)
            try PayloadValidator.applyPriorityRule(aps, to: &request)
            var w = JSONWriter(capacity: 256)
            w.value(raw)
            return w.bytes
        }
        try PayloadValidator.validate(request)
        try PayloadValidator.applyPriorityRule(request.aps, to: &request)
        // Write into a buffer of the estimated size; in the rare case it is too small, again into a growable one.
        let capacity = Self.capacityEstimate(request)
        if let bytes = Self.encode(request, capacity: capacity) { return bytes }
        var w = JSONWriter(capacity: capacity * 2)
        Self.write(request, into: &w)
        return w.bytes
    }

    /// The payload in a buffer of `capacity` bytes, or `nil` if it does not fit.
    static func encode(_ request: borrowing NotificationRequest, capacity: Int) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer -> [UInt8]? in
            var w = FixedJSONWriter(base: buffer.baseAddress!, capacity: capacity)
            write(request, into: &w)
            if w.overflowed { return nil }
            return Array(UnsafeBufferPointer(start: buffer.baseAddress!, count: w.count))
        }
    }

    /// A cheap estimate of the payload's size, enough unless there are many
    /// escapes or large custom values (then ``build(_:)`` writes again into a
    /// growable buffer).
    @inline(__always)
    static func capacityEstimate(_ r: NotificationRequest) -> Int {
        var n = 48
        n += r.aps.alert?.payloadSizeEstimate ?? 0  // read in place (a method through `?.`), not copied
        if case .named(let s)? = r.aps.sound { n += s.utf8.count + 10 } else if r.aps.sound != nil { n += 64 }
        if let s = r.aps.category { n += s.utf8.count + 14 }
        if let s = r.aps.threadID { n += s.utf8.count + 14 }
        n += r.custom.count * 24
        if r.aps.contentState != nil || r.aps.attributes != nil { n += 256 }
        return n + n / 8  // room for a few escapes
    }

    /// Where the escaped text of `field` starts in the payload ``write(_:into:)``
    /// makes of the structured `request`, or `nil` when the field is absent or
    /// the request is in raw form. Computed from the escaped sizes of the
    /// alert's earlier fields: the size guard splices a shortened text into
    /// the payload without re-encoding it.
    public static func textOffset(of field: TruncatableField, in request: NotificationRequest) -> Int? {
        guard request.rawPayload == nil, let alert = request.aps.alert else { return nil }
        let head = 16  // {"aps":{"alert":
        if alert.isBodyOnly { return field == .body ? head + 1 : nil }
        var offset = head + 1  // {
        if let title = alert.title {
            if field == .title { return offset + 9 }  // "title":"
            offset += 9 + JSONWriter.escapedSize(of: title) + 2  // ",
        }
        if let subtitle = alert.subtitle {
            if field == .subtitle { return offset + 12 }  // "subtitle":"
            offset += 12 + JSONWriter.escapedSize(of: subtitle) + 2
        }
        if alert.body != nil && field == .body { return offset + 8 }  // "body":"
        return nil
    }

    /// Writes a validated structured request (its fields read in place: a copy of `aps` took a
    /// retain and a release of each of its references).
    static func write<W: JSONOutput>(_ request: NotificationRequest, into w: inout W) {
        w.raw("{\"aps\":{")
        var first = true
        if case .some = request.aps.alert {
            first = false
            w.raw("\"alert\":")
            // Read in place (a method through `?.`): a bound copy cost a retain and a release of each text.
            request.aps.alert?.writePayloadValue(into: &w)
        }
        if let badge = request.aps.badge {
            w.separator(&first)
            w.raw("\"badge\":")
            w.int(badge)
        }
        if let sound = request.aps.sound {
            w.separator(&first)
            w.raw("\"sound\":")
            switch sound {
            case .named(let n): w.string(n)
            case .critical(let name, let volume, let critical):
                w.raw("{\"critical\":")
                w.byte(critical ? UInt8(ascii: "1") : UInt8(ascii: "0"))
                w.raw(",\"name\":")
                w.string(name)
                w.raw(",\"volume\":")
                w.number(JSONNumber(volume)!)  // validated finite
                w.byte(UInt8(ascii: "}"))
            }
        }
        if let s = request.aps.threadID { w.separator(&first); w.raw("\"thread-id\":"); w.string(s) }
        if let s = request.aps.category { w.separator(&first); w.raw("\"category\":"); w.string(s) }
        if request.aps.contentAvailable { w.separator(&first); w.raw("\"content-available\":1") }
        if request.aps.mutableContent { w.separator(&first); w.raw("\"mutable-content\":1") }
        if let s = request.aps.targetContentID { w.separator(&first); w.raw("\"target-content-id\":"); w.string(s) }
        if let s = request.aps.interruptionLevel { w.separator(&first); w.raw("\"interruption-level\":"); w.string(s) }
        if let d = request.aps.relevanceScore { w.separator(&first); w.raw("\"relevance-score\":"); w.number(JSONNumber(d)!) }
        if let s = request.aps.filterCriteria { w.separator(&first); w.raw("\"filter-criteria\":"); w.string(s) }
        if let n = request.aps.timestamp { w.separator(&first); w.raw("\"timestamp\":"); w.int(n) }
        if let s = request.aps.event { w.separator(&first); w.raw("\"event\":"); w.string(s) }
        if let v = request.aps.contentState { w.separator(&first); w.raw("\"content-state\":"); w.value(v) }
        if let n = request.aps.staleDate { w.separator(&first); w.raw("\"stale-date\":"); w.int(n) }
        if let n = request.aps.dismissalDate { w.separator(&first); w.raw("\"dismissal-date\":"); w.int(n) }
        if let s = request.aps.attributesType { w.separator(&first); w.raw("\"attributes-type\":"); w.string(s) }
        if let v = request.aps.attributes { w.separator(&first); w.raw("\"attributes\":"); w.value(v) }
        if request.aps.inputPushToken { w.separator(&first); w.raw("\"input-push-token\":1") }
        if let s = request.aps.inputPushChannel { w.separator(&first); w.raw("\"input-push-channel\":"); w.string(s) }
        w.byte(UInt8(ascii: "}"))
        for (k, v) in request.custom {
            w.byte(UInt8(ascii: ","))
            w.string(k)
            w.byte(UInt8(ascii: ":"))
            w.value(v)
        }
        w.byte(UInt8(ascii: "}"))
    }

    /// Writes the alert dictionary, keys in ``APSKey/alertOrder``.
    static func writeAlert<W: JSONOutput>(_ alert: Alert, into w: inout W) {
        w.byte(UInt8(ascii: "{"))
        var first = true
        if let s = alert.title { w.separator(&first); w.raw("\"title\":"); w.string(s) }
        if let s = alert.subtitle { w.separator(&first); w.raw("\"subtitle\":"); w.string(s) }
        if let s = alert.body { w.separator(&first); w.raw("\"body\":"); w.string(s) }
        if let s = alert.launchImage { w.separator(&first); w.raw("\"launch-image\":"); w.string(s) }
        if let s = alert.titleLocKey { w.separator(&first); w.raw("\"title-loc-key\":"); w.string(s) }
        if let a = alert.titleLocArgs { w.separator(&first); w.raw("\"title-loc-args\":"); w.strings(a) }
        if let s = alert.subtitleLocKey { w.separator(&first); w.raw("\"subtitle-loc-key\":"); w.string(s) }
        if let a = alert.subtitleLocArgs { w.separator(&first); w.raw("\"subtitle-loc-args\":"); w.strings(a) }
        if let action = alert.actionLocKey {
            w.separator(&first)
            w.raw("\"action-loc-key\":")
            if let action { w.string(action) } else { w.raw("null") }
        }
        if let s = alert.locKey { w.separator(&first); w.raw("\"loc-key\":"); w.string(s) }
        if let a = alert.locArgs { w.separator(&first); w.raw("\"loc-args\":"); w.strings(a) }
        w.byte(UInt8(ascii: "}"))
    }
}

extension Alert {
    /// ``APSPayloadBuilder/capacityEstimate(_:)``'s share for the alert.
    fileprivate var payloadSizeEstimate: Int {
        var n = 24
        if let s = body { n += s.utf8.count + 10 }
        if let s = title { n += s.utf8.count + 11 }
        if let s = subtitle { n += s.utf8.count + 14 }
        if let s = locKey { n += s.utf8.count + 24 }
        if let args = locArgs { n += 16; for s in args { n += s.utf8.count + 3 } }
        return n
    }

    /// The alert's payload value: its body alone as a string (it saves bytes and gets the
    /// default buttons, as the payload guides advise), else the dictionary.
    fileprivate func writePayloadValue<W: JSONOutput>(into w: inout W) {
        if isBodyOnly, let body { w.string(body) } else { APSPayloadBuilder.writeAlert(self, into: &w) }
    }
}

/// The Apple-defined keys, in the order the builder writes them.
public enum APSKey {
    /// Keys of the `aps` dictionary.
    public static let order: [String] = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        "input-push-token", "input-push-channel",
    ]
    /// Keys of the `alert` dictionary.
    public static let alertOrder: [String] = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args",
        "subtitle-loc-key", "subtitle-loc-args", "action-loc-key", "loc-key", "loc-args",
    ]
    /// Keys of the critical-alert `sound` dictionary.
    public static let soundOrder: [String] = ["critical", "name", "volume"]
    /// The allowed `interruption-level` values.
    public static let interruptionLevels: [String] = ["passive", "active", "time-sensitive", "critical"]
    /// The allowed Live Activity `event` values.
    public static let events: [String] = ["start", "update", "end"]

    static let known: Set<String> = Set(order)
}
