import HeraldCore
import PropertyBased
import Testing

/// The rule, written plainly: the newest registration and unregistration among
/// the request's topic and "any topic" (every topic when the request has none).
struct SuppressionModel {
    var rows: [DeviceToken: [String?: (registered: UInt32, dead: UInt32)]] = [:]

    mutating func update(_ t: DeviceToken, _ topic: String?, registered: UInt32?, dead: UInt32?) {
        var r = rows[t, default: [:]][topic] ?? (0, 0)
        if let registered { r.registered = max(r.registered, registered) }
        if let dead { r.dead = max(r.dead, dead) }
        rows[t, default: [:]][topic] = r
    }

    func isSuppressed(_ t: DeviceToken, _ topic: String?) -> Bool {
        var registered: UInt32 = 0, dead: UInt32 = 0
        for (k, v) in rows[t] ?? [:] where topic == nil || k == nil || k == topic {
            registered = max(registered, v.registered)
            dead = max(dead, v.dead)
        }
        return dead != 0 && registered <= dead
    }
}

@Suite("Suppression index")
struct SuppressionIndexTests {
    @Test("agrees with the plain rule over random registrations and unregistrations, through growth, for every token and topic")
    func agreesWithModel() async {
        // One number per event: token (41), topic (4), registration or not (2), time (1...20).
        await propertyCheck(count: 200, input: Gen.int(in: 0...(41 * 4 * 2 * 20 - 1)).array(of: 0...300)) { codes in
            let events = codes.map { c in (c % 41, c / 41 % 4, c / 164 % 2 == 1, c / 328 + 1) }
            var index = SuppressionIndex(seed: 42)
            var model = SuppressionModel()
            let topics: [String?] = [nil, "com.a", "com.b", "com.c"]
            // Tokens of several lengths, including ones longer than the inline 32 bytes.
            func token(_ i: Int) -> DeviceToken { DeviceToken(bytes: (0..<(i % 3 == 0 ? 100 : 32)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }) }
            for (t, topic, isRegistration, time) in events {
                let time = UInt32(time)
                index.update(token(t), topic: topics[topic], registered: isRegistration ? time : nil, dead: isRegistration ? nil : time)
                model.update(token(t), topics[topic], registered: isRegistration ? time : nil, dead: isRegistration ? nil : time)
            }
            for t in 0...40 {
                for topic in topics + ["com.never"] {
                    let answer = index.isSuppressed(token(t), topic: topic)
                    #expect(answer == model.isSuppressed(token(t), topic), "token \(t) topic \(topic ?? "nil")")
                }
            }
        }
    }

    @Test("forgetting a token (one topic or all) lifts what it decided")
    func forget() {
        var index = SuppressionIndex()
        let t = DeviceToken(bytes: Array(repeating: 7, count: 32))
        index.update(t, topic: nil, registered: nil, dead: 10)
        index.update(t, topic: "com.a", registered: nil, dead: 10)
        index.forget(t, topic: nil as String?)
        let afterForget = index.isSuppressed(t, topic: "com.a")
        #expect(!afterForget)
        index.update(t, topic: "com.a", registered: nil, dead: 20)
        let again = index.isSuppressed(t, topic: "com.a")
        #expect(again)
        index.forget(t, topic: "com.a")
        let none = index.isSuppressed(t, topic: nil)
        #expect(!none)
    }
}
