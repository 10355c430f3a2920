import HeraldJSON
import PropertyBased
import Testing

@Suite("Strict JSON")
struct JSONTests {
    @Test("valid texts parse and re-emit compactly", arguments: [
        (#"{"aps" : {"alert":"Hi", "badge": 0}, "x":[1, -2.5e3, true, null]}"#, #"{"aps":{"alert":"Hi","badge":0},"x":[1,-2.5e3,true,null]}"#),
        (#" "\u00e9\ud83d\ude00\n\"\\\/" "#, "\"é😀\\n\\\"\\\\/\""),
        ("[]", "[]"),
        ("{}", "{}"),
        ("0", "0"),
        ("-0.0", "-0.0"),
        (#""\u0001""#, #""\u0001""#),
    ])
    func roundTrip(input: String, compact: String) throws {
        let v = try JSONParser.parse(input)
        #expect(v.compactText == compact)
    }

    @Test("invalid texts are rejected with a position", arguments: [
        "{\"a\":1,}", "[1,]", "01", "1.", "-", "+1", "{'a':1}", "\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"",
        "{\"a\":1 \"b\":2}", "{\"a\":1,\"a\":2}", "tru", "nul", "[1] x", "\"\u{01}\"", "", "{\"a\"}", "1e", "[", "{\"a\":",
    ])
    func invalid(input: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(input) }
    }

    @Test("invalid UTF-8 is rejected", arguments: [
        [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22],
        [0x22, 0x80, 0x22], [0x22, 0xF0, 0x8F, 0xBF, 0xBF, 0x22],
    ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        #expect(throws: JSONError.self) { try JSONParser.parse(bytes) }
        #expect(throws: JSONError.self) { try bytes.withUnsafeBytes { try JSONParser.validate($0) } }
    }

    @Test("errors name line and column")
    func position() {
        do {
            _ = try JSONParser.parse("{\n  \"a\": tru\n}")
            Issue.record("expected an error")
        } catch {
            #expect(error.line == 2)
            #expect(error.column == 8)
        }
    }

    @Test("nesting is bounded")
    func depth() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONError.self) { try JSONParser.parse(deep) }
        #expect(throws: JSONError.self) { try Array(deep.utf8).withUnsafeBytes { try JSONParser.validate($0) } }
    }

    @Test("validate finds a top-level aps object without building values", arguments: [
        (#"{"aps":{"alert":"x"}}"#, true, true),
        (#"{"x":{"aps":{}},"aps":{}}"#, true, true),
        (#"{"x":{"aps":{}}}"#, true, false),
        (#"{"aps":"nope"}"#, true, false),
        (#"[{"aps":{}}]"#, false, false),
        (#"{"ap\u0073":{}}"#, true, false),
    ])
    func validate(text: String, isObject: Bool, hasAPS: Bool) throws {
        let shape = try Array(text.utf8).withUnsafeBytes { try JSONParser.validate($0) }
        #expect(shape.isObject == isObject)
        #expect(shape.hasAPSObject == hasAPS)
    }

    @Test("doubles are written without exponents", arguments: [
        (0.5, "0.5"), (1.0, "1"), (0.00001, "0.00001"), (1e-7, "0.0000001"), (0.1, "0.1"), (-2.0, "-2"), (1e20, "100000000000000000000"),
        (123.456, "123.456"),
    ])
    func doubles(value: Double, text: String) {
        #expect(JSONNumber(value)?.text == text)
        #expect(Double(JSONNumber(value)!.text) == value)
    }

    @Test("any string survives writing and parsing back")
    func stringRoundTrip() async {
        // Scalars from the control characters to the supplementary planes (surrogates map to "?").
        let scalars = Gen<UInt32>.value(in: 0...0x2FFFF).map { Character(Unicode.Scalar($0) ?? "?") }
        await propertyCheck(count: 300, input: scalars.string(of: 0...40)) { s in
            var w = JSONWriter()
            w.string(s)
            let back = try? JSONParser.parse(w.bytes)
            #expect(back == .string(s))
            let expectedSize = JSONWriter.escapedSize(of: s) + 2
            #expect(w.bytes.count == expectedSize)
        }
    }

    @Test("duplicate keys are found in small objects (searched in place) and large ones (a set), wherever the second copy falls", arguments: [1, 2, 15, 16, 17, 40])
    func duplicateKeysAtEverySize(_ keys: Int) throws {
        let members = (0..<keys).map { #""k\#($0)":\#($0)"# }
        let clean = try JSONParser.parse(Array(("{" + members.joined(separator: ",") + "}").utf8))
        guard case .object(let o) = clean else { Issue.record("not an object"); return }
        #expect(o.count == keys)
        for repeated in Set([0, keys / 2, keys - 1]) {
            let text = "{" + members.joined(separator: ",") + #","k\#(repeated)":true}"#
            #expect(throws: JSONError.self, "k\(repeated) twice in \(keys) keys") { try JSONParser.parse(Array(text.utf8)) }
        }
        // Keys equal as Unicode text (é precomposed and decomposed) are duplicates at any size, as before.
        let filler = (0..<keys).map { #""f\#($0)":0"# }.joined(separator: ",")
        #expect(throws: JSONError.self) { try JSONParser.parse(Array(("{" + filler + ",\"caf\u{E9}\":1,\"cafe\u{301}\":2}").utf8)) }
    }
}
