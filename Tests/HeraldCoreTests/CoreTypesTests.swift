import HeraldCore
import HeraldJSON
import Testing

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
