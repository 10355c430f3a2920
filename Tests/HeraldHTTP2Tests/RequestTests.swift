import Foundation
import HeraldCore
import HeraldJSON
import Testing

@testable import HeraldHTTP2

let sampleToken = try! DeviceToken(hex: String(repeating: "0a1b2c3d", count: 8))

func envelope(_ aps: APS = { var a = APS(); a.alert = Alert(body: "Hi"); return a }(), payload: Int = 30, _ change: (inout NotificationRequest) -> Void = { _ in }) -> Envelope {
    var r = NotificationRequest(token: sampleToken, aps: aps, topic: "com.example.app")
    change(&r)
    var e = Envelope(sequence: 0, request: r)
    e.payload = Array(repeating: UInt8(ascii: " "), count: payload)
    return e
}

@Suite("HTTP/2 requests: path, headers, push types")
struct RequestTests {
    let builder = APNsRequestBuilder()
    let fixedID = "7c1e6f0a-1b2c-4d3e-8f40-5a6b7c8d9e0f"

    @Test("an alert: byte-exact path and headers, in order")
    func alertVector() throws {
        let e = envelope { $0.expiry = 1_700_000_000; $0.priority = Priority(rawValue: 10); $0.collapseID = "game-42" }
        let r = try builder.request(for: e) { fixedID }
        #expect(r.method == "POST")
        #expect(r.path == "/3/device/" + String(repeating: "0a1b2c3d", count: 8))
        #expect(r.headers == [
            .init("apns-push-type", "alert"), .init("apns-topic", "com.example.app"), .init("apns-id", fixedID),
            .init("apns-expiration", "1700000000"), .init("apns-priority", "10"), .init("apns-collapse-id", "game-42"),
        ])
        #expect(r.body == e.payload && r.apnsID == fixedID)
    }

    @Test("each push type's topic suffix, added once", arguments: [
        ("alert", "com.example.app"), ("background", "com.example.app"), ("voip", "com.example.app.voip"),
        ("complication", "com.example.app.complication"), ("fileprovider", "com.example.app.pushkit.fileprovider"),
        ("location", "com.example.app.location-query"), ("pushtotalk", "com.example.app.voip-ptt"),
        ("widgets", "com.example.app.push-type.widgets"), ("controls", "com.example.app.push-type.controls"),
        ("mdm", "com.example.app"),
    ])
    func topics(type: String, topic: String) throws {
        var aps = APS()
        if type == "background" { aps.contentAvailable = true } else { aps.alert = Alert(body: "x") }
        for given in ["com.example.app", topic] {
            let e = envelope(aps) { $0.pushType = PushType(rawValue: type); $0.topic = given }
            #expect(try builder.request(for: e)[header: "apns-topic"] == topic)
        }
    }

    @Test("the push type is inferred from the payload: alert, background (priority 5), liveactivity")
    func inference() throws {
        #expect(try builder.request(for: envelope()).pushType == .alert)
        var background = APS()
        background.contentAvailable = true
        let b = try builder.request(for: envelope(background))
        #expect(b.pushType == .background && b[header: "apns-priority"] == "5")
        var live = APS()
        live.event = "update"
        live.timestamp = 1
        live.contentState = .object(JSONObject())
        let l = try builder.request(for: envelope(live))
        #expect(l.pushType == .liveActivity && l[header: "apns-topic"] == "com.example.app.push-type.liveactivity")
        let raw = envelope(APS()) { $0.rawPayload = try! JSONParser.parse(#"{"aps":{"content-available":1}}"#) }
        #expect(try builder.request(for: raw).pushType == .background)
    }

    @Test("what APNs would refuse is dropped before the wire, with the reason", arguments: [
        ("background with an alert", "cannot carry an alert"),
        ("alert without an alert", "needs an alert"),
        ("background at priority 10", "priority 5 or 1"),
        ("liveactivity without an event", "needs a Live Activity"),
        ("an event with push type alert", "needs push type liveactivity"),
        ("no topic", "no topic"),
        ("collapse id over 64 bytes", "at most 64"),
        ("4097 bytes of alert", "limit of 4096"),
        ("5121 bytes of voip", "limit of 5120"),
        ("no payload", "no payload"),
    ])
    func refusals(name: String, reason: String) {
        var aps = APS()
        aps.alert = Alert(body: "x")
        var quiet = APS()
        quiet.contentAvailable = true
        let e: Envelope
        switch name {
        case "background with an alert": e = envelope { $0.pushType = .background; $0.aps.contentAvailable = true }
        case "alert without an alert": e = envelope(quiet) { $0.pushType = .alert }
        case "background at priority 10": e = envelope(quiet) { $0.priority = Priority(rawValue: 10) }
        case "liveactivity without an event": e = envelope { $0.pushType = .liveActivity }
        case "an event with push type alert": e = envelope { $0.pushType = .alert; $0.aps.event = "end"; $0.aps.timestamp = 1 }
        case "no topic": e = envelope { $0.topic = nil }
        case "collapse id over 64 bytes": e = envelope { $0.collapseID = String(repeating: "é", count: 33) }
        case "4097 bytes of alert": e = envelope(payload: 4097)
        case "5121 bytes of voip": e = envelope(payload: 5121) { $0.pushType = .voip }
        default: e = envelope(payload: 0)
        }
        #expect {
            _ = try builder.request(for: e)
        } throws: { error in
            (error as? StageFailure)?.reason.contains(reason) ?? false
        }
    }

    @Test("limits: 4096 and 5120 bytes fit exactly; a default topic serves requests without one")
    func limitsAndDefaultTopic() throws {
        #expect(try builder.request(for: envelope(payload: 4096)).body.count == 4096)
        #expect(try builder.request(for: envelope(payload: 5120) { $0.pushType = .voip }).body.count == 5120)
        let b = APNsRequestBuilder(defaultTopic: "com.example.default")
        #expect(try b.request(for: envelope { $0.topic = nil })[header: "apns-topic"] == "com.example.default")
    }

    @Test("apns-id: the request's own (lowercased), otherwise a fresh version 4 UUID")
    func ids() throws {
        let given = try builder.request(for: envelope { $0.apnsID = "7C1E6F0A-1B2C-4D3E-8F40-5A6B7C8D9E0F" })
        #expect(given.apnsID == fixedID)
        var seen = Set<String>()
        for _ in 0..<200 {
            let id = try builder.request(for: envelope()).apnsID
            let u = Array(id.utf8)
            #expect(u.count == 36 && u[14] == UInt8(ascii: "4") && [UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(u[19]))
            let line = #"{"token":"00","alert":"x","apns-id":"\#(id)"}"#
            #expect(try RequestDecoder().decode(JSONParser.parse(line)).apnsID == id)
            seen.insert(id)
        }
        #expect(seen.count == 200)
    }

    @Test("the request keys for HTTP/2 decode, and bad values are errors naming the key", arguments: [
        (#"{"alert":"a","push-type":"bogus"}"#, "\"push-type\" must be one of alert, background"),
        (#"{"alert":"a","collapse-id":"\#(String(repeating: "x", count: 65))"}"#, "\"collapse-id\" is 65 bytes; at most 64"),
        (#"{"alert":"a","apns-id":"7c1e6f0a1b2c4d3e8f405a6b7c8d9e0f"}"#, "\"apns-id\" must be a UUID"),
        (#"{"alert":"a","push-type":7}"#, "\"push-type\""),
    ])
    func decoding(line: String, error: String) throws {
        let full = "{\"token\":\"00\"," + line.dropFirst()
        #expect { _ = try RequestDecoder().decode(JSONParser.parse(full)) } throws: { "\($0)".contains(error) }
        let good = #"{"token":"00","alert":"a","push-type":"voip","collapse-id":"c","apns-id":"7c1e6f0a-1b2c-4d3e-8f40-5a6b7c8d9e0f"}"#
        let r = try RequestDecoder().decode(JSONParser.parse(good))
        #expect(r.pushType == .voip && r.collapseID == "c" && r.apnsID == fixedID)
    }

    @Test("apns-id: canonical lowercase version-4 UUIDs, byte-exact from a known generator, and unique")
    func apnsIDs() {
        var g = SeededGenerator(seed: 1)
        var copy = g
        let id = APNsID.make(using: &g)
        let high = copy.next(), low = copy.next()
        let bytes = (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> (8 * (7 - (i & 7)))) }
        var hex = bytes.map { String(format: "%02x", $0) }
        hex[6] = "4" + hex[6].dropFirst()
        hex[8] = String(format: "%02x", bytes[8] & 0x3F | 0x80)
        let expected = hex[0..<4].joined() + "-" + hex[4..<6].joined() + "-" + hex[6..<8].joined() + "-" + hex[8..<10].joined() + "-" + hex[10...].joined()
        #expect(id == expected)
        var seen = Set<String>()
        for _ in 0..<10_000 {
            let id = APNsID.random()
            let parts = id.split(separator: "-")
            #expect(parts.map(\.count) == [8, 4, 4, 4, 12] && parts[2].first == "4" && "89ab".contains(parts[3].first!))
            #expect(id == id.lowercased())
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
    }
}
