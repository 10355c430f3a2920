import HeraldJSON

/// The trace a notification belongs to (issue 31): the W3C Trace Context `traceparent` of the
/// span that handed it to Herald (a caller's request, `herald serve`'s intake), which its own
/// spans continue wherever it is sent from (another process, another host: a queue row carries
/// it in its text), and when it was queued, where its queue wait starts.
///
/// The request line's keys `traceparent` and `enqueued-at`. Herald's model holds it as text and
/// makes no span itself: `HeraldTracing` turns a notification's passage into spans on whatever
/// swift-distributed-tracing tracer the process set up.
public struct NotificationTrace: Sendable, Hashable {
    /// `version-traceid-parentid-flags`, lowercase hex, as W3C Trace Context writes it
    /// (`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`); validated.
    public let traceparent: String
    /// When it was handed to a queue, in milliseconds since the UNIX epoch (the request's
    /// `enqueued-at`, written by the intake that queued it); nil when it was not queued.
    public var enqueuedAt: Int64?

    /// A trace context from a `traceparent` value; nil when the value is not one (W3C Trace
    /// Context, level 1: two hex digits of version other than `ff`, 32 of trace id and 16 of
    /// parent id, neither all zeros, two of flags; a version above `00` may add fields).
    public init?(traceparent: String, enqueuedAt: Int64? = nil) {
        guard Self.isValid(traceparent) else { return nil }
        self.traceparent = traceparent
        self.enqueuedAt = enqueuedAt
    }

    /// The trace id: 32 hex digits.
    public var traceID: Substring { traceparent.dropFirst(3).prefix(32) }
    /// The parent span's id: 16 hex digits.
    public var parentID: Substring { traceparent.dropFirst(36).prefix(16) }
    /// Whether the caller recorded its span (the flags' `sampled` bit): a parent-based sampler
    /// records this notification's spans only then.
    public var isSampled: Bool {
        // Validated: at least 55 bytes, the flags' second digit at 54.
        guard let flags = traceparent.utf8.dropFirst(54).first else { return false }
        return Hex.nibble(flags).map { $0 & 1 == 1 } ?? false
    }

    static func isValid(_ text: String) -> Bool {
        let u = Array(text.utf8)
        guard u.count >= 55 else { return false }
        func hex(_ range: Range<Int>) -> Bool { range.allSatisfy { k in Self.isLowerHex(u[k]) } }
        func zeros(_ range: Range<Int>) -> Bool { range.allSatisfy { u[$0] == UInt8(ascii: "0") } }
        guard hex(0..<2), !(u[0] == UInt8(ascii: "f") && u[1] == UInt8(ascii: "f")),
            u[2] == UInt8(ascii: "-"), hex(3..<35), !zeros(3..<35), u[35] == UInt8(ascii: "-"),
            hex(36..<52), !zeros(36..<52), u[52] == UInt8(ascii: "-"), hex(53..<55)
        else { return false }
        // Version 00 has exactly these fields; a later one may add some after a dash.
        if u[0] == UInt8(ascii: "0") && u[1] == UInt8(ascii: "0") { return u.count == 55 }
        return u.count == 55 || u[55] == UInt8(ascii: "-")
    }

    static func isLowerHex(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))
    }
}

extension NotificationTrace {
    /// `text`, a request line (a JSON object), with the keys `traceparent` (unless `parent` is
    /// false: the line has its own) and `enqueued-at` (when set and `queued` is true) written
    /// first: what a queueing intake stores so the worker that sends the row continues the trace.
    public func written(into text: String, parent: Bool = true, queued: Bool = true) -> String {
        var keys: [String] = []
        if parent { keys.append("\"traceparent\":\"" + traceparent + "\"") }
        if queued, let enqueuedAt { keys.append("\"enqueued-at\":" + String(enqueuedAt)) }
        var utf8 = Array(text.utf8)
        guard !keys.isEmpty, let open = utf8.firstIndex(of: UInt8(ascii: "{")) else { return text }
        var written = keys.joined(separator: ",")
        // An object with keys of its own takes a comma after ours.
        let rest = utf8[(open + 1)...].first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
        if rest != UInt8(ascii: "}") { written += "," }
        utf8.insert(contentsOf: written.utf8, at: open + 1)
        return String(decoding: utf8, as: UTF8.self)
    }
}

extension IntakeBatch {
    /// The batch as an intake takes it under `trace` (the span of the call that brought it, such
    /// as `herald serve`'s `POST`), queued at `enqueuedAt` (milliseconds since the UNIX epoch):
    /// each request without a trace of its own joins that one, each gets its `enqueued-at`
    /// (unless its own trace has one), and the texts (an intake that stores them) say so, so
    /// whoever sends a request continues its trace.
    public mutating func join(_ trace: NotificationTrace, enqueuedAt: Int64) {
        for i in requests.indices {
            let own = requests[i].trace
            var joined = own ?? trace
            if joined.enqueuedAt == nil { joined.enqueuedAt = enqueuedAt }
            requests[i].trace = joined
            // The text has what its request read from it: the rest is written in.
            if i < texts.count { texts[i] = joined.written(into: texts[i], parent: own == nil, queued: own?.enqueuedAt == nil) }
        }
    }
}
