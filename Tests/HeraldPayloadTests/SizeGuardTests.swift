import HeraldCore
import HeraldJSON
import HeraldPayload
import PropertyBased
import Testing

/// Pieces of text that stress escaping and grapheme clusters.
let unicodePalette: [String] = [
    "a", "Z", " ", "0", "\"", "\\", "/", "\n", "\t", "\r", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}", "\u{8}", "\u{C}",
    "é", "e\u{301}", "a\u{300}\u{316}\u{35C}\u{361}", "\u{301}", "ñ",  // precomposed, combining marks, a lone mark
    "👍", "👍🏿", "👍🏻", "👩‍👩‍👧‍👦", "👨🏽‍💻", "🏳️‍🌈", "❤️", "1️⃣", "🇫🇷", "🇩🇪", "🇺", "\u{200D}", "\u{FE0F}",  // emoji, ZWJ, flags
    "漢字", "中文", "日本語", "한국어", "\u{1100}\u{1161}\u{11A8}",  // CJK, Hangul jamo
    "שלום", "مرحبا", "\u{200F}", "\u{202E}", "עִבְרִית",  // right-to-left, bidi controls, pointed Hebrew
    "…", "\u{2028}", "\u{2029}", "\u{FEFF}", "\u{10FFFF}", "𝄞", "\r\n",
]

/// Random text from the palette and from random scalars.
let textGen = Gen.int(in: 0...Int.max).array(of: 0...120).map { picks -> String in
    var s = ""
    for x in picks {
        let p = x % (2 * unicodePalette.count)
        if p < unicodePalette.count {
            s += unicodePalette[p]
        } else {
            // A random scalar: half from the first 0x3000 (Latin, combining marks, scripts), half from any plane.
            let v = (x >> 8) & 1 == 0 ? UInt32((x >> 9) % 0x3000) : UInt32((x >> 9) % 0x110000)
            s.unicodeScalars.append(Unicode.Scalar(v) ?? "\u{FFFD}")
        }
    }
    return s
}

func envelope(_ request: NotificationRequest) throws -> Envelope {
    var r = request
    var e = Envelope(sequence: 0, request: r)
    e.payload = try APSPayloadBuilder().build(&r)
    e.request = r
    return e
}

func payloadSize(body: String, in request: NotificationRequest, field: TruncatableField = .body) throws -> Int {
    var r = request
    field.setText(body, in: &r)
    return try APSPayloadBuilder().build(&r).count
}

/// The UTF-8 offsets where `s`'s grapheme clusters start, and its end, by walking forward.
func graphemeBoundaries(_ s: String) -> [Int] {
    var out = [0]
    var n = 0
    for c in s { n += c.utf8.count; out.append(n) }
    return out
}

/// The reference: the longest prefix, on grapheme boundaries by walking forward, within `budget` escaped bytes.
func referencePrefix(_ s: String, _ budget: Int) -> String {
    var out = ""
    var used = 0
    for c in s {
        let n = JSONWriter.escapedSize(of: String(c))
        if used + n > budget { break }
        used += n
        out.append(c)
    }
    return out
}

@Suite("Size guard: reject and truncate")
struct SizeGuardTests {
    @Test("limits by profile")
    func profiles() {
        #expect(SizeLimit.profile(named: "binary-legacy")?.bytes == 256)
        #expect(SizeLimit.profile(named: "binary")?.bytes == 2048)
        #expect(SizeLimit.profile(named: "http2")?.bytes == 4096)
        #expect(SizeLimit.profile(named: "voip")?.bytes == 5120)
        #expect(SizeLimit.profile(named: "nope") == nil)
        #expect(SizeLimit(bytes: 1000).bytes == 1000)
    }

    @Test("reject: over by how many bytes; at the limit passes")
    func reject() throws {
        var aps = APS()
        aps.alert = Alert(body: String(repeating: "x", count: 100))
        var e = try envelope(request(aps))
        #expect(e.payload.count == 120)  // {"aps":{"alert":"…"}} is 20 bytes around the body
        try RejectingSizeGuard(limit: SizeLimit(bytes: 120)).enforce(&e)
        #expect(throws: StageFailure("payload is 120 bytes, 20 over the limit of 100", code: .payloadTooLarge)) {
            try RejectingSizeGuard(limit: SizeLimit(bytes: 100)).enforce(&e)
        }
    }

    @Test("truncate: exact results")
    func truncateExact() throws {
        func truncate(_ body: String, limit: Int) throws -> String {
            var aps = APS()
            aps.alert = Alert(body: body)
            var e = try envelope(request(aps))
            try TruncatingSizeGuard(limit: SizeLimit(bytes: limit)).enforce(&e)
            #expect(e.payload.count <= limit)
            #expect(e.request.aps.alert?.body == (try JSONParser.parse(e.payload).objectValue?["aps"]?.objectValue?["alert"]?.stringValue))
            return String(decoding: e.payload, as: UTF8.self)
        }
        // 20 bytes of frame, so a limit of 30 leaves 10 for the body: 7 + "…".
        #expect(try truncate("Hello, wonderful world", limit: 30) == #"{"aps":{"alert":"Hello, …"}}"#)
        // Quotes take 2 bytes each: 3 quotes (6 bytes) + "…" (3) ≤ 10, a 4th would be 11.
        #expect(try truncate(#""""""""""#, limit: 30) == #"{"aps":{"alert":"\"\"\"…"}}"#)
        // A control character takes 6 bytes escaped.
        #expect(try truncate("\u{1}\u{1}\u{1}", limit: 30) == #"{"aps":{"alert":"\u0001…"}}"#)
        // A family emoji (25 bytes) is never split: the cut goes before it.
        #expect(try truncate("ab👩‍👩‍👧‍👦cd", limit: 40) == #"{"aps":{"alert":"ab…"}}"#)
        // e + combining acute stays together.
        #expect(try truncate("abcde\u{301}fghij", limit: 28) == #"{"aps":{"alert":"abcd…"}}"#)
        #expect(try truncate("abcde\u{301}fghij", limit: 30) == "{\"aps\":{\"alert\":\"abcde\u{301}…\"}}")
        // Flags are pairs of regional indicators: never half a flag.
        #expect(try truncate("🇫🇷🇩🇪🇺🇸", limit: 34) == #"{"aps":{"alert":"🇫🇷…"}}"#)
        // Exactly at the limit: untouched.
        #expect(try truncate("Hello", limit: 25) == #"{"aps":{"alert":"Hello"}}"#)
        // The shortest truncated text is "…" alone.
        #expect(try truncate("Hello", limit: 23) == #"{"aps":{"alert":"…"}}"#)
    }

    @Test("truncate: dropped when even an empty body (\"…\") does not fit, or there is no text")
    func truncateDropped() throws {
        var aps = APS()
        aps.alert = Alert(body: "Hello there")
        var e = try envelope(request(aps, custom: JSONObject([("blob", .string(String(repeating: "z", count: 300)))])))
        #expect(throws: StageFailure.self) { try TruncatingSizeGuard(limit: .legacyBinary).enforce(&e) }
        do {
            try TruncatingSizeGuard(limit: .legacyBinary).enforce(&e)
        } catch {
            #expect(error.reason.contains("over the limit of 256"))
            #expect(error.reason.contains("shortened to \"…\""))
        }

        var locOnly = APS()
        locOnly.alert = Alert()
        locOnly.alert?.locKey = String(repeating: "K", count: 300)
        var l = try envelope(request(locOnly))
        #expect(throws: StageFailure.self) { try TruncatingSizeGuard(limit: .legacyBinary).enforce(&l) }
    }

    @Test("truncate: other fields only when configured, in order")
    func truncateFields() throws {
        var aps = APS()
        aps.alert = Alert(body: "body text here", title: String(repeating: "T", count: 60), subtitle: "sub")
        let e = try envelope(request(aps))
        let size = e.payload.count
        // Body alone cannot save enough: dropped with the default fields.
        var a = e
        #expect(throws: StageFailure.self) { try TruncatingSizeGuard(limit: SizeLimit(bytes: size - 40)).enforce(&a) }
        // With the title configured: body becomes "…", then the title is cut to fit exactly.
        var b = e
        try TruncatingSizeGuard(limit: SizeLimit(bytes: size - 40), fields: [.body, .subtitle, .title]).enforce(&b)
        #expect(b.payload.count == size - 40)
        #expect(b.request.aps.alert?.body == "…")
        #expect(b.request.aps.alert?.subtitle == "sub")  // "sub" is not longer than "…": left alone
        #expect(b.request.aps.alert?.title == String(repeating: "T", count: 28) + "…")
        // Body suffices: the title is untouched.
        var c = e
        try TruncatingSizeGuard(limit: SizeLimit(bytes: size - 5), fields: [.body, .title]).enforce(&c)
        #expect(c.request.aps.alert?.body == "body t…")
        #expect(c.request.aps.alert?.title == aps.alert?.title)
    }

    @Test("truncate: a payload that no longer matches its request (changed by a custom stage) is rebuilt, not spliced")
    func truncateStalePayload() throws {
        var aps = APS()
        aps.alert = Alert(body: String(repeating: "a", count: 40))
        var e = try envelope(request(aps))
        e.request.aps.alert?.body = String(repeating: "b", count: 80)  // changed after the payload was built
        try TruncatingSizeGuard(limit: SizeLimit(bytes: 50)).enforce(&e)
        var rebuilt = e.request
        #expect(try APSPayloadBuilder().build(&rebuilt) == e.payload)
        #expect(e.payload.count <= 50)
    }

    @Test("truncate: the raw form too")
    func truncateRaw() throws {
        var r = try decodeRequest(#"{"payload":{"aps":{"alert":"Hello, wonderful world","badge":1},"k":"v"}}"#)
        var e = Envelope(sequence: 0, request: r)
        e.payload = try APSPayloadBuilder().build(&r)
        try TruncatingSizeGuard(limit: SizeLimit(bytes: e.payload.count - 10)).enforce(&e)
        #expect(String(decoding: e.payload, as: UTF8.self) == #"{"aps":{"alert":"Hello, wo…","badge":1},"k":"v"}"#)

        var d = try decodeRequest(#"{"payload":{"aps":{"alert":{"title":"T","body":"Hello, wonderful world"}}}}"#)
        var f = Envelope(sequence: 0, request: d)
        f.payload = try APSPayloadBuilder().build(&d)
        try TruncatingSizeGuard(limit: SizeLimit(bytes: f.payload.count - 10)).enforce(&f)
        #expect(String(decoding: f.payload, as: UTF8.self) == #"{"aps":{"alert":{"title":"T","body":"Hello, wo…"}}}"#)
    }

    @Test("property: payloads are valid JSON that parse back to the input")
    func roundTrip() async {
        await propertyCheck(count: 400, input: textGen, textGen, textGen) { body, title, value in
            var aps = APS()
            aps.alert = Alert(body: body, title: title.isEmpty ? nil : title)
            aps.threadID = value
            let key = value.isEmpty || value == "aps" ? "k" : value
            var r = request(aps, custom: JSONObject([(key, .string(body)), ("n", .array([.string(title), .null]))]))
            let bytes: [UInt8]
            do { bytes = try APSPayloadBuilder().build(&r) } catch { Issue.record("\(error)"); return }
            guard let parsed = try? JSONParser.parse(bytes) else { Issue.record("not valid JSON: \(bytes)"); return }
            let alert: JSONValue = title.isEmpty ? .string(body) : .object(JSONObject([("title", .string(title)), ("body", .string(body))]))
            let expected = JSONValue.object(JSONObject([
                ("aps", .object(JSONObject([("alert", alert), ("thread-id", .string(value))]))),
                (key, .string(body)), ("n", .array([.string(title), .null])),
            ]))
            #expect(parsed == expected)
            // The size is the arithmetic the size guard relies on.
            let frame = title.isEmpty ? 0 : 20 + JSONWriter.escapedSize(of: title)
            #expect(bytes.count == 2 * JSONWriter.escapedSize(of: body) + JSONWriter.escapedSize(of: value) + JSONWriter.escapedSize(of: key)
                + JSONWriter.escapedSize(of: title) + frame + 55)
        }
    }

    @Test("property: the prefix search matches a forward grapheme walk")
    func prefixMatchesReference() async {
        await propertyCheck(count: 600, input: textGen, Gen.int(in: 0...400)) { s, budget in
            let fast = String(TextTruncation.longestPrefix(of: s, fittingEscapedBytes: budget))
            #expect(Array(fast.utf8) == Array(referencePrefix(s, budget).utf8), "budget \(budget)")
        }
    }

    @Test("property: truncation is never over the limit, maximal, on grapheme boundaries")
    func truncation() async {
        await propertyCheck(count: 600, input: textGen, textGen, Gen.int(in: 16...420)) { body, custom, limit in
            var aps = APS()
            aps.alert = Alert(body: body)
            aps.badge = 7
            let r = request(aps, custom: JSONObject([("c", .string(custom))]))
            guard var e = try? envelope(r) else { Issue.record("build failed"); return }
            let original = e.payload
            do {
                try TruncatingSizeGuard(limit: SizeLimit(bytes: limit)).enforce(&e)
            } catch {
                // Dropped only if even "…" alone is over, or the body is too short to shorten.
                let minimal = (try? payloadSize(body: "…", in: r)) ?? 0
                #expect(minimal > limit || JSONWriter.escapedSize(of: body) <= 3, "\(error)")
                #expect(original.count > limit)
                return
            }
            #expect(e.payload.count <= limit)
            // The spliced payload is exactly what the builder makes of the shortened request.
            var rebuilt = e.request
            #expect((try? APSPayloadBuilder().build(&rebuilt)) == e.payload)
            guard let parsed = try? JSONParser.parse(e.payload),
                let newBody = parsed.objectValue?["aps"]?.objectValue?["alert"]?.stringValue
            else { Issue.record("invalid payload"); return }
            #expect(parsed.objectValue?["c"]?.stringValue == custom)
            #expect(newBody == e.request.aps.alert?.body)
            if original.count <= limit {
                #expect(e.payload == original)
                return
            }
            // Ends with "…"; the rest is a prefix of the body ending on a grapheme boundary.
            let bytes = Array(newBody.utf8)
            #expect(bytes.suffix(3) == [0xE2, 0x80, 0xA6])
            let prefix = Array(bytes.dropLast(3))
            #expect(Array(body.utf8).starts(with: prefix))
            let boundaries = graphemeBoundaries(body)
            #expect(boundaries.contains(prefix.count), "cut at byte \(prefix.count) is inside a grapheme cluster")
            // Maximal: one more grapheme cluster would be over.
            if let next = boundaries.first(where: { $0 > prefix.count }), next <= body.utf8.count {
                let longer = String(decoding: body.utf8.prefix(next), as: UTF8.self) + "…"
                #expect((try? payloadSize(body: longer, in: r)) ?? 0 > limit, "a longer prefix (\(next) bytes) fits")
            }
        }
    }

    @Test("property: several fields: never over, the earlier fields cut first")
    func severalFields() async {
        await propertyCheck(count: 300, input: textGen, textGen, textGen, Gen.int(in: 40...300)) { body, subtitle, title, limit in
            var aps = APS()
            aps.alert = Alert(body: body, title: title, subtitle: subtitle)
            guard var e = try? envelope(request(aps)) else { return }
            let original = e.payload.count
            let guardPolicy = TruncatingSizeGuard(limit: SizeLimit(bytes: limit), fields: [.body, .subtitle, .title])
            do {
                try guardPolicy.enforce(&e)
            } catch {
                var all = aps
                for f in [\Alert.body, \Alert.subtitle, \Alert.title] where JSONWriter.escapedSize(of: (all.alert![keyPath: f])!) > 3 {
                    all.alert![keyPath: f] = "…"
                }
                var rr = request(all)
                #expect(((try? APSPayloadBuilder().build(&rr).count) ?? 0) > limit)
                return
            }
            #expect(e.payload.count <= limit)
            #expect((try? JSONParser.parse(e.payload)) != nil)
            var rebuilt = e.request
            #expect((try? APSPayloadBuilder().build(&rebuilt)) == e.payload)
            let a = e.request.aps.alert!
            if original > limit {
                // The title is cut only if the subtitle and body are at their shortest.
                if a.title != title { #expect(a.body == "…" || JSONWriter.escapedSize(of: body) <= 3) }
                if a.subtitle != subtitle { #expect(a.body == "…" || JSONWriter.escapedSize(of: body) <= 3) }
            } else {
                #expect(a.body == body && a.title == title && a.subtitle == subtitle)
            }
        }
    }

    @Test("property: the builder reports where each alert text sits in the payload")
    func textOffsets() async {
        await propertyCheck(count: 300, input: textGen, textGen, textGen, Gen.int(in: 0...7)) { body, subtitle, title, mask in
            var aps = APS()
            aps.alert = Alert(body: mask & 1 != 0 ? body : nil, title: mask & 2 != 0 ? title : nil, subtitle: mask & 4 != 0 ? subtitle : nil)
            aps.badge = 1
            var r = request(aps)
            guard let payload = try? APSPayloadBuilder().build(&r) else { Issue.record("build failed"); return }
            for field in TruncatableField.all {
                guard let text = field.text(in: r) else {
                    #expect(APSPayloadBuilder.textOffset(of: field, in: r) == nil)
                    continue
                }
                guard let offset = APSPayloadBuilder.textOffset(of: field, in: r) else { Issue.record("no offset for \(field)"); continue }
                var w = JSONWriter()
                w.string(text)
                let escaped = w.bytes.dropFirst().dropLast()
                #expect(offset + escaped.count < payload.count && Array(payload[offset..<(offset + escaped.count)]) == Array(escaped), "\(field)")
                #expect(payload[offset - 1] == UInt8(ascii: "\"") && payload[offset + escaped.count] == UInt8(ascii: "\""))
            }
        }
    }

    @Test("property: escaped sizes and prefixes match a byte-by-byte count")
    func escapedSizes() async {
        await propertyCheck(count: 500, input: textGen, Gen.int(in: -2...600)) { s, budget in
            let bytes = Array(s.utf8)
            #expect(JSONWriter.escapedSize(of: s) == bytes.reduce(0) { $0 + JSONWriter.escapedSize(of: $1) })
            var w = JSONWriter()
            w.string(s)
            #expect(w.bytes.count == JSONWriter.escapedSize(of: s) + 2)
            var used = 0
            var k = 0
            while k < bytes.count && used + JSONWriter.escapedSize(of: bytes[k]) <= budget {
                used += JSONWriter.escapedSize(of: bytes[k])
                k += 1
            }
            let got = bytes.withUnsafeBytes { JSONWriter.escapedPrefix(utf8: $0, budget: budget) }
            #expect(got.count == k && got.escapedSize == used, "budget \(budget)")
        }
    }
}
