import PropertyBased
import Testing
@testable import HeraldLocalization

@Suite struct StringsFileParserTests {
    func parse(_ text: String, _ encoding: TextEncoding = .utf8) throws -> [String: String] {
        var out: [String: String] = [:]
        for e in try StringsFileParser.parse(encoding.encode(text), file: "t.strings") { out[e.key] = e.value }
        return out
    }

    @Test func everyEscape() throws {
        let text = #"""
            "quote" = "say \"hi\"";
            "apostrophe" = "it\'s";
            "backslash" = "a\\b";
            "newline" = "a\nb";
            "tab" = "a\tb";
            "return" = "a\rb";
            "bell" = "\a\b\f\v";
            "octal" = "\101\0";
            "bmp" = "caf\U00E9 \u20AC";
            "short" = "\U41";
            "astral" = "\UD83D\UDE00 ok";
            "continued" = "one\
            two";
            """#
        let m = try parse(text)
        #expect(m["quote"] == "say \"hi\"")
        #expect(m["apostrophe"] == "it's")
        #expect(m["backslash"] == "a\\b")
        #expect(m["newline"] == "a\nb")
        #expect(m["tab"] == "a\tb")
        #expect(m["return"] == "a\rb")
        #expect(m["bell"] == "\u{07}\u{08}\u{0C}\u{0B}")
        #expect(m["octal"] == "A\u{0}")
        #expect(m["bmp"] == "café €")
        #expect(m["short"] == "A")
        #expect(m["astral"] == "😀 ok")
        #expect(m["continued"] == "one\ntwo")
        #expect(m.count == 12)
    }

    @Test func commentsAndUnquotedKeys() throws {
        let text = """
            /* A block comment
               over two lines, with "quotes" and = ; inside */
            // A line comment "x" = "y";
            "GAME_PLAY_REQUEST_FORMAT" = "%@ and %@ have invited you to play Monopoly"; // trailing
            PLAY = "Play";   /* unquoted key */
            app.title=Herald;/* unquoted value */
            "KEY_ONLY";
            "url" = "http://example.com/a"; // a // inside a string is not a comment
            """
        let m = try parse(text)
        #expect(m["GAME_PLAY_REQUEST_FORMAT"] == "%@ and %@ have invited you to play Monopoly")
        #expect(m["PLAY"] == "Play")
        #expect(m["app.title"] == "Herald")
        #expect(m["KEY_ONLY"] == "KEY_ONLY")
        #expect(m["url"] == "http://example.com/a")
        #expect(m.count == 5)
    }

    @Test func bracedDictionaryForm() throws {
        #expect(try parse("{ \"a\" = \"1\"; b = 2; }") == ["a": "1", "b": "2"])
    }

    @Test func emptyAndCommentOnlyFiles() throws {
        #expect(try parse("").isEmpty)
        #expect(try parse("/* nothing */\n// here\n").isEmpty)
        #expect(try parse("", .utf16LE).isEmpty)
    }

    @Test func lastDuplicateWins() throws {
        #expect(try parse("\"a\" = \"1\";\n\"a\" = \"2\";") == ["a": "2"])
    }

    @Test(arguments: TextEncoding.allCases)
    func encodings(_ encoding: TextEncoding) throws {
        // What genstrings writes: UTF-16 with a BOM, a comment per entry, non-ASCII text raw.
        let text = """
            /* Invitation */
            "GAME_PLAY_REQUEST_FORMAT" = "%2$@ et %1$@ vous invitent à jouer au Monopoly";

            /* No comment provided by engineer. */
            "EMOJI" = "🎲 Partie prête ! 日本語";
            """
        let entries = try StringsFileParser.parse(encoding.encode(text), file: "fr.strings")
        #expect(entries.map(\.key) == ["GAME_PLAY_REQUEST_FORMAT", "EMOJI"])
        #expect(entries[0].value == "%2$@ et %1$@ vous invitent à jouer au Monopoly")
        #expect(entries[1].value == "🎲 Partie prête ! 日本語")
        #expect(entries.map(\.line) == [2, 5])
    }

    @Test(arguments: [
        // text, line, column, message fragment
        ("\"a\" = \"b\"", 1, 10, "missing \";\""),
        ("\"a\" = \"b\";\n\"c\" = \"d\" \"e\";", 2, 11, "expected \";\""),
        ("\"a\" = \"b\";\n\n  \"unterminated = \"x;", 3, 20, "expected \";\""),
        ("\"a\" = \"never closed;\n", 1, 7, "unterminated string"),
        ("/* open comment\n\"a\" = \"b\";", 1, 1, "unterminated /* comment"),
        ("\"a\" = ;", 1, 7, "expected a value"),
        ("= \"b\";", 1, 1, "expected a key"),
        ("\"a\" = \"x\\qy\";", 1, 9, "unknown escape \"\\q\""),
        ("\"a\" = \"\\UD83D alone\";", 1, 8, "unpaired high surrogate"),
        ("\"a\" = \"\\UDE00\";", 1, 8, "unpaired low surrogate"),
        ("\"a\" = \"\\UD83D\\U0041\";", 1, 14, "not a low surrogate"),
        ("\"a\" = \"\\Uzz\";", 1, 8, "hex digits"),
        ("\"k\" = \"v\";\n\t\"a\" = \"é\" ! ;", 2, 12, "found \"!\""),
        ("{ \"a\" = \"b\";", 1, 13, "missing \"}\""),
        ("\"a\" = \"b\"; }", 1, 12, "found \"}\""),
    ])
    func malformed(_ text: String, _ line: Int, _ column: Int, _ fragment: String) {
        for encoding in TextEncoding.allCases {
            do {
                _ = try StringsFileParser.parse(encoding.encode(text), file: "de.lproj/Localizable.strings")
                Issue.record("\(encoding): expected an error for \(text.debugDescription)")
            } catch {
                #expect(error.file == "de.lproj/Localizable.strings")
                #expect(error.line == line && error.column == column, "\(encoding): \(error)")
                #expect(error.message.contains(fragment), "\(encoding): \(error)")
                #expect(error.description.hasPrefix("de.lproj/Localizable.strings:\(line):\(column): "))
            }
        }
    }

    @Test func utf16WithoutAMark() throws {
        let text = "\"K\" = \"Grüße 😀\";"
        for encoding in [TextEncoding.utf16LE, .utf16BE] {
            let unmarked = Array(encoding.encode(text).dropFirst(2))
            #expect(try StringsFileParser.parse(unmarked, file: "x").first?.value == "Grüße 😀", "\(encoding)")
        }
    }

    @Test func invalidEncodings() {
        #expect(throws: CatalogError.self) { try StringsFileParser.parse([0x22, 0xFF, 0x22], file: "x") }  // bad UTF-8
        #expect(throws: CatalogError.self) { try StringsFileParser.parse([0xFF, 0xFE, 0x22], file: "x") }  // odd UTF-16
        // A lone surrogate in UTF-16LE text, on line 2.
        let units: [UInt16] = [0x22, 0x61, 0x22, 0x3B, 0x0A, 0xD800, 0x22]
        do {
            _ = try StringsFileParser.parse([0xFF, 0xFE] + units.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, file: "x")
            Issue.record("expected an error")
        } catch {
            #expect(error.line == 2 && error.column == 1)
        }
    }

    /// Any string survives being escaped into a file (each encoding, escaped or raw) and read back.
    @Test func propertyRoundTrip() async {
        let scalar = Gen<UInt32>.value(in: 0...0x10F7FF).map { v -> Unicode.Scalar in
            Unicode.Scalar(v >= 0xD800 ? v + 0x800 : v)!
        }
        let text = scalar.array(of: 0...24).map { String(String.UnicodeScalarView($0)) }
        await propertyCheck(input: text, text, Gen.bool) { key, value, escapeAll in
            let file = "\"\(stringsEscaped(key, escapeNonASCII: escapeAll))\" = \"\(stringsEscaped(value, escapeNonASCII: escapeAll))\";\n"
            for encoding in TextEncoding.allCases {
                let entries = try StringsFileParser.parse(encoding.encode(file), file: "p.strings")
                #expect(entries.count == 1)
                #expect(entries.first?.key.unicodeScalars.elementsEqual(key.unicodeScalars) == true)
                #expect(entries.first?.value.unicodeScalars.elementsEqual(value.unicodeScalars) == true)
            }
        }
    }
}
