/// A JSON value that keeps object keys in their original order.
///
/// Numbers keep the text they were written with (`JSONNumber`), so a payload
/// passed through Herald is re-emitted with the same digits, never through a
/// `Double` round trip.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public static func int(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var numberValue: JSONNumber? { if case .number(let n) = self { return n } else { return nil } }
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// A JSON number, stored as its canonical text (RFC 8259 grammar).
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number's text, valid JSON number grammar.
    public let text: String

    /// Wraps text already known to be a valid JSON number.
    public init(validatedText: String) { self.text = validatedText }
    public init(_ value: Int) { self.text = String(value) }

    /// A finite `Double` written without exponent surprises: integers without
    /// a fraction, others in the shortest form that round-trips, never `1e-05`.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        if value == value.rounded(.towardZero) && abs(value) < 0x1p63 {
            // Integers without a fraction (Swift would write 1e15 as "1000000000000000.0").
            self.text = String(Int64(value))
            return
        }
        let shortest = "\(value)"
        if !shortest.contains("e") {
            self.text = shortest
            return
        }
        // Expand exponent forms into plain decimal text (integers ≥ 2^63 come out without a fraction).
        self.text = JSONNumber.expandExponent(shortest)
    }

    static func expandExponent(_ s: String) -> String {
        var negative = false
        var body = Substring(s)
        if body.first == "-" { negative = true; body = body.dropFirst() }
        let parts = body.split(separator: "e")
        let mantissa = parts[0]
        let exponent = Int(parts[1]) ?? 0
        let pieces = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        let intPart = String(pieces[0])
        let fracPart = pieces.count > 1 ? String(pieces[1]) : ""
        var digits = intPart + fracPart
        var point = intPart.count + exponent
        if point <= 0 {
            digits = String(repeating: "0", count: -point + 1) + digits
            point = 1
        } else if point > digits.count {
            digits += String(repeating: "0", count: point - digits.count)
        }
        var intDigits = String(digits.prefix(point))
        var frac = String(digits.dropFirst(point))
        while frac.hasSuffix("0") { frac.removeLast() }
        while intDigits.count > 1 && intDigits.hasPrefix("0") { intDigits.removeFirst() }
        let core = frac.isEmpty ? intDigits : intDigits + "." + frac
        return negative ? "-" + core : core
    }

    /// The value as an integer, when the text is an integer that fits.
    public var intValue: Int? { Int(text) }
    /// The value as a `Double` (may lose precision).
    public var doubleValue: Double? { Double(text) }
    /// Whether the text has no fraction and no exponent.
    public var isInteger: Bool { !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) }

    public var description: String { text }
}

/// A JSON object whose keys keep their order. Duplicate keys are rejected by the parser.
public struct JSONObject: Sendable, Hashable, Sequence {
    public private(set) var entries: [(key: String, value: JSONValue)] = []

    public init() {}
    public init(_ entries: [(String, JSONValue)]) {
        for (k, v) in entries { self[k] = v }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public var keys: [String] { entries.map(\.key) }

    public subscript(key: String) -> JSONValue? {
        get { entries.first(where: { $0.key == key })?.value }
        set {
            if let i = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[i].value = newValue } else { entries.remove(at: i) }
            } else if let newValue {
                entries.append((key, newValue))
            }
        }
    }

    /// Appends without checking for an existing key (the parser checks).
    mutating func appendUnchecked(_ key: String, _ value: JSONValue) { entries.append((key, value)) }

    /// Whether `key` is one of the keys (a linear search: for small objects).
    func containsKey(_ key: String) -> Bool {
        for i in entries.indices where entries[i].key == key { return true }
        return false
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { entries.makeIterator() }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.entries.count == b.entries.count && zip(a.entries, b.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(entries.count)
        for e in entries { hasher.combine(e.key); hasher.combine(e.value) }
    }

    /// Semantic equality: the same keys with semantically equal values, in any order.
    public func semanticallyEquals(_ other: JSONObject) -> Bool {
        guard count == other.count else { return false }
        for (k, v) in entries {
            guard let o = other[k], v.semanticallyEquals(o) else { return false }
        }
        return true
    }
}

extension JSONValue {
    /// Semantic equality: objects compare regardless of key order, numbers by value.
    public func semanticallyEquals(_ other: JSONValue) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.number(a), .number(b)): return a.text == b.text || (a.doubleValue != nil && a.doubleValue == b.doubleValue)
        case let (.array(a), .array(b)): return a.count == b.count && zip(a, b).allSatisfy { $0.semanticallyEquals($1) }
        case let (.object(a), .object(b)): return a.semanticallyEquals(b)
        default: return false
        }
    }
}
