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

    @Test("the frame stage sets the frame the framer makes: the binary framer's own in-place way, and a framer of one's own with only frame(_:)")
    func stageSetsTheFrame() throws {
        var e = Envelope(sequence: 9, request: NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 0xAB, count: 32)), id: 7))
        e.payload = Array(#"{"aps":{}}"#.utf8)
        let expected = try BinaryFramer(format: .frame).frame(e)
        var staged = e
        try FrameStage(BinaryFramer(format: .frame)).apply(&staged)
        #expect(staged.frame == expected && staged.payload == e.payload)
        var own = e
        try FrameStage(PayloadOnlyFramer()).apply(&own)
        #expect(own.frame == Frame(bytes: e.payload, identifierOffset: nil))
        // A failure leaves the envelope unframed.
        var short = e
        short.request.token = DeviceToken(bytes: [1, 2])
        #expect(throws: StageFailure.self) { try FrameStage(BinaryFramer(format: .frame)).apply(&short) }
        #expect(short.frame == nil)
    }
}

/// A framer as an extension would write one: `frame(_:)` only, the stage's `frame(into:)` the default.
private struct PayloadOnlyFramer: Framer {
    func frame(_ envelope: Envelope) throws(StageFailure) -> Frame { Frame(bytes: envelope.payload, identifierOffset: nil) }
}
