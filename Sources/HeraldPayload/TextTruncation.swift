import HeraldCore
import HeraldJSON

/// Cutting text to a byte budget, measured as the text takes inside a JSON
/// string (escapes included), on a grapheme-cluster boundary.
public enum TextTruncation {
    /// The mark appended to shortened text: U+2026, 3 bytes of UTF-8, never escaped.
    public static let ellipsis = "\u{2026}"
    /// Its size in bytes inside a JSON string.
    public static let ellipsisSize = 3

    /// The longest prefix of `text` that ends on a grapheme-cluster boundary
    /// and takes at most `budget` bytes once escaped for JSON.
    ///
    /// Runs in one pass over the bytes up to the cut (eight at a time where
    /// nothing needs escaping), then steps back to the nearest cluster
    /// boundary; the text is not re-encoded per attempt.
    public static func longestPrefix(of text: String, fittingEscapedBytes budget: Int) -> Substring {
        cut(text, budget: budget).prefix
    }

    /// `prefix` followed by "…", in one allocation (not `prefix + "…"`, which
    /// would count the prefix's characters first).
    static func appendingEllipsis(_ prefix: Substring) -> String {
        var s = ""
        s.reserveCapacity(prefix.utf8.count + ellipsisSize)
        s.append(contentsOf: prefix)  // a copy of valid UTF-8: no re-validation
        s.append(ellipsis)
        return s
    }

    /// ``longestPrefix(of:fittingEscapedBytes:)`` and the prefix's escaped size.
    static func cut(_ text: String, budget: Int) -> (prefix: Substring, escapedSize: Int) {
        let result = text.utf8.withContiguousStorageIfAvailable { buf -> (Substring, Int) in
            let raw = UnsafeRawBufferPointer(buf)
            let (fitting, used) = JSONWriter.escapedPrefix(utf8: raw, budget: budget)
            if fitting == raw.count { return (text[...], used) }
            let utf8 = text.utf8
            var cut = utf8.index(utf8.startIndex, offsetBy: fitting)
            var offset = fitting
            // Step back to a grapheme-cluster boundary (a scalar boundary first).
            while offset > 0 {
                if let boundary = String.Index(cut, within: text) {
                    // The prefix's escaped size: the fitting bytes' minus that of the bytes stepped over.
                    let dropped = JSONWriter.escapedSize(utf8: UnsafeRawBufferPointer(rebasing: raw[offset..<fitting]))
                    return (text[..<boundary], used - dropped)
                }
                utf8.formIndex(before: &cut)
                offset -= 1
            }
            return (text[..<text.startIndex], 0)
        }
        if let result { return result }
        var native = text  // bridged or otherwise non-contiguous: make it native UTF-8 first
        native.makeContiguousUTF8()
        return cut(native, budget: budget)
    }
}

/// An alert text field the `truncate` policy may shorten.
/// A struct with static members so more fields can be added.
public struct TruncatableField: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    init(_ name: String) { self.name = name }

    /// `alert.body` (or `alert` given as a plain string).
    public static let body = TruncatableField("body")
    /// `alert.subtitle`.
    public static let subtitle = TruncatableField("subtitle")
    /// `alert.title`.
    public static let title = TruncatableField("title")

    public static let all: [TruncatableField] = [.body, .subtitle, .title]
    public static func named(_ name: String) -> TruncatableField? { all.first { $0.name == name } }
    public var description: String { name }

    /// The field's text in `request` (structured or raw form), if present.
    public func text(in request: NotificationRequest) -> String? {
        if let raw = request.rawPayload {
            guard case .object(let top) = raw, case .object(let aps)? = top["aps"], let alert = aps["alert"] else { return nil }
            switch alert {
            case .string(let s): return self == .body ? s : nil
            case .object(let a): return a[name]?.stringValue
            default: return nil
            }
        }
        switch name {  // optional chains, so the alert is not copied
        case "body": return request.aps.alert?.body
        case "subtitle": return request.aps.alert?.subtitle
        case "title": return request.aps.alert?.title
        default: return nil
        }
    }

    /// Replaces the field's text in `request`; the field must be present.
    public func setText(_ text: String, in request: inout NotificationRequest) {
        if let raw = request.rawPayload {
            guard case .object(var top) = raw, case .object(var aps)? = top["aps"], let alert = aps["alert"] else { return }
            switch alert {
            case .string: aps["alert"] = .string(text)
            case .object(var a): a[name] = .string(text); aps["alert"] = .object(a)
            default: return
            }
            top["aps"] = .object(aps)
            request.rawPayload = .object(top)
            return
        }
        switch name {
        case "body": request.aps.alert?.body = text
        case "subtitle": request.aps.alert?.subtitle = text
        case "title": request.aps.alert?.title = text
        default: break
        }
    }
}
