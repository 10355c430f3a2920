import HeraldCore
import HeraldLocalization
import Testing

@Suite("Key checks without catalogs")
struct KeyCheckTests {
    @Test("arguments without a key are refused")
    func argsWithoutKey() {
        var alert = Alert()
        alert.locArgs = ["a"]
        var aps = APS()
        aps.alert = alert
        var r = NotificationRequest(token: DeviceToken(bytes: [1]), aps: aps)
        #expect(throws: StageFailure.self) { try KeyCheckingLocalizer().localize(&r) }
    }
}
