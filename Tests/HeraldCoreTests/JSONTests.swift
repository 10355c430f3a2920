import HeraldCore
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
}

@Suite("Device tokens")
struct DeviceTokenTests {
    @Test("hex parses case-insensitively and round-trips")
    func hex() throws {
        let t = try DeviceToken(hex: "00FFaa10" + String(repeating: "ab", count: 28))
        #expect(t.count == 32)
        #expect(t.bytes.prefix(4) == [0x00, 0xFF, 0xAA, 0x10])
        #expect(t.hex == "00ffaa10" + String(repeating: "ab", count: 28))
        #expect(t == DeviceToken(bytes: t.bytes))
    }

    @Test("bad hex is rejected", arguments: ["", "abc", "zz", "0g", " 00", String(repeating: "00", count: 600)])
    func bad(hex: String) {
        #expect(throws: TokenError.self) { try DeviceToken(hex: hex) }
    }

    @Test("redacted form never shows the whole token")
    func redacted() throws {
        let t = try DeviceToken(hex: String(repeating: "0123456789abcdef", count: 4))
        #expect(t.description == "0123…cdef")
        #expect(!"\(t)".contains(t.hex))
    }

    @Test("tokens longer than 32 bytes work too")
    func long() {
        let bytes = (0..<100).map { UInt8($0) }
        let t = DeviceToken(bytes: bytes)
        #expect(t.count == 100 && t.bytes == bytes)
    }
}

@Suite("Bounded channel")
struct BoundedChannelTests {
    @Test("delivers every element once, in order, with a slow consumer")
    func fifo() async {
        let c = BoundedChannel<Int>(capacity: 3)
        let producer = Task {
            for i in 0..<2000 { await c.send(i) }
            c.close()
        }
        var got: [Int] = []
        while let x = await c.receive() {
            got.append(x)
            if x % 100 == 0 { await Task.yield() }
            #expect(c.bufferedCount <= 3)
        }
        await producer.value
        #expect(got == Array(0..<2000))
    }

    @Test("many producers, one consumer: nothing lost or duplicated")
    func multiProducer() async {
        let c = BoundedChannel<Int>(capacity: 2)
        let producers = Task {
            await withTaskGroup(of: Void.self) { g in
                for p in 0..<4 { g.addTask { for i in 0..<500 { await c.send(p * 1000 + i) } } }
            }
            c.close()
        }
        var got: [Int] = []
        while let x = await c.receive() { got.append(x) }
        await producers.value
        var expected: [Int] = []
        for p in 0..<4 { for i in 0..<500 { expected.append(p * 1000 + i) } }
        #expect(got.sorted() == expected)
    }
}

@Suite("Configuration nodes")
struct ConfigNodeTests {
    @Test("unknown keys are errors naming the key and file")
    func unknownKey() throws {
        let o = try #require(try JSONParser.parse(#"{"a":1,"nested":{"b":2,"typo":3}}"#).objectValue)
        let root = ConfigNode(file: "herald.json", object: o)
        _ = try root.int("a")
        let nested = try root.child("nested")
        _ = try nested.int("b")
        #expect(throws: ConfigError(file: "herald.json", key: "nested.typo", message: "unknown key")) { try root.finish() }
    }

    @Test("bad values name the key")
    func badValue() throws {
        let o = try #require(try JSONParser.parse(#"{"n":"x","r":500}"#).objectValue)
        let root = ConfigNode(file: "c.json", object: o)
        #expect(throws: ConfigError.self) { try root.int("n") }
        do {
            _ = try root.int("r", in: 1...100)
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "c.json: r: must be from 1 to 100, got 500")
        }
    }
}
