import HeraldJSON

/// The one encoder of an outcome as JSON: the outcome lines `herald send`
/// writes, the webhook's records, `herald serve`'s `GET` answers.
extension OutcomeRecord {
    /// This record's JSON object (no newline).
    public var jsonLine: [UInt8] {
        var w = JSONWriter(capacity: 160)
        writeJSON(to: &w)
        return w.bytes
    }

    /// Appends this record's JSON object to `w`: `id`, `line` (named `lineKey`:
    /// `row` for a queue's rows) and `token` (in hex) when known, `outcome` with
    /// its `status` and `reason` (and `code`), the `app` it was for, HTTP/2's identifiers;
    /// `possibleDuplicate` when it may have been sent twice.
    public func writeJSON(to w: inout some JSONOutput, lineKey: StaticString = "line") {
        write(to: &w, lineKey: lineKey)
    }

    /// ``writeJSON(to:lineKey:)`` into the fixed-size writer outcome lines are written through,
    /// compiled for it here: the generic one, called from another module, wrote a byte through
    /// a protocol witness (some 3% of `herald send`'s time on one core).
    public func writeJSON(to w: inout FixedJSONWriter, lineKey: StaticString = "line") {
        write(to: &w, lineKey: lineKey)
    }

    /// ``writeJSON(to:lineKey:)`` into a growable writer, compiled for it.
    public func writeJSON(to w: inout JSONWriter, lineKey: StaticString = "line") {
        write(to: &w, lineKey: lineKey)
    }

    @inline(__always) private func write(to w: inout some JSONOutput, lineKey: StaticString) {
        w.byte(UInt8(ascii: "{"))
        if let id { w.key("id"); w.int(Int(id)); w.byte(UInt8(ascii: ",")) }
        if let line { w.key(lineKey); w.int(line); w.byte(UInt8(ascii: ",")) }
        if let token {
            // Hex straight into the writer (hex needs no escaping): no String made a record.
            w.key("token")
            w.byte(UInt8(ascii: "\""))
            token.withUnsafeBytes { w.hex($0) }
            w.raw("\",")
        }
        w.key("outcome")
        w.string(outcome.kind.rawValue)
        switch outcome {
        case .rejected(let s):
            w.raw(",\"status\":"); w.int(s.rawValue)
            w.raw(",\"reason\":"); w.string(s.description)
        case .dropped(let reason), .failed(let reason), .cancelled(let reason):
            w.raw(",\"reason\":"); w.string(reason.message)
            if reason.code != .unspecified { w.raw(",\"code\":"); w.string(reason.code.name) }
        case .accepted, .suppressed: break
        }
        if let app { w.raw(",\"app\":"); w.string(app) }
        if let a = apnsID { w.raw(",\"apnsId\":"); w.string(a) }
        if let u = apnsUniqueID { w.raw(",\"apnsUniqueId\":"); w.string(u) }
        if let c = apnsChannelID { w.raw(",\"channelId\":"); w.string(c) }
        if let t = apnsUnregisteredAt { w.raw(",\"timestamp\":"); w.int(Int(t)) }
        if possibleDuplicate { w.raw(",\"possibleDuplicate\":true") }
        w.byte(UInt8(ascii: "}"))
    }
}
