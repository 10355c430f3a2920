import HeraldClient
import HeraldCore
import HeraldHTTP2
import HeraldJSON
import HeraldKit
import HeraldPayload
import HeraldSimulator
import Testing

@Suite("Requests built in code, one per push type: the same request as its JSON line, and APNs' checks pass (the HTTP/2 simulator's)")
struct RequestBuilderTests {
    static func fromJSON(_ line: String) throws -> NotificationRequest {
        try Array(line.utf8).withUnsafeBytes { try RequestDecoder().decode(line: $0) }
    }

    @Test("a builder makes what its JSON line decodes to")
    func sameAsJSON() throws {
        let t = token(1), hex = token(1).hex
        let pairs: [(NotificationRequest, String)] = [
            (.alert(to: t, title: "Order", body: "Shipped", badge: 2, sound: "default", id: 7),
             #"{"id":7,"token":"\#(hex)","alert":{"title":"Order","body":"Shipped"},"badge":2,"sound":"default","push-type":"alert"}"#),
            (.localizedAlert(to: t, titleKey: "T", bodyKey: "GAME_PLAY_REQUEST_FORMAT", bodyArgs: ["Jenna", "Frank"], language: "fr-CA"),
             #"{"token":"\#(hex)","alert":{"title-loc-key":"T","loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]},"language":"fr-CA","push-type":"alert"}"#),
            (.background(to: t, custom: ["sync": "inbox"]),
             #"{"token":"\#(hex)","content-available":1,"custom":{"sync":"inbox"},"priority":5,"push-type":"background"}"#),
            (.liveActivityUpdate(to: t, contentState: ["score": 3, "period": "Q4"], timestamp: 1_700_000_000),
             #"{"token":"\#(hex)","event":"update","timestamp":1700000000,"content-state":{"score":3,"period":"Q4"},"push-type":"liveactivity"}"#),
            (.widgetsReload(to: t),
             #"{"token":"\#(hex)","payload":{"aps":{"content-changed":true}},"push-type":"widgets"}"#),
        ]
        for (built, line) in pairs {
            #expect(built == (try Self.fromJSON(line)), "\(line)")
        }
    }

    @Test("every push type's builder, sent through HeraldClient to the HTTP/2 simulator (which checks the push type, the topic's suffix, the priority and the payload): accepted; an oversized VoIP payload is dropped by the size guard, saying why")
    func everyPushTypeAccepted() async throws {
        let simulator = try HTTP2Simulator()
        let channel = simulator.createChannel()
        var configuration = HeraldConfiguration()
        configuration.sizeLimit = .http2
        let client = try HeraldClient(assembly: HeraldAssembly(configuration: configuration), transport: HTTP2SimulatorTransport(simulator: simulator))
        let runner = Task { try await client.run() }
        let t = token(2), now = 1_700_000_000
        let requests: [NotificationRequest] = [
            .alert(to: t, title: "Hi", body: "There"),
            .localizedAlert(to: t, bodyKey: "HELLO", topic: "com.example.app"),
            .background(to: t, custom: ["sync": true]),
            .voip(to: t, custom: ["caller": "Ann"]),
            .liveActivityStart(to: t, attributesType: "GameAttributes", attributes: ["home": "A", "away": "B"], contentState: ["score": 0], timestamp: now),
            .liveActivityUpdate(to: t, contentState: ["score": 1], timestamp: now + 1, alert: Alert(body: "Goal"), relevanceScore: 0.5),
            .liveActivityEnd(to: t, contentState: ["score": 1], timestamp: now + 2, dismissalDate: now + 60),
            .locationQuery(to: t),
            .widgetsReload(to: t),
            .controlsReload(to: t),
            .broadcast(channel: channel, contentState: ["score": 2], timestamp: now + 3),
        ]
        let outcomes = try await client.send(requests)
        for (r, o) in zip(requests, outcomes) {
            #expect(o.isAccepted, "\(r.pushType?.rawValue ?? "?"): \(o)")
        }
        let big = try await client.send(.voip(to: t, custom: ["blob": .string(String(repeating: "x", count: 6000))]))
        #expect(big.kind == .dropped && big.reason?.contains("5120") == true, "\(big)")
        client.shutdown()
        try await runner.value
        #expect(simulator.counters.delivered == requests.count)
    }
}
