import HeraldCore

/// Builds the compact JSON payload of a request: `{"aps":{…},<custom keys>}`.
///
/// Key order is fixed (the order of the `aps` keys below, then custom keys in
/// the request's order). An alert with only a body is written as a plain string.
public struct APSPayloadBuilder: PayloadBuilder {
    public init() {}

    public func build(_ request: inout NotificationRequest) throws(StageFailure) -> [UInt8] {
        if let raw = request.rawPayload {
            guard case .object(let top) = raw, case .object? = top["aps"] else {
                throw StageFailure("raw payload must be an object with an \"aps\" dictionary")
            }
            return raw.compactBytes
        }
        if request.custom["aps"] != nil { throw StageFailure("custom key \"aps\" is reserved") }
        let aps = request.aps
        if let badge = aps.badge, badge < 0 { throw StageFailure("badge must be 0 or more, got \(badge)") }
        var w = JSONWriter(capacity: 128)
        w.raw("{\"aps\":{")
        var first = true
        func sep(_ w: inout JSONWriter) { if !first { w.byte(UInt8(ascii: ",")) }; first = false }
        if let alert = aps.alert {
            sep(&w)
            w.key("alert")
            if alert.isBodyOnly, let body = alert.body {
                w.string(body)
            } else {
                w.byte(UInt8(ascii: "{"))
                var f = true
                func field(_ name: StaticString, _ value: String?, _ w: inout JSONWriter) {
                    guard let value else { return }
                    if !f { w.byte(UInt8(ascii: ",")) }
                    f = false
                    w.key(name)
                    w.string(value)
                }
                func args(_ name: StaticString, _ value: [String]?, _ w: inout JSONWriter) {
                    guard let value else { return }
                    if !f { w.byte(UInt8(ascii: ",")) }
                    f = false
                    w.key(name)
                    w.value(.array(value.map { .string($0) }))
                }
                field("title", alert.title, &w)
                field("subtitle", alert.subtitle, &w)
                field("body", alert.body, &w)
                field("launch-image", alert.launchImage, &w)
                field("title-loc-key", alert.titleLocKey, &w)
                args("title-loc-args", alert.titleLocArgs, &w)
                field("subtitle-loc-key", alert.subtitleLocKey, &w)
                args("subtitle-loc-args", alert.subtitleLocArgs, &w)
                if let action = alert.actionLocKey {
                    if !f { w.byte(UInt8(ascii: ",")) }
                    f = false
                    w.key("action-loc-key")
                    if let action { w.string(action) } else { w.raw("null") }
                }
                field("loc-key", alert.locKey, &w)
                args("loc-args", alert.locArgs, &w)
                w.byte(UInt8(ascii: "}"))
            }
        }
        if let badge = aps.badge { sep(&w); w.key("badge"); w.int(badge) }
        if let sound = aps.sound {
            sep(&w)
            w.key("sound")
            switch sound {
            case .named(let n): w.string(n)
            case .critical(let name, let volume, let critical):
                guard volume >= 0 && volume <= 1, let v = JSONNumber(volume) else {
                    throw StageFailure("sound volume must be between 0 and 1, got \(volume)")
                }
                w.raw("{\"critical\":")
                w.int(critical ? 1 : 0)
                w.raw(",\"name\":")
                w.string(name)
                w.raw(",\"volume\":")
                w.number(v)
                w.byte(UInt8(ascii: "}"))
            }
        }
        if let t = aps.threadID { sep(&w); w.key("thread-id"); w.string(t) }
        if let c = aps.category { sep(&w); w.key("category"); w.string(c) }
        if aps.contentAvailable { sep(&w); w.key("content-available"); w.int(1) }
        if aps.mutableContent { sep(&w); w.key("mutable-content"); w.int(1) }
        w.byte(UInt8(ascii: "}"))
        for (k, v) in request.custom {
            w.byte(UInt8(ascii: ","))
            w.string(k)
            w.byte(UInt8(ascii: ":"))
            w.value(v)
        }
        w.byte(UInt8(ascii: "}"))
        return w.bytes
    }
}
