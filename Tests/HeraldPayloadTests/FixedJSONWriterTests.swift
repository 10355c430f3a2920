import HeraldCore
import PropertyBased
import Testing

@testable import HeraldPayload
import HeraldJSON

@Suite("FixedJSONWriter writes what JSONWriter writes")
struct FixedJSONWriterTests {
    func both(_ body: (inout JSONWriter) -> Void, _ body2: (inout FixedJSONWriter) -> Void, capacity: Int = 4096) -> ([UInt8], [UInt8]?) {
        var j = JSONWriter()
        body(&j)
        var overflowed = false
        let p = [UInt8](unsafeUninitializedCapacity: capacity) { buf, n in
            var w = FixedJSONWriter(base: buf.baseAddress!, capacity: capacity)
            body2(&w)
            overflowed = w.overflowed
            n = overflowed ? 0 : w.count
        }
        return (j.bytes, overflowed ? nil : p)
    }

    @Test("property: strings, integers, numbers and nested values")
    func same() async {
        await propertyCheck(count: 300, input: textGen, Gen.int(in: Int.min...Int.max), Gen.double(in: -1e6...1e6)) { s, n, d in
            let v = JSONValue.object(JSONObject([
                (s, .array([.string(s), .int(n), .number(JSONNumber(d)!), .null, .bool(true), .bool(false), .object(JSONObject())])),
                ("k", .object(JSONObject([("", .array([])), ("n", .int(n))]))),
            ]))
            let (a, b) = both({ w in w.string(s); w.int(n); w.int(-n / 3); w.value(v); w.raw("x") },
                              { w in w.string(s); w.int(n); w.int(-n / 3); w.value(v); w.raw("x") })
            #expect(a == b)
        }
    }

    @Test("too small a buffer: reported as overflowed, never written past")
    func overflow() {
        let text = "0123456789\"\u{1}0123456789"  // 30 bytes written
        for capacity in 1...31 {
            let storage = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity + 16)
            defer { storage.deallocate() }
            storage.initialize(repeating: 0xEE, count: capacity + 16)
            var w = FixedJSONWriter(base: storage, capacity: capacity)
            w.string(text)
            w.int(-1234567)
            w.raw("true")
            #expect(w.overflowed == (capacity < 30 + 8 + 4), "capacity \(capacity)")
            #expect((capacity..<(capacity + 16)).allSatisfy { storage[$0] == 0xEE }, "wrote past capacity \(capacity)")
        }
        let (a, b) = both({ $0.string(text) }, { $0.string(text) }, capacity: 30)
        #expect(a.count == 30 && b == a)
    }

    @Test("the builder's overflow fallback gives the same payload as a roomy buffer")
    func builderFallback() throws {
        var aps = APS()
        aps.alert = Alert(body: "hi")
        let big = String(repeating: "\"é\u{1}", count: 300)
        var r = request(aps, custom: JSONObject([("big", .array([.string(big), .string(big)]))]))
        let bytes = try APSPayloadBuilder().build(&r)
        var w = JSONWriter()
        APSPayloadBuilder.write(r, into: &w)
        #expect(bytes == w.bytes)
        #expect(try JSONParser.parse(bytes).objectValue?["big"] == .array([.string(big), .string(big)]))
    }
}
