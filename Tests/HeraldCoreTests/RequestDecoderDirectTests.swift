@testable import HeraldCore
import HeraldJSON
import PropertyBased
import Testing

/// The request decoder's direct path (issue 29) against its tree path: whatever the line, the
/// direct path either gives up or gives exactly the tree's request, and `decode(line:)` always
/// answers as the tree does, errors included.
@Suite("RequestDecoder: the direct path equals the tree")
struct RequestDecoderDirectTests {
    static let token = String(repeating: "0a1B", count: 16)
    static let keys = [
        "id", "token", "topic", "alert", "badge", "sound", "priority", "expiry", "language", "thread-id", "category",
        "content-available", "mutable-content", "custom", "colour", "aps", "payload", "channel-id", "push-type", "to\\u006ben", "app", "lane",
    ]
    static let values = [
        #""\#(token)""#, #""\#(token.uppercased())""#, #""abc""#, #""zz\#(token.dropFirst(2))""#, #""""#, #""\#(token)0""#,
        "0", "1", "5", "10", "-1", "-0", "42", "4294967295", "4294967296", "123456789012345678901", "1.0", "1e2", "01", "-",
        "true", "false", "null", "tru",
        #""plain""#, #""esc\"aped""#, #""caf\u00e9""#, "\"caf\u{e9} raw\"", "\"\u{1F600}\"", #""tab\there""#, #""\ud800""#,
        #"{"title":"t","body":"b"}"#, #"{"loc-key":"K","loc-args":["a","b"]}"#, #"{"loc-args":[1]}"#, "{}", #"{"body":"x","body":"y"}"#,
        #"{"title-loc-key":"T","title-loc-args":[],"subtitle":"s","launch-image":"i.png","subtitle-loc-key":"S","subtitle-loc-args":["z"]}"#,
        #"{"action":"go"}"#, #"{"body":1}"#, #"{"k":[1,{"n":null}]}"#, "[]", #"["a","b"]"#, #"{"#, "[1,",
    ]
    static let blanks = ["", " ", "\t", "\n ", "  "]

    /// A line from picks: key and value indexes, and blanks between tokens.
    static func line(_ picks: [Int]) -> String {
        var out = blanks[(picks.first ?? 0) % blanks.count] + "{"
        var k = 1
        var first = true
        while k + 2 < picks.count {
            if !first { out += "," }
            first = false
            out += blanks[picks[k + 2] % blanks.count] + "\"" + keys[picks[k] % keys.count] + "\"" + blanks[picks[k + 2] / 7 % blanks.count] + ":"
            out += values[picks[k + 1] % values.count]
            k += 3
        }
        // Now and then a broken ending or trailing data.
        switch (picks.last ?? 0) % 9 {
        case 0: out += ","
        case 1: out += "} x"
        case 2: out += ""
        default: out += "}" + blanks[(picks.last ?? 0) % blanks.count]
        }
        return out
    }

    /// Picks that bias towards a valid request: a token first, then other keys.
    static func request(_ picks: [Int]) -> String {
        line([0, 1, 0, 0] + picks)
    }

    /// Values each known key takes (a valid request, mostly).
    static let valid: [(String, [String])] = [
        ("id", ["0", "7", "4294967295", "-0"]), ("topic", [#""com.example.app""#, #""caf\u00e9""#, "\"caf\u{e9}\""]),
        ("alert", [#""hi""#, #"{"title":"t","body":"b"}"#, #"{"loc-key":"K","loc-args":["a","\u00e9"]}"#, "{}"]),
        ("badge", ["0", "5", "-3"]), ("sound", [#""default""#]), ("priority", ["10", "5", "1"]), ("expiry", ["0", "1700000000"]),
        ("language", [#""fr-CA""#]), ("thread-id", [#""t1""#]), ("category", [#""C""#]), ("content-available", ["1", "true", "0"]),
        ("mutable-content", ["1", "false"]), ("custom", [#"{"k":[1,{"n":null}],"s":"x"}"#, "{}"]),
        ("app", [#""chat""#, #""news.v2-b_1""#, #""ch\u0061t""#]), ("lane", [#""fast""#, #""bulk""#]),
    ]

    /// A valid request: a token, then known keys with values of their type, each key once.
    static func validRequest(_ picks: [Int]) -> String {
        var fields = [#""token":"\#(token)""#]
        var used = Set<Int>()
        for p in picks {
            let k = p % valid.count
            guard used.insert(k).inserted else { continue }
            fields.insert(#""\#(valid[k].0)":\#(valid[k].1[p / 13 % valid[k].1.count])"#, at: p % (fields.count + 1))
        }
        return "{" + fields.joined(separator: blanks[(picks.first ?? 0) % blanks.count] + ",") + "}"
    }

    static func check(_ text: String, direct: inout Int) {
        let decoder = RequestDecoder()
        Array(text.utf8).withUnsafeBytes { raw in
            let tree = Result { () throws(RequestError) in try decoder.decodeTree(line: raw) }
            if let d = decoder.decodeDirect(raw) {
                direct += 1
                if case .success(let t) = tree { #expect(t == d, "\(text)") } else { Issue.record("direct path decoded \(text), the tree refused it: \(tree)") }
            }
            let both = Result { () throws(RequestError) in try decoder.decode(line: raw) }
            switch (both, tree) {
            case (.success(let a), .success(let b)): #expect(a == b, "\(text)")
            case (.failure(let a), .failure(let b)): #expect(a == b, "\(text)")
            default: Issue.record("decode(line:) and the tree disagree on \(text): \(both) / \(tree)")
            }
            // In place, into a blank request (as sources decode into the batch they fill): the same.
            var placed = NotificationRequest.blank
            let inPlace = Result { () throws(RequestError) in try decoder.decode(line: raw, into: &placed) }
            switch (inPlace, tree) {
            case (.success, .success(let b)): #expect(placed == b, "\(text)")
            case (.failure(let a), .failure(let b)): #expect(a == b, "\(text)")
            default: Issue.record("decode(line:into:) and the tree disagree on \(text): \(inPlace) / \(tree)")
            }
        }
    }

    @Test("generated lines: the direct path gives up or equals the tree; decode(line:) always equals the tree")
    func generated() async {
        var direct = 0, validDirect = 0, total = 0
        await propertyCheck(count: 3000, input: Gen.int(in: 0...1000).array(of: 0...30)) { picks in
            total += 1
            Self.check(Self.line(picks), direct: &direct)
            Self.check(Self.request(picks), direct: &direct)
            Self.check(Self.validRequest(picks), direct: &validDirect)
        }
        // Valid requests of the shapes it reads all take the direct path, so the comparison is not empty.
        #expect(validDirect == total, "direct path took \(validDirect) of \(total) valid requests")
        #expect(direct > 0)
    }

    @Test("the lines herald send is measured on take the direct path")
    func benchLines() {
        let line = #"{"id":7,"token":"\#(Self.token)","topic":"com.example.app","alert":{"title":"Game Request","body":"Bob wants to play poker"},"badge":1}"#
        let request = Array(line.utf8).withUnsafeBytes { RequestDecoder().decodeDirect($0) }
        #expect(request?.id == 7 && request?.aps.badge == 1 && request?.aps.alert?.body == "Bob wants to play poker" && request?.topic == "com.example.app")
        var direct = 0
        Self.check(line, direct: &direct)
        #expect(direct == 1)
    }
}
