import HeraldCore
import HeraldJSON
import HeraldPayload
import PropertyBased
import Testing

@Suite("Payload builder: every key, fixed order, exact bytes")
struct PayloadBuilderTests {
    /// (request line, exact payload).
    static let vectors: [(String, String)] = [
        // Every alert key, given in a scrambled order: written in the fixed order.
        (#"{"alert":{"loc-args":["x","y"],"loc-key":"K","action-loc-key":"PLAY","subtitle-loc-args":["b","c"],"subtitle-loc-key":"SK","title-loc-args":["a"],"title-loc-key":"TK","launch-image":"L.png","body":"B","subtitle":"S","title":"T"}}"#,
         #"{"aps":{"alert":{"title":"T","subtitle":"S","body":"B","launch-image":"L.png","title-loc-key":"TK","title-loc-args":["a"],"subtitle-loc-key":"SK","subtitle-loc-args":["b","c"],"action-loc-key":"PLAY","loc-key":"K","loc-args":["x","y"]}}}"#),
        (#"{"alert":{"body":"hello","action-loc-key":null}}"#, #"{"aps":{"alert":{"body":"hello","action-loc-key":null}}}"#),
        (#"{"alert":{"body":"hi","launch-image":"Default"}}"#, #"{"aps":{"alert":{"body":"hi","launch-image":"Default"}}}"#),
        (#"{"alert":{"body":"only a body"}}"#, #"{"aps":{"alert":"only a body"}}"#),
        (#"{"alert":{}}"#, #"{"aps":{"alert":{}}}"#),
        (#"{"alert":{"title":"only a title"}}"#, #"{"aps":{"alert":{"title":"only a title"}}}"#),
        (#"{"alert":{"loc-key":"K","loc-args":[]}}"#, #"{"aps":{"alert":{"loc-key":"K","loc-args":[]}}}"#),
        (#"{"badge":0}"#, #"{"aps":{"badge":0}}"#),
        (#"{"badge":2147483648}"#, #"{"aps":{"badge":2147483648}}"#),
        (#"{"sound":"default"}"#, #"{"aps":{"sound":"default"}}"#),
        (#"{"sound":{"volume":0.75,"name":"alarm.caf","critical":1}}"#, #"{"aps":{"sound":{"critical":1,"name":"alarm.caf","volume":0.75}}}"#),
        (#"{"sound":{"critical":1,"name":"a","volume":1.0}}"#, #"{"aps":{"sound":{"critical":1,"name":"a","volume":1}}}"#),
        (#"{"sound":{"critical":0,"name":"a","volume":0}}"#, #"{"aps":{"sound":{"critical":0,"name":"a","volume":0}}}"#),
        (#"{"sound":{"critical":1,"name":"a","volume":1e-5}}"#, #"{"aps":{"sound":{"critical":1,"name":"a","volume":0.00001}}}"#),
        (#"{"sound":{"critical":1,"name":"a","volume":5E-1}}"#, #"{"aps":{"sound":{"critical":1,"name":"a","volume":0.5}}}"#),
        (#"{"alert":"a","thread-id":"chat-42"}"#, #"{"aps":{"alert":"a","thread-id":"chat-42"}}"#),
        (#"{"alert":"a","category":"GAME_INVITATION"}"#, #"{"aps":{"alert":"a","category":"GAME_INVITATION"}}"#),
        (#"{"alert":"a","content-available":1}"#, #"{"aps":{"alert":"a","content-available":1}}"#),
        (#"{"alert":"a","content-available":0}"#, #"{"aps":{"alert":"a"}}"#),
        (#"{"alert":"a","mutable-content":1}"#, #"{"aps":{"alert":"a","mutable-content":1}}"#),
        (#"{"alert":"a","target-content-id":"window-1"}"#, #"{"aps":{"alert":"a","target-content-id":"window-1"}}"#),
        (#"{"alert":"a","interruption-level":"time-sensitive"}"#, #"{"aps":{"alert":"a","interruption-level":"time-sensitive"}}"#),
        (#"{"alert":"a","relevance-score":0.25}"#, #"{"aps":{"alert":"a","relevance-score":0.25}}"#),
        (#"{"alert":"a","relevance-score":1}"#, #"{"aps":{"alert":"a","relevance-score":1}}"#),
        (#"{"alert":"a","relevance-score":0.0000015}"#, #"{"aps":{"alert":"a","relevance-score":0.0000015}}"#),
        (#"{"alert":"a","filter-criteria":"work"}"#, #"{"aps":{"alert":"a","filter-criteria":"work"}}"#),
        // Live Activities.
        (#"{"event":"update","timestamp":1700000000,"content-state":{"score":"2-1","minute":67},"stale-date":1700003600,"dismissal-date":1700007200}"#,
         #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"2-1","minute":67},"stale-date":1700003600,"dismissal-date":1700007200}}"#),
        (#"{"event":"start","timestamp":1,"content-state":{"a":1},"attributes":{"team":"X"},"attributes-type":"MatchAttributes","alert":{"title":"Kick-off","body":"X vs Y"}}"#,
         #"{"aps":{"alert":{"title":"Kick-off","body":"X vs Y"},"timestamp":1,"event":"start","content-state":{"a":1},"attributes-type":"MatchAttributes","attributes":{"team":"X"}}}"#),
        (#"{"event":"end","timestamp":2,"dismissal-date":3}"#, #"{"aps":{"timestamp":2,"event":"end","dismissal-date":3}}"#),
        (#"{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"input-push-token":1}"#,
         #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"input-push-token":1}}"#),
        (#"{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"input-push-channel":"ch-1"}"#,
         #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"input-push-channel":"ch-1"}}"#),
        // HTTP/2 headers are not payload.
        (#"{"alert":"a","push-type":"alert","collapse-id":"c-1","apns-id":"7c1e6f0a-1b2c-4d3e-8f40-5a6b7c8d9e0f"}"#, #"{"aps":{"alert":"a"}}"#),
        // Everything at once: the whole order.
        (#"{"filter-criteria":"f","relevance-score":0.5,"interruption-level":"passive","target-content-id":"t","mutable-content":1,"content-available":1,"category":"c","thread-id":"th","sound":"s","badge":1,"alert":"a"}"#,
         #"{"aps":{"alert":"a","badge":1,"sound":"s","thread-id":"th","category":"c","content-available":1,"mutable-content":1,"target-content-id":"t","interruption-level":"passive","relevance-score":0.5,"filter-criteria":"f"}}"#),
        // Apple's keys may also come inside an "aps" object of the request.
        (#"{"aps":{"badge":4,"alert":"x"}}"#, #"{"aps":{"alert":"x","badge":4}}"#),
        // Custom keys: any JSON value, in the request's order; numbers keep their text.
        (#"{"custom":{"o":{"k":[1,2.5,-3e2]},"a":[],"e":{},"s":"x","n":-0.5,"t":true,"f":false,"z":null}}"#,
         #"{"aps":{},"o":{"k":[1,2.5,-3e2]},"a":[],"e":{},"s":"x","n":-0.5,"t":true,"f":false,"z":null}"#),
        (#"{"custom":{"k\"ey":"v"}}"#, #"{"aps":{},"k\"ey":"v"}"#),
        // Escaping: quote, backslash, control characters; "/" and non-ASCII as they are.
        (#"{"alert":"a\"b\\c/d\n\t\r\b\f\u0001\u001f\u007fé😀\u2028"}"#,
         "{\"aps\":{\"alert\":\"a\\\"b\\\\c/d\\n\\t\\r\\b\\f\\u0001\\u001f\u{7F}é😀\u{2028}\"}}"),
        (#"{"alert":"\ud83d\ude00 \u00e9"}"#, #"{"aps":{"alert":"😀 é"}}"#),
        (#"{"alert":""}"#, #"{"aps":{"alert":""}}"#),
    ]

    @Test("exact payloads", arguments: vectors)
    func exact(_ line: String, _ expected: String) throws {
        let built = try payloadText(line)
        #expect(built.value == expected, "\(built)")
        // And the payload is strict JSON, semantically the request's content.
        let parsed = try JSONParser.parse(try #require(built.value))
        #expect(parsed.compactText == expected)
    }

    @Test("content-available only: priority 5 when none is given, dropped with priority 10")
    func contentAvailablePriority() throws {
        var r = try decodeRequest(#"{"content-available":1,"custom":{"sync":"inbox"}}"#)
        #expect(payloadText(&r).value == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
        #expect(r.priority == .considerPower)

        var explicit5 = try decodeRequest(#"{"content-available":1,"priority":5}"#)
        #expect(payloadText(&explicit5).value != nil)
        #expect(explicit5.priority == .considerPower)

        var low = try decodeRequest(#"{"content-available":1,"priority":1}"#)
        #expect(payloadText(&low).value != nil)
        #expect(low.priority == .low)

        var ten = try decodeRequest(#"{"content-available":1,"priority":10}"#)
        #expect(payloadText(&ten).failure?.reason.contains("priority 10") == true)

        // Not content-available-only: priority stays as given, or unset.
        var alert = try decodeRequest(#"{"content-available":1,"alert":"x","priority":10}"#)
        #expect(payloadText(&alert).value != nil)
        #expect(alert.priority == .immediately)
        var badge = try decodeRequest(#"{"content-available":1,"badge":1}"#)
        #expect(payloadText(&badge).value != nil)
        #expect(badge.priority == nil)

        // The raw form follows the same rule.
        var raw = try decodeRequest(#"{"payload":{"aps":{"content-available":1}}}"#)
        #expect(payloadText(&raw).value == #"{"aps":{"content-available":1}}"#)
        #expect(raw.priority == .considerPower)
        var rawTen = try decodeRequest(#"{"payload":{"aps":{"content-available":1}},"priority":10}"#)
        #expect(payloadText(&rawTen).failure != nil)
    }

    /// (request line, words the dropped reason must contain).
    static let invalid: [(String, String)] = [
        (#"{"badge":-1}"#, "\"aps.badge\" must be 0 or more"),
        (#"{"sound":{"critical":1,"name":"a","volume":1.5}}"#, "\"aps.sound.volume\" must be between 0 and 1, got 1.5"),
        (#"{"sound":{"critical":1,"name":"a","volume":-0.1}}"#, "\"aps.sound.volume\" must be between 0 and 1"),
        (#"{"alert":"a","relevance-score":1.01}"#, "\"aps.relevance-score\" must be between 0 and 1"),
        (#"{"alert":"a","relevance-score":-1}"#, "\"aps.relevance-score\" must be between 0 and 1"),
        (#"{"alert":"a","interruption-level":"loud"}"#, "\"aps.interruption-level\" must be one of"),
        (#"{"alert":"a","custom":{"aps":{"badge":1}}}"#, "custom key \"aps\" is reserved"),
        (#"{"alert":{"loc-args":["x"]}}"#, "\"aps.alert.loc-args\" needs \"loc-key\""),
        (#"{"alert":{"title-loc-args":["x"]}}"#, "needs \"title-loc-key\""),
        (#"{"alert":{"subtitle-loc-args":["x"]}}"#, "needs \"subtitle-loc-key\""),
        (#"{"event":"pause","timestamp":1,"content-state":{}}"#, "\"aps.event\" must be one of start, update, end"),
        (#"{"content-state":{"a":1}}"#, "needs \"event\""),
        (#"{"event":"update","content-state":{}}"#, "needs \"timestamp\""),
        (#"{"event":"update","timestamp":1}"#, "needs \"content-state\""),
        (#"{"event":"update","timestamp":1,"content-state":[1]}"#, "\"aps.content-state\" must be an object"),
        (#"{"event":"start","timestamp":1,"content-state":{}}"#, "start needs \"attributes-type\" and \"attributes\""),
        (#"{"event":"update","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{}}"#, "go only with event start"),
        (#"{"event":"end","timestamp":-5}"#, "\"aps.timestamp\" must be UNIX seconds"),
        (#"{"event":"update","timestamp":1,"content-state":{},"input-push-token":1}"#, "\"aps.input-push-token\" goes only with event start"),
        (#"{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"input-push-token":1,"input-push-channel":"c"}"#, "cannot be combined"),
        (#"{"content-available":1,"priority":10}"#, "cannot have priority 10"),
        // The raw form.
        (#"{"payload":{"acme":1}}"#, "has no \"aps\" dictionary"),
        (#"{"payload":{"aps":[]}}"#, "\"payload.aps\" must be an object, got array"),
        (#"{"payload":[1]}"#, "\"payload\" must be an object"),
        (#"{"payload":"{\"aps\":{}}"}"#, "\"payload\" must be an object"),
        (#"{"payload":{"aps":{"badge":-3}}}"#, "\"payload.aps.badge\" must be 0 or more"),
        (#"{"payload":{"aps":{"badge":"3"}}}"#, "\"payload.aps.badge\" must be an integer"),
        (#"{"payload":{"aps":{"alert":7}}}"#, "\"payload.aps.alert\" must be a string or an object"),
        (#"{"payload":{"aps":{"sound":{"critical":1,"name":"a","volume":2}}}}"#, "\"payload.aps.sound.volume\" must be between 0 and 1"),
        (#"{"payload":{"aps":{"relevance-score":7}}}"#, "\"payload.aps.relevance-score\" must be between 0 and 1"),
    ]

    @Test("invalid requests are dropped with a reason naming the key", arguments: invalid)
    func dropped(_ line: String, _ words: String) throws {
        let built = try payloadText(line)
        let reason = try #require(built.failure?.reason, "built \(built)")
        #expect(reason.contains(words), "\(reason)")
    }

    @Test("unknown keys inside a raw aps pass through (APNs ignores them)")
    func rawUnknownAPSKeys() throws {
        #expect(try payloadText(#"{"payload":{"aps":{"alert":"x","acme":[1]},"k":{}}}"#).value == #"{"aps":{"alert":"x","acme":[1]},"k":{}}"#)
    }

    @Test("the raw form is re-emitted compactly with its numbers' text")
    func rawCompact() throws {
        let line = "{\"payload\": { \"aps\" : { \"badge\" : 1 , \"sound\":\"a\\u0041\" } ,\n \"n\" : [ 1.50 , -0 , 2E+3 ] } }"
        #expect(try payloadText(line).value == #"{"aps":{"badge":1,"sound":"aA"},"n":[1.50,-0,2E+3]}"#)
    }

    @Test("invalid UTF-8 and lone surrogates never reach the builder: the line is rejected with a reason")
    func invalidUTF8() {
        let lines: [[UInt8]] = [
            Array(#"{"token":"\#(tokenHex)","alert":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8),  // bad continuation
            Array(#"{"token":"\#(tokenHex)","alert":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8),  // encoded surrogate
            Array(#"{"token":"\#(tokenHex)","alert":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8),  // overlong
            Array(#"{"token":"\#(tokenHex)","alert":""#.utf8) + [0xFF] + Array(#""}"#.utf8),
            Array(#"{"token":"\#(tokenHex)","alert":"\ud800"}"#.utf8),  // lone high surrogate escape
            Array(#"{"token":"\#(tokenHex)","alert":"\udc00x"}"#.utf8),  // lone low surrogate escape
        ]
        for bytes in lines {
            let result = bytes.withUnsafeBytes { raw in Result { () throws(RequestError) in try RequestDecoder().decode(line: raw) } }
            #expect(result.failure != nil, "\(bytes)")
        }
    }
}

@Suite("JSONNumber(Double): plain decimals, no exponent surprises")
struct JSONNumberTests {
    static let vectors: [(Double, String)] = [
        (0, "0"), (-0.0, "0"), (1, "1"), (0.5, "0.5"), (0.1, "0.1"), (0.75, "0.75"), (1e-5, "0.00001"),
        (1.5e-7, "0.00000015"), (0.000123, "0.000123"), (-2.5e-8, "-0.000000025"), (123.456, "123.456"),
        (1e15, "1000000000000000"), (1e20, "100000000000000000000"), (1.2345678901234568e20, "123456789012345680000"),
        (999999999999999, "999999999999999"), (0.1 + 0.2, "0.30000000000000004"), (9007199254740993, "9007199254740992"),
        (0x1p63, "9223372036854776000"), (-0x1p63, "-9223372036854776000"), (1e300, "1" + String(repeating: "0", count: 300)),
        (5e-324, "0." + String(repeating: "0", count: 323) + "5"),
    ]

    @Test("exact text", arguments: vectors)
    func exact(_ value: Double, _ text: String) {
        #expect(JSONNumber(value)?.text == text)
    }

    @Test("not finite: no number")
    func nonFinite() {
        #expect(JSONNumber(Double.nan) == nil)
        #expect(JSONNumber(Double.infinity) == nil)
        #expect(JSONNumber(-Double.infinity) == nil)
    }

    @Test("any finite double: plain decimal text that reads back to the same value")
    func roundTrip() async {
        let bits = Gen<UInt64>.value(in: 0...UInt64.max)
        await propertyCheck(count: 2000, input: bits) { b in
            let d = Double(bitPattern: b)
            guard d.isFinite else { return }
            let text = JSONNumber(d)!.text
            #expect(!text.contains("e") && !text.contains("E") && !text.contains("+"), "\(d) → \(text)")
            #expect(Double(text) == d, "\(d) → \(text)")
            #expect((try? JSONParser.parse(text)) != nil, "\(text) is not a JSON number")
            #expect(text.contains(".") == (d != d.rounded(.towardZero)), "integers without a fraction: \(d) → \(text)")
        }
        await propertyCheck(count: 2000, input: Gen.double(in: 0...1)) { d in
            let text = JSONNumber(d)!.text
            #expect(!text.contains("e") && Double(text) == d, "\(d) → \(text)")
        }
    }
}
