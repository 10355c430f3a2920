import Crypto
import Foundation
import HeraldCore
import HeraldJSON
import HeraldPayload
import HeraldSimulator
import Testing

@testable import HeraldHTTP2

/// A broadcast envelope with its payload built, as the pipeline hands it to a transport.
func broadcastEnvelope(channel: String, sequence: UInt64 = 0, topic: String = "com.example.app", _ change: (inout NotificationRequest) -> Void = { _ in }) throws -> Envelope {
    var aps = APS()
    aps.event = "update"
    aps.contentState = .object(JSONObject([("score", .number(JSONNumber(3)))]))
    aps.timestamp = 1_700_000_000
    var r = NotificationRequest(channelID: channel, aps: aps, topic: topic)
    r.id = UInt32(sequence)
    change(&r)
    var e = Envelope(sequence: sequence, request: r)
    e.payload = try APSPayloadBuilder().build(&r)
    return e
}

@Suite("Broadcast pushes and channel management")
struct BroadcastTests {
    let fixedID = "7c1e6f0a-1b2c-4d3e-8f40-5a6b7c8d9e0f"
    let channel = "dHN0LXNyY2gtY2hubA=="

    @Test("a broadcast: byte-exact path and headers, in order; the topic's Live Activity suffix is not part of the path")
    func vector() throws {
        for topic in ["com.example.app", "com.example.app.push-type.liveactivity"] {
            let e = try broadcastEnvelope(channel: channel, topic: topic) { $0.expiry = 0; $0.priority = .considerPower }
            let r = try APNsRequestBuilder().request(for: e) { fixedID }
            #expect(r.method == "POST" && r.path == "/4/broadcasts/apps/com.example.app")
            #expect(r.headers == [
                .init("apns-push-type", "liveactivity"), .init("apns-channel-id", channel), .init("apns-request-id", fixedID),
                .init("apns-expiration", "0"), .init("apns-priority", "5"),
            ])
            #expect(r.channelID == channel && r.apnsID == fixedID && r[header: "apns-topic"] == nil)
        }
    }

    @Test("what APNs would refuse is dropped before the wire: not a Live Activity, a collapse id, over 5120 bytes")
    func refused() throws {
        let builder = APNsRequestBuilder()
        var alert = try broadcastEnvelope(channel: channel)
        alert.request.aps = APS()
        alert.request.aps.alert = Alert(body: "hi")
        #expect(throws: StageFailure.self) { try builder.request(for: alert) }
        let collapsed = try broadcastEnvelope(channel: channel) { $0.collapseID = "x" }
        #expect(throws: StageFailure.self) { try builder.request(for: collapsed) }
        var large = try broadcastEnvelope(channel: channel)
        large.payload = Array(repeating: 0x20, count: 5120)
        #expect(try builder.request(for: large).body.count == 5120)
        large.payload.append(0x20)
        #expect(throws: StageFailure.self) { try builder.request(for: large) }
        // The size guard's http2 profile lets a broadcast be as large as APNs takes it.
        #expect(SizeLimit.http2.bytes(for: large.request) == 5120)
    }

    @Test("the request contract: \"channel-id\" instead of \"token\", never both, base64 only")
    func decoding() throws {
        let d = RequestDecoder()
        let r = try d.decode(try JSONParser.parse(Array(#"{"channel-id":"\#(channel)","event":"update","content-state":{}}"#.utf8)))
        #expect(r.channelID == channel && r.isBroadcast && r.token.count == 0)
        for bad in [
            #"{"channel-id":"\#(channel)","token":"00ff"}"#, #"{"channel-id":"not base64!"}"#, #"{"channel-id":""}"#,
            #"{"channel-id":7}"#, #"{"alert":"no one"}"#, #"{"channel-id":"abc"}"#, #"{"channel-id":"ab=c"}"#,
        ] {
            #expect(throws: RequestError.self, "\(bad)") { try d.decode(try JSONParser.parse(Array(bad.utf8))) }
        }
        // Outcomes of a broadcast carry no token.
        #expect(OutcomeRecord(sequence: 0, line: 1, id: nil, token: r.token, outcome: .accepted).token == nil)
    }

    @Test("403 TopicMismatch rejects that request only; the credential stays in use")
    func topicMismatch() {
        #expect(APNsDisposition(status: 403, reason: "TopicMismatch") == .rejected)
        #expect(APNsDisposition(status: 400, reason: "ChannelNotRegistered") == .rejected)
        #expect(APNsDisposition(status: 403, reason: "InvalidProviderToken") == .credentialRejected)
    }

    func simulator(maxChannels: Int = 10_000) throws -> (HTTP2Simulator, String) {
        var (simulator, tokens) = try tokenAuthSimulator { $0.maxChannels = maxChannels }
        return (simulator, "bearer " + (try tokens.token(now: 1_700_000_000)))
    }

    func call(_ s: HTTP2Simulator, _ request: BroadcastChannelRequest, auth: String?) throws -> Result<BroadcastChannelResult, BroadcastChannelError> {
        guard case .answer(let a) = s.handle(request.request(requestID: fixedID), authorization: auth, connection: 1, now: .seconds(1_700_000_000)) else {
            Issue.record("no answer")
            throw BroadcastChannelError(status: 0, reason: "no answer")
        }
        #expect(a.apnsID == fixedID, "the request id is echoed")
        // Through the wire form, as a client reads it.
        var headers: [(name: String, value: String)] = []
        if let id = a.apnsID { headers.append(("apns-request-id", id)) }
        if let c = a.channelID { headers.append(("apns-channel-id", c)) }
        let read = APNsResponse(status: a.status, headers: headers, body: a.body)
        return Result { () throws(BroadcastChannelError) in try request.result(of: read) }
    }

    @Test("channel management in the simulator: create, list, read, delete, and each refusal's reason")
    func management() throws {
        let (s, auth) = try simulator(maxChannels: 2)
        let app = "com.example.app"
        guard case .success(.created(let first)) = try call(s, .create(bundleID: app, storagePolicy: 1), auth: auth),
            case .success(.created(let second)) = try call(s, .create(bundleID: app, storagePolicy: 0), auth: auth)
        else { Issue.record("create failed"); return }
        #expect(first.id != second.id && RequestDecoder.isChannelID(first.id) && Data(base64Encoded: first.id)?.count == 16)
        #expect(try call(s, .list(bundleID: app), auth: auth) == .success(.channels([first.id, second.id])))
        #expect(try call(s, .read(bundleID: app, channelID: first.id), auth: auth)
            == .success(.channel(BroadcastChannel(id: first.id, storagePolicy: 1, pushType: "LiveActivity"))))
        func reason(_ r: Result<BroadcastChannelResult, BroadcastChannelError>) -> String? {
            if case .failure(let e) = r { return "\(e.status) \(e.reason)" } else { return nil }
        }
        #expect(reason(try call(s, .create(bundleID: app, storagePolicy: 1), auth: auth)) == "400 CannotCreateChannelConfig")
        #expect(reason(try call(s, .create(bundleID: "com.example.other", storagePolicy: 1), auth: auth)) == "403 TopicMismatch")
        #expect(reason(try call(s, .read(bundleID: app, channelID: "AAAAAAAAAAAAAAAAAAAAAA=="), auth: auth)) == "404 ChannelNotRegistered")
        #expect(reason(try call(s, .read(bundleID: app, channelID: "no!"), auth: auth)) == "400 BadChannelId")
        #expect(reason(try call(s, .list(bundleID: app), auth: nil)) == "403 MissingProviderToken")
        var missing = BroadcastChannelRequest.read(bundleID: app, channelID: first.id).request(requestID: fixedID)
        missing.headers.removeAll { $0.name == "apns-channel-id" }
        missing.channelID = nil
        #expect(s.handle(missing, authorization: auth, connection: 1, now: .seconds(1_700_000_000))
            == .answer(APNsResponse(status: 400, apnsID: fixedID, reason: "MissingChannelId")))
        var badBody = BroadcastChannelRequest.create(bundleID: app, storagePolicy: 1).request(requestID: fixedID)
        badBody.body = Array(#"{"message-storage-policy":2,"push-type":"LiveActivity"}"#.utf8)
        #expect(s.handle(badBody, authorization: auth, connection: 1, now: .seconds(1_700_000_000))
            == .answer(APNsResponse(status: 400, apnsID: fixedID, reason: "BadRequestParams")))
        #expect(try call(s, .delete(bundleID: app, channelID: first.id), auth: auth) == .success(.deleted))
        #expect(reason(try call(s, .delete(bundleID: app, channelID: first.id), auth: auth)) == "404 ChannelNotRegistered")
        #expect(try call(s, .list(bundleID: app), auth: auth) == .success(.channels([second.id])))
    }

    @Test("broadcast pushes in the simulator: delivered to a registered channel, each refusal with Apple's reason", arguments: [
        ("registered", 200, ""), ("unknown channel", 400, "ChannelNotRegistered"), ("no channel", 400, "MissingChannelId"),
        ("bad channel", 400, "BadChannelId"), ("other app", 403, "TopicMismatch"), ("alert push type", 400, "InvalidPushType"),
        ("too large", 413, "PayloadTooLarge"), ("GET", 405, "MethodNotAllowed"),
    ])
    func pushes(name: String, status: Int, reason: String) throws {
        let (s, auth) = try simulator()
        let channel = s.createChannel(storagePolicy: 1)
        var r = try APNsRequestBuilder().request(for: try broadcastEnvelope(channel: channel)) { fixedID }
        func set(_ header: String, _ value: String?) {
            r.headers.removeAll { $0.name == header }
            if let value { r.headers.append(.init(header, value)) }
            if header == "apns-channel-id" { r.channelID = value }
        }
        switch name {
        case "unknown channel": set("apns-channel-id", "AAAAAAAAAAAAAAAAAAAAAA==")
        case "no channel": set("apns-channel-id", nil)
        case "bad channel": set("apns-channel-id", "%%%")
        case "other app": r.path = "/4/broadcasts/apps/com.example.other"
        case "alert push type": set("apns-push-type", "alert")
        case "too large": r.body = Array(repeating: 0x20, count: 5121)
        case "GET": r.method = "GET"
        default: break
        }
        let answer = s.handle(r, authorization: auth, connection: 1, now: .seconds(1_700_000_000))
        #expect(answer == .answer(APNsResponse(status: status, apnsID: fixedID, reason: reason.isEmpty ? nil : reason)))
        #expect(s.counters.broadcasts[channel, default: 0] == (status == 200 ? 1 : 0))
    }

    @Test("broadcasts through the in-memory HTTP/2 transport beside device pushes: one outcome each, with the channel")
    func throughTransport() async throws {
        // Certificate authentication (no provider token), five channels at most.
        let s = try HTTP2Simulator(configuration: { var c = HTTP2SimulatorConfiguration(); c.maxChannels = 5; return c }())
        let live = s.createChannel()
        var envelopes = try alertEnvelopes(20)
        for i in 0..<10 { envelopes.append(try broadcastEnvelope(channel: live, sequence: UInt64(100 + i))) }
        envelopes.append(try broadcastEnvelope(channel: "AAAAAAAAAAAAAAAAAAAAAA==", sequence: 200))
        let transport = HTTP2SimulatorTransport(simulator: s)
        let (ledger, collector) = try await sendAll(envelopes, through: transport)
        #expect(ledger.snapshot.isBalanced && ledger.snapshot.entered == 31 && ledger.snapshot.accepted == 30)
        let broadcasts = collector.records.filter { $0.sequence >= 100 }
        #expect(broadcasts.count == 11 && broadcasts.allSatisfy { $0.token == nil && $0.apnsChannelID != nil })
        #expect(broadcasts.filter { $0.outcome == .rejected(Status(http: 400, reason: "ChannelNotRegistered")) }.map(\.sequence) == [200])
        #expect(s.counters.broadcasts[live] == 10 && s.counters.delivered == 30)
        #expect(await transport.takeDeadTokens().isEmpty)
    }
}
