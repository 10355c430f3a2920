@testable import HeraldCore
import HeraldJSON
import Synchronization
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
    func long() throws {
        let bytes = (0..<100).map { UInt8($0) }
        let t = DeviceToken(bytes: bytes)
        #expect(t.count == 100 && t.bytes == bytes)
        #expect(try DeviceToken(hex: t.hex) == t)
        // Hex read straight into the inline words, at every length up to 32 bytes and one past.
        for n in 1...33 {
            let b = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(try DeviceToken(hex: DeviceToken(bytes: b).hex.uppercased()) == DeviceToken(bytes: b))
        }
    }

    @Test("a bad hex digit is reported at its offset, from a String and from a Substring")
    func badDigitOffset() {
        let good = String(repeating: "ab", count: 32)
        for offset in [0, 1, 31, 63] {
            var chars = Array(good)
            chars[offset] = "z"
            let text = String(chars)
            #expect(throws: TokenError(.notHex(offset: offset))) { try DeviceToken(hex: text) }
            #expect(throws: TokenError(.notHex(offset: offset))) { try DeviceToken(hex: text[...]) }
        }
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

    /// Where an array's elements live: the same address after a mutation means it was not copied.
    static func storage(_ a: [Int]) -> UInt { a.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }

    static func batch() -> [Int] {
        var a: [Int] = []
        a.reserveCapacity(64)
        a.append(contentsOf: 0..<10)
        return a
    }

    @Test("a sent array reaches its receiver unshared, buffered or handed over: mutating it copies nothing")
    func sendConsumes() async {
        // Buffered: the sender returns before anyone receives.
        let c = BoundedChannel<[Int]>(capacity: 1)
        let a = Self.batch()
        let address = Self.storage(a)
        await c.send(consume a)
        var got = await c.receive()!
        got[0] = 99
        got.append(10)
        #expect(Self.storage(got) == address)

        // Parked: the channel is full, the sender waits with its element.
        await c.send(Self.batch())
        let parkedAddress = Mutex<UInt>(0)
        let sender = Task {
            // Made inside the task: a batch the closure captured would stay referenced by the closure.
            let b = Self.batch()
            parkedAddress.withLock { $0 = Self.storage(b) }
            await c.send(consume b)
        }
        while c.state.withLock({ $0.waitingSenders.isEmpty }) { await Task.yield() }
        _ = await c.receive()
        var parked = await c.receive()!
        parked[0] = 99
        #expect(Self.storage(parked) == parkedAddress.withLock { $0 })
        await sender.value

        // Handed over: the receiver was waiting first.
        let receiver = Task { () -> Bool in
            guard var x = await c.receive() else { return false }
            let before = Self.storage(x)
            x[0] = 99
            return Self.storage(x) == before
        }
        while c.state.withLock({ $0.waitingReceivers.isEmpty }) { await Task.yield() }
        await c.send(Self.batch())
        #expect(await receiver.value)
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

@Suite("Rarely used keys, kept out of line")
struct OutOfLineKeyTests {
    @Test("a copy changed in a rarely used key leaves the original alone; set then cleared equals never set")
    func copyOnWrite() {
        var a = Alert(body: "hi")
        a.titleLocKey = "T"
        var b = a
        b.titleLocKey = "U"
        b.subtitleLocArgs = ["x"]
        #expect(a.titleLocKey == "T" && a.subtitleLocArgs == nil)
        #expect(b.titleLocKey == "U" && b.subtitleLocArgs == ["x"])

        var cleared = Alert(body: "hi")
        cleared.launchImage = "l.png"
        #expect(!cleared.isBodyOnly)
        cleared.launchImage = nil
        #expect(cleared == Alert(body: "hi"))
        #expect(cleared.hashValue == Alert(body: "hi").hashValue)
        #expect(cleared.isBodyOnly)

        var r = request(1)
        var s = r
        s.pushType = .background
        s.aps.interruptionLevel = "passive"
        #expect(r.pushType == nil && r.aps.interruptionLevel == nil)
        r.collapseID = "c"
        r.collapseID = nil
        #expect(r == request(1))
    }

    @Test("reading a rarely used key, or setting one to nil that was never set, makes no box; clearing the localization keys drops a box nothing else uses")
    func noBoxUntilNeeded() {
        var a = Alert(body: "hi")
        #expect(a.launchImage == nil && a.actionLocKey == nil && a.titleLocArgs == nil)
        a.titleLocKey = nil
        a.subtitleLocArgs = nil
        #expect(a.more.storage == nil)
        var aps = APS()
        #expect(aps.interruptionLevel == nil && !aps.inputPushToken && aps.contentState == nil)
        aps.inputPushToken = false
        aps.relevanceScore = nil
        #expect(aps.more.storage == nil)
        var r = request(1)
        r.apnsID = nil
        #expect(r.headers.storage == nil && r.pushType == nil && !r.isBroadcast)

        // An explicit null action-loc-key is kept apart from an absent one.
        var null = Alert(body: "hi")
        null.actionLocKey = .some(nil)
        #expect(null.actionLocKey == .some(nil) && !null.isBodyOnly)

        var localized = Alert()
        localized.locKey = "K"
        localized.locArgs = ["a"]
        localized.titleLocKey = "T"
        localized.titleLocArgs = ["b"]
        let shared = localized
        localized.body = "rendered"
        localized.clearLocalizationKeys()
        #expect(localized.more.storage == nil && localized == Alert(body: "rendered") && localized.isBodyOnly)
        #expect(shared.titleLocKey == "T" && shared.titleLocArgs == ["b"] && shared.locKey == "K")

        var keeps = shared
        keeps.actionLocKey = "PLAY"
        keeps.clearLocalizationKeys()
        #expect(keeps.actionLocKey == "PLAY" && keeps.titleLocKey == nil && keeps.titleLocArgs == nil && keeps.locKey == nil)
        #expect(shared.titleLocKey == "T")
    }
}

@Suite("Outcome ledger, whole batches")
struct LedgerBatchTests {
    static func envelopes(_ n: Int) -> [Envelope] { (0..<n).map { Envelope(sequence: UInt64($0), request: request(UInt32($0))) } }

    @Test("a batch recorded as one outcome: counted alone, and as records for an observer")
    func recordBatch() {
        let counting = OutcomeLedger(tracksIdentity: false)
        let batch = Self.envelopes(10)
        counting.enter(batch.lazy.map(\.sequence), count: 10)
        counting.record(batch, as: .accepted)
        #expect(counting.snapshot.accepted == 10 && counting.snapshot.isBalanced)

        let collector = OutcomeCollector()
        let observed = OutcomeLedger(tracksIdentity: false, observers: [collector])
        observed.enter(batch.lazy.map(\.sequence), count: 10)
        observed.record(batch, as: .failed("refused"))
        #expect(observed.snapshot.failed == 10 && observed.snapshot.isBalanced)
        #expect(collector.records.map(\.id) == (0..<10).map { UInt32($0) })
        #expect(collector.records.allSatisfy { $0.outcome == .failed("refused") && $0.token == token(UInt8($0.id!)) })

        let tracked = OutcomeLedger()
        tracked.enter(batch.lazy.map(\.sequence), count: 10)
        tracked.record(batch, as: .accepted)
        tracked.record(Array(batch.prefix(1)), as: .accepted)
        #expect(tracked.snapshot.violations.count == 1)
    }
}
