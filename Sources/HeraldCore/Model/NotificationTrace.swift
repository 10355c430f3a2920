import HeraldJSON

/// The trace a notification belongs to (issue 31): the W3C Trace Context `traceparent` of the
/// span that handed it to Herald (a caller's request, `herald serve`'s intake), which its own
/// spans continue wherever it is sent from (another process, another host: a queue row carries
/// it in its text), and when it was queued, where its queue wait starts.
///
/// The request line's keys `traceparent` and `enqueued-at`. Herald's model holds the context as
/// its numbers (every request of a traced `POST` carries one: a copy is a few words, no shared
/// text whose count threads would contend for) and makes no span itself: `HeraldTracing` turns a
/// notification's passage into spans on whatever swift-distributed-tracing tracer the process
/// set up, or writes them into OTLP itself.
public struct NotificationTrace: Sendable, Hashable {
    /// The trace id's 16 bytes as two numbers, the first half (most significant byte first) in `traceHigh`.
    public let traceHigh: UInt64
    public let traceLow: UInt64
    /// The parent span's id (its 8 bytes, most significant first).
    public let parentSpan: UInt64
    /// The format's version (00; a later one's fields past these four are not kept).
    public let version: UInt8
    /// The trace flags (bit 0: sampled).
    public let flags: UInt8
    /// When it was handed to a queue, in milliseconds since the UNIX epoch (the request's
    /// `enqueued-at`, written by the intake that queued it); nil when it was not queued.
    public var enqueuedAt: Int64?

    /// A trace context from a `traceparent` value; nil when the value is not one (W3C Trace
    /// Context, level 1: two hex digits of version other than `ff`, 32 of trace id and 16 of
    /// parent id, neither all zeros, two of flags; a version above `00` may add fields).
    public init?(traceparent: String, enqueuedAt: Int64? = nil) {
        var text = traceparent
        guard let parsed = text.withUTF8({ Self.parse($0) }) else { return nil }
        (version, traceHigh, traceLow, parentSpan, flags) = parsed
        self.enqueuedAt = enqueuedAt
    }

    /// `version-traceid-parentid-flags`, lowercase hex, as W3C Trace Context writes it
    /// (`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`).
    public var traceparent: String {
        String(unsafeUninitializedCapacity: 55) { out in
            var at = 0
            func put(_ v: UInt64, digits: Int) {
                for k in stride(from: digits - 1, through: 0, by: -1) {
                    out[at] = Hex.digit(UInt8(truncatingIfNeeded: v >> (4 * UInt64(k))) & 0xF)
                    at += 1
                }
            }
            func dash() {
                out[at] = UInt8(ascii: "-")
                at += 1
            }
            put(UInt64(version), digits: 2)
            dash()
            put(traceHigh, digits: 16)
            put(traceLow, digits: 16)
            dash()
            put(parentSpan, digits: 16)
            dash()
            put(UInt64(flags), digits: 2)
            return at
        }
    }

    /// The trace id: 32 hex digits.
    public var traceID: String { String(traceparent.utf8.dropFirst(3).prefix(32))! }
    /// The parent span's id: 16 hex digits.
    public var parentID: String { String(traceparent.utf8.dropFirst(36).prefix(16))! }
    /// Whether the caller recorded its span (the flags' `sampled` bit): a parent-based sampler
    /// records this notification's spans only then.
    public var isSampled: Bool { flags & 1 == 1 }

    /// Whether `other` is the same trace context (its `enqueued-at` aside).
    @inline(__always) public func sameContext(as other: NotificationTrace) -> Bool {
        parentSpan == other.parentSpan && traceLow == other.traceLow && traceHigh == other.traceHigh && flags == other.flags && version == other.version
    }

    /// The numbers of a valid value: version, trace id's halves, parent id, flags.
    static func parse(_ u: UnsafeBufferPointer<UInt8>) -> (UInt8, UInt64, UInt64, UInt64, UInt8)? {
        guard u.count >= 55, u[2] == UInt8(ascii: "-"), u[35] == UInt8(ascii: "-"), u[52] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> UInt64? {
            var v: UInt64 = 0
            for k in range {
                guard Self.isLowerHex(u[k]), let n = Hex.nibble(u[k]) else { return nil }
                v = v << 4 | UInt64(n)
            }
            return v
        }
        guard let version = number(0..<2), version != 0xFF, let high = number(3..<19), let low = number(19..<35), high | low != 0,
            let parent = number(36..<52), parent != 0, let flags = number(53..<55)
        else { return nil }
        // Version 00 has exactly these fields; a later one may add some after a dash.
        if version == 0 { guard u.count == 55 else { return nil } } else { guard u.count == 55 || u[55] == UInt8(ascii: "-") else { return nil } }
        return (UInt8(version), high, low, parent, UInt8(flags))
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
