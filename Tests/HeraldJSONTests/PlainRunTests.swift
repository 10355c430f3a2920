@testable import HeraldJSON
import PropertyBased
import Testing

/// `JSONParser.plainRunEnd(from:)`, which the string readers (request keys and values, the
/// simulator's payload check) use to skip plain text eight bytes a step, against the byte-by-byte
/// rule it replaced, wherever a stop byte falls in or across the eight-byte words.
@Suite("JSONParser: plain string runs, eight bytes a step")
struct PlainRunTests {
    /// Bytes that end a run (quote, backslash, control characters, bytes of multi-byte
    /// characters), and their neighbours that do not.
    static let bytes: [UInt8] = [0x22, 0x5C, 0x00, 0x01, 0x1F, 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x7F, 0x80, 0xA0, 0xC3, 0xFF]

    static func byteByByte(_ text: [UInt8], from k: Int) -> Int {
        var k = k
        while k < text.count {
            let c = text[k]
            if c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 { return k }
            k += 1
        }
        return text.count
    }

    @Test("the first stop from every start, for texts of plain bytes with stops here and there")
    func againstByteByByte() async {
        await propertyCheck(count: 1500, input: Gen.int(in: 0...(4 * Self.bytes.count)).array(of: 0...40)) { picks in
            let text = picks.map { $0 < Self.bytes.count ? Self.bytes[$0] : UInt8(ascii: "a") }
            text.withUnsafeBytes { raw in
                let p = JSONParser(raw)
                for start in 0...text.count {
                    #expect(p.plainRunEnd(from: start) == Self.byteByByte(text, from: start), "\(text) from \(start)")
                }
            }
        }
    }

    @Test("every stop byte at every place of a word, followed by plain text or by another stop")
    func everyStopEveryPlace() {
        for stop in Self.bytes where Self.byteByByte([stop], from: 0) == 0 {
            for at in 0..<20 {
                for after: UInt8 in [UInt8(ascii: "a"), 0x00, 0x22, 0xFF] {
                    var text = [UInt8](repeating: UInt8(ascii: "b"), count: 24)
                    text[at] = stop
                    text[at + 1] = after
                    text.withUnsafeBytes { raw in
                        #expect(JSONParser(raw).plainRunEnd(from: 0) == Self.byteByByte(text, from: 0), "\(text)")
                    }
                }
            }
        }
    }
}
