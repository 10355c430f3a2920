import HeraldBinary
import HeraldCore
import HeraldJSON
import Testing

/// Byte-exact vectors, computed by hand from the seed listings (5-1, 5-2) and the frame item table.
/// Payload `{"aps":{}}` is 10 bytes: 7b 22 61 70 73 22 3a 7b 7d 7d.
@Suite struct FrameEncoderTests {
    static let payloadHex = "7b22617073223a7b7d7d"

    @Test func simpleFormatVector() {
        // |COMMAND 00|TOKENLEN 0020|TOKEN|PAYLOADLEN 000a|PAYLOAD|
        let expected = "00" + "0020" + tokenHex + "000a" + Self.payloadHex
        #expect(hex(encode(.simple)) == expected)
        // Listing 5-1's buffer: sizeof(uint8) + sizeof(uint16) + DEVICE_BINARY_SIZE + sizeof(uint16) + payload.
        #expect(encode(.simple).count == 1 + 2 + 32 + 2 + 10)
    }

    @Test func enhancedFormatVector() {
        // |COMMAND 01|ID 01020304|EXPIRY 0a0b0c0d|TOKENLEN 0020|TOKEN|PAYLOADLEN 000a|PAYLOAD|
        let expected = "01" + "01020304" + "0a0b0c0d" + "0020" + tokenHex + "000a" + Self.payloadHex
        #expect(hex(encode(.enhanced, id: 0x0102_0304, expiry: 0x0A0B_0C0D)) == expected)
        // Listing 5-2's buffer: uint8 + uint32 + uint32 + uint16 + token + uint16 + payload.
        #expect(encode(.enhanced).count == 1 + 4 + 4 + 2 + 32 + 2 + 10)
    }

    @Test func frameFormatVector() {
        // |02|frame length 00000042 (66)|01 0020 token|02 000a payload|03 0004 id|04 0004 expiry|05 0001 priority|
        let expected = "02" + "00000042"
            + "01" + "0020" + tokenHex
            + "02" + "000a" + Self.payloadHex
            + "03" + "0004" + "deadbeef"
            + "04" + "0004" + "6553f100"
            + "05" + "0001" + "05"
        #expect(hex(encode(.frame, id: 0xDEAD_BEEF, expiry: 1_700_000_000, priority: 5)) == expected)
        #expect(encode(.frame).count == 5 + 66)
    }

    @Test func priorityTenAndExpiryZero() {
        let b = encode(.frame, id: 7, expiry: 0, priority: 10)
        #expect(Array(b.suffix(18)) == [3, 0, 4, 0, 0, 0, 7, 4, 0, 4, 0, 0, 0, 0, 5, 0, 1, 10])
    }

    @Test(arguments: NotificationFormat.all)
    func sizeAndIdentifierOffset(format: NotificationFormat) throws {
        for payloadCount in [1, 10, 255, 256, 2048] {
            let payload = [UInt8](repeating: 0x61, count: payloadCount)
            let f = try FrameEncoder.frame(format, token: token(), payload: payload, identifier: 0x1122_3344, expiry: 9, priority: 5)
            #expect(f.bytes.count == FrameEncoder.encodedSize(format, tokenCount: 32, payloadCount: payloadCount))
            #expect(f.bytes[0] == format.command)
            if let o = f.identifierOffset {
                #expect(Array(f.bytes[o..<o + 4]) == [0x11, 0x22, 0x33, 0x44])
                var g = f
                g.setIdentifier(0xA0B0_C0D0)
                #expect(Array(g.bytes[o..<o + 4]) == [0xA0, 0xB0, 0xC0, 0xD0])
                #expect(g.bytes[..<o] == f.bytes[..<o] && g.bytes[(o + 4)...] == f.bytes[(o + 4)...])
            } else {
                #expect(format == .simple)
            }
        }
    }

    @Test func manyFramesInOneReusedBuffer() throws {
        var buffer = WriteBuffer(capacity: 16)
        var expected: [UInt8] = []
        var offsets: [Int] = []
        for i in 0..<100 {
            let format = NotificationFormat.all[i % 3]
            let payload = bytes("{\"aps\":{\"badge\":\(i)}}")
            let o = try FrameEncoder.encode(format, token: token(UInt8(i)), payload: payload, identifier: UInt32(i), expiry: 0, priority: 10, into: &buffer)
            if let o { offsets.append(o) }
            expected += encode(format, token: token(UInt8(i)), payload: payload, id: UInt32(i))
        }
        #expect(buffer.bytes == expected)
        // Patching in place through the returned offsets.
        for o in offsets { buffer.setUInt32(0xFFFF_FFFF, at: o) }
        let b = buffer.bytes
        for o in offsets { #expect(Array(b[o..<o + 4]) == [255, 255, 255, 255]) }
        let capacity = buffer.capacity
        buffer.clear()
        #expect(buffer.isEmpty && buffer.capacity == capacity)
    }

    @Test func whatTheWireCannotCarry() {
        var buffer = WriteBuffer()
        #expect(throws: FrameEncodingError.self) {
            try FrameEncoder.encode(.frame, token: token(), payload: [UInt8](repeating: 0x20, count: 65536), into: &buffer)
        }
        #expect(throws: FrameEncodingError.self) {
            try FrameEncoder.encode(.frame, token: token(), payload: bytes("{}"), priority: 1, into: &buffer)
        }
        #expect(buffer.isEmpty)
        // The legacy formats carry no priority: nothing to check.
        #expect(throws: Never.self) { try FrameEncoder.encode(.enhanced, token: token(), payload: bytes("{}"), priority: 1, into: &buffer) }
    }

    @Test func framerUsesRequestFields() throws {
        var r = NotificationRequest(token: token(), id: 42, expiry: 1_700_000_000, priority: .considerPower)
        r.aps.badge = 1
        var e = Envelope(sequence: 9, request: r)
        e.payload = bytes(#"{"aps":{"badge":1}}"#)
        let f = try BinaryFramer(format: .frame).frame(e)
        #expect(f.bytes == encode(.frame, payload: e.payload, id: 42, expiry: 1_700_000_000, priority: 5))
        // Without an id, the sequence number; without a priority, 10 …
        e.request.id = nil
        e.request.priority = nil
        #expect(try BinaryFramer(format: .frame).frame(e).bytes == encode(.frame, payload: e.payload, id: 9, expiry: 1_700_000_000, priority: 10))
        // … but 5 for a background-only update, which APNs refuses at 10.
        e.payload = bytes(#"{"aps":{"content-available":1},"k":"alert"}"#)
        #expect(try BinaryFramer(format: .frame).frame(e).bytes.last == 5)
        #expect(try BinaryFramer(format: .enhanced).frame(e).bytes == encode(.enhanced, payload: e.payload, id: 9, expiry: 1_700_000_000))
        #expect(try BinaryFramer(format: .simple).frame(e).identifierOffset == nil)
    }

    @Test func contentAvailableOnlyDetection() {
        let cases: [(String, Bool)] = [
            (#"{"aps":{"content-available":1}}"#, true),
            (#"{"x":{"aps":{"alert":"no"}}, "aps" : { "content-available" : 1 , "category":"c"}}"#, true),
            (#"{"aps":{"content-available":1,"alert":"hi"}}"#, false),
            (#"{"aps":{"badge":0,"content-available":1}}"#, false),
            (#"{"aps":{"sound":"a","content-available":1}}"#, false),
            (#"{"aps":{"alert":"content-available"}}"#, false),
            (#"{"aps":{}, "content-available":1}"#, false),
            (#"{"aps":{"alert":{"body":"x"}}}"#, false),
        ]
        for (json, expected) in cases {
            #expect(bytes(json).withUnsafeBytes { PayloadInspector.isContentAvailableOnly($0) } == expected, "\(json)")
        }
    }
}

/// The gateway relies on core's allocation-free validator: check the cases it must get right.
@Suite struct PayloadValidationTests {
    func shape(_ s: String) -> JSONShape? {
        bytes(s).withUnsafeBytes { try? JSONParser.validate($0) }
    }

    @Test func apsObjectDetection() {
        #expect(shape(#"{"aps":{}}"#)?.hasAPSObject == true)
        #expect(shape(#" { "x" : [1, {"aps":{}}], "aps" : {"alert":"a"} } "#)?.hasAPSObject == true)
        #expect(shape(#"{"x":{"aps":{}}}"#)?.hasAPSObject == false)
        #expect(shape(#"{"aps":[]}"#)?.hasAPSObject == false)
        #expect(shape(#"{"aps":"x"}"#)?.hasAPSObject == false)
        #expect(shape(#"[{"aps":{}}]"#)?.isObject == false)
    }

    @Test func duplicateKeysAnywhereAreInvalid() {
        #expect(shape(#"{"aps":{},"aps":{}}"#) == nil)
        #expect(shape(#"{"aps":{"badge":1,"badge":2}}"#) == nil)
        // Past the 16 keys kept on the stack.
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(shape("{\"aps\":{}," + many + "}")?.hasAPSObject == true)
        #expect(shape("{\"aps\":{}," + many + ",\"k3\":0}") == nil)
        #expect(shape("{\"aps\":{}," + many + ",\"k39\":0}") == nil)
        // Same text, different keys; escapes compare as written.
        #expect(shape(#"{"a":1,"ab":2,"b":3}"#) != nil)
    }

    @Test func stringsAreStillChecked() {
        #expect(shape("{\"aps\":{\"alert\":\"caf\u{e9} \\u00e9 \\n\"}}") != nil)
        #expect(shape("{\"aps\":{\"alert\":\"\\x\"}}") == nil)
        #expect(shape("{\"aps\":{\"alert\":\"a\u{1}\"}}") == nil)
        #expect(bytes("{\"aps\":{\"alert\":\"").withUnsafeBytes { p in (try? JSONParser.validate(p)) == nil })
        let badUTF8: [UInt8] = Array(#"{"aps":{"alert":""#.utf8) + [0xC3, 0x28] + Array(#""}}"#.utf8)
        #expect(badUTF8.withUnsafeBytes { (try? JSONParser.validate($0)) == nil })
    }
}
