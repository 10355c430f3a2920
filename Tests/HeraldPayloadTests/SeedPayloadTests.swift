import HeraldCore
import HeraldJSON
import HeraldPayload
import Testing

/// One payload example from the seed documents.
struct SeedExample: Sendable, CustomTestStringConvertible {
    let name: String
    /// The listing as printed.
    let document: String
    /// Errata in the printed text, fixed before parsing: (as printed, corrected).
    let repairs: [(String, String)]
    /// The same notification as a Herald request (structured form).
    let request: String
    /// The exact compact payload Herald must produce from `request`.
    let compact: String
    /// The document places custom keys inside `aps` (a misplaced brace in the guide):
    /// the structured form puts them beside `aps`, where the guide's text says they belong.
    var customKeysInsideAPS = false

    var testDescription: String { name }

    /// The document with its errata fixed, parsed strictly.
    func parsedDocument() throws -> JSONValue {
        var text = document
        for (from, to) in repairs {
            #expect(text.contains(from), "repair \(from) does not apply to \(name)")
            text = text.replacingAll(from, with: to)
        }
        return try JSONParser.parse(text)
    }
}

extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = self[...]
        while let r = rest.firstRange(of: target) {
            out += rest[..<r.lowerBound]
            out += replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}

let curlyQuotes: [(String, String)] = [("\u{201C}", "\""), ("\u{201D}", "\"")]

let example1 = #"{"aps":{"alert":"Message received from Bob"},"acme2":["bang","whiz"]}"#
let example2 = #"{"aps":{"alert":{"body":"Bob wants to play poker","action-loc-key":"PLAY"},"badge":5},"acme1":"bar","acme2":["bang","whiz"]}"#
let example3 = #"{"aps":{"alert":"You got your emails.","badge":9,"sound":"bingbong.aiff"},"acme1":"bar","acme2":42}"#
let example4 = #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]},"sound":"chime"},"acme":"foo"}"#
let example5 = #"{"aps":{},"acme2":[5,8]}"#

let request1 = #"{"alert":"Message received from Bob","custom":{"acme2":["bang","whiz"]}}"#
let request2 = #"{"alert":{"body":"Bob wants to play poker","action-loc-key":"PLAY"},"badge":5,"custom":{"acme1":"bar","acme2":["bang","whiz"]}}"#
let request3 = #"{"alert":"You got your emails.","badge":9,"sound":"bingbong.aiff","custom":{"acme1":"bar","acme2":42}}"#
let request4 = #"{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]},"sound":"chime","custom":{"acme":"foo"}}"#
let request5 = #"{"custom":{"acme2":[5,8]}}"#

/// The five examples of both payload guides and the three listings of the current reference.
let seedExamples: [SeedExample] = [
    SeedExample(name: "2011 guide, example 1", document: SeedDocuments.guide2011_example1, repairs: [], request: request1, compact: example1),
    SeedExample(
        name: "2011 guide, example 2", document: SeedDocuments.guide2011_example2,
        repairs: [("\"action-loc-\n    key\"", "\"action-loc-key\"")],  // a key broken across two lines
        request: request2, compact: example2, customKeysInsideAPS: true),
    SeedExample(name: "2011 guide, example 3", document: SeedDocuments.guide2011_example3, repairs: [], request: request3, compact: example3),
    SeedExample(
        name: "2011 guide, example 4", document: SeedDocuments.guide2011_example4,
        repairs: [("\"chime\",", "\"chime\"")],  // a trailing comma
        request: request4, compact: example4),
    SeedExample(name: "2011 guide, example 5", document: SeedDocuments.guide2011_example5, repairs: [], request: request5, compact: example5),
    SeedExample(name: "programming guide, example 1", document: SeedDocuments.programmingGuide_example1, repairs: [], request: request1, compact: example1),
    SeedExample(
        name: "programming guide, example 2", document: SeedDocuments.programmingGuide_example2, repairs: [],
        request: request2, compact: example2, customKeysInsideAPS: true),
    SeedExample(name: "programming guide, example 3", document: SeedDocuments.programmingGuide_example3, repairs: [], request: request3, compact: example3),
    SeedExample(
        name: "programming guide, example 4", document: SeedDocuments.programmingGuide_example4,
        repairs: [("\"chime\",", "\"chime\"")],  // a trailing comma
        request: request4, compact: example4),
    SeedExample(name: "programming guide, example 5", document: SeedDocuments.programmingGuide_example5, repairs: [], request: request5, compact: example5),
    SeedExample(
        name: "current reference, listing 1", document: SeedDocuments.reference_listing1,
        repairs: curlyQuotes + [
            ("\"Five Card Draw\"\n", "\"Five Card Draw\",\n"),  // a missing comma
            ("\"Bob wants to play poker\",\n}", "\"Bob wants to play poker\"\n}"),  // a trailing comma
        ],
        request: #"{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker"},"category":"GAME_INVITATION","custom":{"gameID":"12345678"}}"#,
        compact: #"{"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker"},"category":"GAME_INVITATION"},"gameID":"12345678"}"#),
    SeedExample(
        name: "current reference, listing 2", document: SeedDocuments.reference_listing2,
        repairs: curlyQuotes + [("\"badge\" : 9\n", "\"badge\" : 9,\n")],  // a missing comma
        request: #"{"badge":9,"sound":"bingbong.aiff","custom":{"messageID":"ABCDEFGHIJ"}}"#,
        compact: #"{"aps":{"badge":9,"sound":"bingbong.aiff"},"messageID":"ABCDEFGHIJ"}"#),
    SeedExample(
        name: "current reference, listing 3", document: SeedDocuments.reference_listing3, repairs: [],
        request: #"{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"]}}"#,
        compact: #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"]}}}"#),
]

@Suite("The seeds' example payloads")
struct SeedPayloadTests {
    @Test("structured request → byte-exact compact payload, semantically equal to the document", arguments: seedExamples)
    func structured(_ example: SeedExample) throws {
        let built = try payloadText(example.request)
        #expect(built.value == example.compact)
        var document = try example.parsedDocument()
        if example.customKeysInsideAPS { document = movingCustomKeysOutOfAPS(document) }
        let parsed = try JSONParser.parse(try #require(built.value))
        #expect(parsed.semanticallyEquals(document), "\(parsed.compactText) vs \(document.compactText)")
    }

    @Test("raw form: the document as printed is re-emitted compactly, keeping its order", arguments: seedExamples)
    func raw(_ example: SeedExample) throws {
        let document = try example.parsedDocument()
        var request = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 1, count: 32)))
        request.rawPayload = document
        let built = try #require(payloadText(&request).value)
        #expect(try JSONParser.parse(built) == document)  // same keys, same order, same values
        #expect(built == document.compactText)
        if !example.customKeysInsideAPS { #expect(built == example.compact) }
    }

    @Test("raw form of example 2 as printed, custom keys inside aps, byte-exact")
    func rawExample2AsPrinted() throws {
        for example in seedExamples where example.customKeysInsideAPS {
            var request = try decodeRequest("{}")
            request.rawPayload = try example.parsedDocument()
            #expect(payloadText(&request).value
                == #"{"aps":{"alert":{"body":"Bob wants to play poker","action-loc-key":"PLAY"},"badge":5,"acme1":"bar","acme2":["bang","whiz"]}}"#)
        }
    }

    /// The payload samples table of the "Building Notification Payloads" chapter, already compact.
    static let chapterSamples: [(sample: String, request: String, herald: String)] = [
        (#"{"aps":{"alert":"hello"}}"#, #"{"alert":"hello"}"#, #"{"aps":{"alert":"hello"}}"#),
        // A body-only dictionary goes out as a plain string: same display, fewer bytes (the guides advise it).
        (#"{"aps":{"alert":{"body":"hello"}}}"#, #"{"alert":{"body":"hello"}}"#, #"{"aps":{"alert":"hello"}}"#),
        (#"{"aps":{"alert":{"action-loc-key":null,"body":"hello"}}}"#, #"{"alert":{"action-loc-key":null,"body":"hello"}}"#,
         #"{"aps":{"alert":{"body":"hello","action-loc-key":null}}}"#),
        (#"{"aps":{"alert":{"action-loc-key":"Open","body":"hello"}}}"#, #"{"alert":{"action-loc-key":"Open","body":"hello"}}"#,
         #"{"aps":{"alert":{"body":"hello","action-loc-key":"Open"}}}"#),
        (#"{"aps":{"badge":3,"alert":{"body":"hello"}}}"#, #"{"badge":3,"alert":{"body":"hello"}}"#, #"{"aps":{"alert":"hello","badge":3}}"#),
        (#"{"aps":{"sound":"ping2.caf","alert":{}}}"#, #"{"sound":"ping2.caf","alert":{}}"#, #"{"aps":{"alert":{},"sound":"ping2.caf"}}"#),
        (#"{"aps":{"sound":"ping2.caf","badge":2,"alert":{"action-loc-key":"Open","body":"Hello"}}}"#,
         #"{"sound":"ping2.caf","badge":2,"alert":{"action-loc-key":"Open","body":"Hello"}}"#,
         #"{"aps":{"alert":{"body":"Hello","action-loc-key":"Open"},"badge":2,"sound":"ping2.caf"}}"#),
        (#"{"aps":{"alert":{"body":"Hello"}},"key1":"value1","key2":["a","b","c"]}"#,
         #"{"alert":{"body":"Hello"},"custom":{"key1":"value1","key2":["a","b","c"]}}"#,
         #"{"aps":{"alert":"Hello"},"key1":"value1","key2":["a","b","c"]}"#),
    ]

    @Test("the chapter's samples: raw byte-exact; structured in Herald's key order, semantically equal")
    func chapterSamples() throws {
        for (sample, line, herald) in Self.chapterSamples {
            var raw = try decodeRequest("{}")
            raw.rawPayload = try JSONParser.parse(sample)
            #expect(payloadText(&raw).value == sample)

            let built = try #require(try payloadText(line).value)
            #expect(built == herald)
            let expected = try JSONParser.parse(sample)
            let parsed = try JSONParser.parse(built)
            if sample.contains(#"{"body":"hello"}"#) || sample.contains(#"{"body":"Hello"}"#) {
                // The body-only dictionary became a string; everything else is equal.
                #expect(parsed.semanticallyEquals(try JSONParser.parse(sample.replacingAll(#"{"body":"hello"}"#, with: #""hello""#)
                    .replacingAll(#"{"body":"Hello"}"#, with: #""Hello""#))))
            } else {
                #expect(parsed.semanticallyEquals(expected))
            }
        }
    }
}

/// Moves the non-Apple keys of `aps` beside it.
func movingCustomKeysOutOfAPS(_ v: JSONValue) -> JSONValue {
    guard case .object(var top) = v, case .object(var aps)? = top["aps"] else { return v }
    var moved: [(String, JSONValue)] = []
    for (k, value) in aps where !APSKey.order.contains(k) {
        moved.append((k, value))
        aps[k] = nil
    }
    top["aps"] = .object(aps)
    for (k, value) in moved { top[k] = value }
    return .object(top)
}
