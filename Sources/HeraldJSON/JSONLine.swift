/// Rounds `x` to `places` decimals, as text.
package func rounded(_ x: Double, _ places: Int) -> String {
    var m = 1.0
    for _ in 0..<places { m *= 10 }
    return String((x * m).rounded() / m)
}

/// One JSON object, printed as one line: what every command prints (bench
/// reports, `herald simulate`'s ports, summaries). Built with the one JSON
/// writer, so keys and strings are escaped whatever they hold.
package struct JSONLine {
    package init() {}
    var writer = JSONWriter(capacity: 256)

    package mutating func key(_ key: String) {
        writer.byte(writer.bytes.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
        writer.string(key)
        writer.byte(UInt8(ascii: ":"))
    }
    package mutating func add(_ key: String, _ value: Int) { self.key(key); writer.int(value) }
    package mutating func add(_ key: String, _ value: UInt64) { self.key(key); writer.int(Int(clamping: value)) }
    /// A number rounded to `places` decimals; `null` when it is not finite.
    package mutating func add(_ key: String, _ value: Double, places: Int = 1) {
        self.key(key)
        if value.isFinite { writer.bytes.append(contentsOf: rounded(value, places).utf8) } else { writer.raw("null") }
    }
    /// An array of numbers, each rounded to `places` decimals (`null` where not finite).
    package mutating func add(_ key: String, _ values: [Double], places: Int = 1) {
        self.key(key)
        writer.byte(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { writer.byte(UInt8(ascii: ",")) }
            if v.isFinite { writer.bytes.append(contentsOf: rounded(v, places).utf8) } else { writer.raw("null") }
        }
        writer.byte(UInt8(ascii: "]"))
    }
    package mutating func add(_ key: String, _ value: String) { self.key(key); writer.string(value) }
    package mutating func add(_ key: String, _ value: Bool) { self.key(key); writer.bool(value) }
    package mutating func add(_ key: String, _ object: JSONLine) { self.key(key); writer.bytes += object.bytes }
    /// An array of objects.
    package mutating func add(_ key: String, _ objects: [JSONLine]) {
        self.key(key)
        writer.byte(UInt8(ascii: "["))
        for (i, o) in objects.enumerated() {
            if i > 0 { writer.byte(UInt8(ascii: ",")) }
            writer.bytes += o.bytes
        }
        writer.byte(UInt8(ascii: "]"))
    }

    /// The object's bytes, without a newline.
    package var bytes: [UInt8] { writer.bytes.isEmpty ? Array("{}".utf8) : writer.bytes + [UInt8(ascii: "}")] }
    /// The object and a newline.
    package var line: String { String(decoding: bytes + [0x0A], as: UTF8.self) }

    /// Prints the object as one line on standard output.
    package func print() { Swift.print(line, terminator: "") }
}

