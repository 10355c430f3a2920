import HeraldBinary
import HeraldCore
import Testing

@Suite("Framer vectors")
struct FramerVectorTests {
    @Test("enhanced format: command, identifier, expiry, token length, token, payload length, payload")
    func enhanced() throws {
        let token = [UInt8](repeating: 0xAB, count: 32)
        var r = NotificationRequest(token: DeviceToken(bytes: token), id: 0x01020304)
        r.expiry = 0x0A0B0C0D
        var e = Envelope(sequence: 9, request: r)
        e.payload = Array("{}".utf8)
        let f = try BinaryFramer(format: .enhanced).frame(e)
        #expect(f.bytes == [1, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0, 32] + token + [0, 2, 0x7B, 0x7D])
        #expect(f.identifierOffset == 1)
    }

    @Test("a token that is not 32 bytes is refused before the wire (the gateway would answer 5 and close)")
    func shortToken() {
        var e = Envelope(sequence: 1, request: NotificationRequest(token: DeviceToken(bytes: [0xAA, 0xBB]), id: 1))
        e.payload = Array("{}".utf8)
        #expect(throws: StageFailure.self) { _ = try BinaryFramer(format: .frame).frame(e) }
    }
}
