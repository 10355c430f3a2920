import HeraldCore
import HeraldJSON
import HeraldPayload
import Testing

@Suite("Payload builder basics")
struct BuilderSmokeTests {
    @Test("a body-only alert is a plain string; custom keys follow aps")
    func bodyOnly() throws {
        var aps = APS()
        aps.alert = Alert(body: "Hi")
        aps.badge = 3
        var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 1, count: 32)), aps: aps, custom: JSONObject([("k", .int(1))]))
        let bytes = try APSPayloadBuilder().build(&r)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":"Hi","badge":3},"k":1}"#)
    }

    @Test("the reject policy names how many bytes over")
    func reject() {
        var e = Envelope(sequence: 0, request: NotificationRequest(token: DeviceToken(bytes: [1])))
        e.payload = [UInt8](repeating: 0x20, count: 300)
        #expect(throws: StageFailure("payload is 300 bytes, 44 over the limit of 256", code: .payloadTooLarge)) {
            try RejectingSizeGuard(limit: .legacyBinary).enforce(&e)
        }
    }
}
