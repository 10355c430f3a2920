import HeraldJSON
import PropertyBased
import Testing

@Suite("The one hex codec")
struct HexTests {
    @Test("property: bytes round-trip through lowercase hex, and upper case reads the same")
    func roundTrip() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...255).array(of: 0...80).map { $0.map { UInt8($0) } }) { bytes in
            let text = bytes.withUnsafeBytes { Hex.string($0) }
            #expect(text == text.lowercased() && text.utf8.count == 2 * bytes.count)
            #expect(Hex.decode(Array(text.utf8)) == .success(bytes))
            #expect(Hex.decode(Array(text.uppercased().utf8)) == .success(bytes))
            var appended: [UInt8] = []
            Hex.append(bytes, to: &appended)
            #expect(appended == Array(text.utf8))
        }
    }

    @Test("property: the raw-buffer decoder agrees with the collection one, errors included")
    func rawDecoderAgrees() async {
        let digits = Array("0123456789abcdefABCDEFgx ".utf8)
        await propertyCheck(count: 300, input: Gen.int(in: 0...(digits.count - 1)).array(of: 0...80)) { picks in
            let text = picks.map { digits[$0] }
            let viaCollection = Hex.decode(text[...])  // an ArraySlice: the collection path
            let viaRaw = text.withUnsafeBytes { Hex.decode($0) }
            #expect(viaCollection == viaRaw)
        }
    }

    @Test("bad text names the offset of the first byte that is not a digit; an odd count names its length")
    func errors() {
        #expect(Hex.decode(Array("0a1".utf8)) == .failure(HexError(offset: 3)))
        #expect(Hex.decode(Array("0a1g".utf8)) == .failure(HexError(offset: 3)))
        #expect(Hex.decode(Array("x0".utf8)) == .failure(HexError(offset: 0)))
        #expect(Hex.decode(Array(" 0".utf8)) == .failure(HexError(offset: 0)))
        #expect(Hex.nibble(UInt8(ascii: "F")) == 15 && Hex.nibble(UInt8(ascii: "G")) == nil)
        #expect((0..<16).map { Hex.digit(UInt8($0)) } == Array("0123456789abcdef".utf8))
    }
}
