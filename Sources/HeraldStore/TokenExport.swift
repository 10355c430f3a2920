import HeraldCore
import HeraldJSON

/// The token store's JSON Lines form, written by `herald tokens export` and
/// read by `herald tokens import`, one row per line:
///
/// `{"token":"<hex>","topic":"com.example.app","registered":1700000100,"registeredSource":"registration","unregistered":1700000000,"unregisteredSource":"http-410"}`
///
/// `topic` is absent for "every topic"; each time comes with its source, and
/// either may be absent. Import also reads the journal lines of Herald's
/// earlier file store: `{"token":"<hex>","dead":…}` and `{"token":"<hex>","registered":…}`.
public enum TokenExport {
    /// One row as a line (without the newline); `shortenTokens` keeps the first 8 hex digits (for display).
    /// `suppressed`: add whether the row suppresses requests (`herald tokens list`, whichever way
    /// it prints tokens; an export leaves it out: it is derived, not imported).
    public static func line(_ r: TokenRecord, shortenTokens: Bool = false, suppressed: Bool = false, to w: inout JSONWriter) {
        w.raw("{\"token\":")
        w.string(shortenTokens ? String(r.token.hex.prefix(8)) + "…" : r.token.hex)
        if let t = r.topic { w.raw(",\"topic\":"); w.string(t) }
        if let t = r.registeredAt { w.raw(",\"registered\":"); w.int(Int(t)) }
        if let s = r.registeredSource { w.raw(",\"registeredSource\":"); w.string(s) }
        if let t = r.unregisteredAt { w.raw(",\"unregistered\":"); w.int(Int(t)) }
        if let s = r.unregisteredSource { w.raw(",\"unregisteredSource\":"); w.string(s) }
        if suppressed { w.raw(",\"suppressed\":"); w.raw(r.isSuppressed ? "true" : "false") }
        w.raw("}")
    }

    /// The events one line holds; errors name the line and what is wrong.
    public static func events(_ bytes: UnsafeRawBufferPointer, line: Int) throws(TokenExportError) -> [TokenEvent] {
        func fail(_ m: String) -> TokenExportError { TokenExportError(line: line, message: m) }
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw fail(error.description) }
        guard case .object(let o) = value else { throw fail("expected a JSON object") }
        guard let hex = o["token"]?.stringValue else { throw fail("missing \"token\" (hex)") }
        let token: DeviceToken
        do { token = try DeviceToken(hex: hex) } catch { throw fail("\"token\": \(error)") }
        var topic: String?
        var events: [TokenEvent] = []
        func time(_ key: String) throws(TokenExportError) -> UInt32? {
            guard let v = o[key] else { return nil }
            guard let n = v.numberValue?.intValue, let t = UInt32(exactly: n), t > 0 else { throw fail("\"\(key)\" must be UNIX seconds") }
            return t
        }
        func source(_ key: String) throws(TokenExportError) -> TokenEventSource {
            guard let v = o[key] else { return .imported }
            guard let s = v.stringValue, !s.isEmpty else { throw fail("\"\(key)\" must be a string") }
            return TokenEventSource(rawValue: s)
        }
        for key in o.keys where !["token", "topic", "registered", "registeredSource", "unregistered", "unregisteredSource", "dead", "suppressed"].contains(key) {
            throw fail("unknown key \"\(key)\"")
        }
        if let t = o["topic"] {
            guard let s = t.stringValue else { throw fail("\"topic\" must be a string") }
            topic = s.isEmpty ? nil : s
        }
        if let t = try time("registered") {
            events.append(TokenEvent(token: token, topic: topic, kind: .registered, time: t, source: try source("registeredSource")))
        }
        var unregistered = try time("unregistered")
        if unregistered == nil { unregistered = try time("dead") }
        if let t = unregistered {
            events.append(TokenEvent(token: token, topic: topic, kind: .unregistered, time: t, source: try source("unregisteredSource")))
        }
        if events.isEmpty { throw fail("expected \"registered\" or \"unregistered\" UNIX seconds") }
        return events
    }
}

/// A line of a token export that cannot be read.
public struct TokenExportError: Error, Sendable, Hashable, CustomStringConvertible {
    public let line: Int
    public let message: String
    public var description: String { "line \(line): \(message)" }
}
