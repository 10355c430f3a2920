import Foundation
import HeraldTestSupport
import Testing

/// `herald-strings`, the tool behind both plugins, run as the plugins run it.
@Suite struct HeraldStringsToolTests {
    static let english = """
        /* Invitations */
        "INVITE_TITLE" = "Game Request";
        "GAME_PLAY_REQUEST_FORMAT" = "%@ and %@ have invited you to play Monopoly";
        "SCORE" = "%1$@ has %2$d points";
        """
    static let french = """
        "INVITE_TITLE" = "Invitation";
        "GAME_PLAY_REQUEST_FORMAT" = "%2$@ et %1$@ vous invitent à jouer au Monopoly";
        "SCORE" = "%1$@ a %2$d points";
        """
    static let digest = """
        {
          "sourceLanguage" : "en",
          "strings" : {
            "UNREAD" : {
              "localizations" : {
                "en" : { "variations" : { "plural" : {
                  "one" : { "stringUnit" : { "state" : "translated", "value" : "%lld unread message" } },
                  "other" : { "stringUnit" : { "state" : "translated", "value" : "%lld unread messages" } } } } },
                "fr" : { "stringUnit" : { "state" : "translated", "value" : "%lld non lus" } }
              }
            },
            "APP_NAME" : { "shouldTranslate" : false, "localizations" : { "en" : { "stringUnit" : { "state" : "translated", "value" : "Herald" } } } }
          },
          "version" : "1.0"
        }
        """

    /// Runs the tool on files written to a fresh folder, `edits` applied to the good ones.
    func run(_ command: String, _ options: [String] = [], edits: [String: String] = [:], extra: [String: String] = [:]) async throws -> Run {
        let folder = try TemporaryFolder()
        var files = [
            "en.lproj/Localizable.strings": Self.english, "fr.lproj/Localizable.strings": Self.french, "Digest.xcstrings": Self.digest,
        ]
        files.merge(edits) { _, new in new }
        files.merge(extra) { _, new in new }
        let paths = try files.keys.sorted().map { try folder.write($0, files[$0]!) }
        let result = try await runProcess(try builtExecutable("herald-strings"), [command] + options + paths)
        return Run(status: result.status, stdout: result.stdout, stderr: result.stderr, folder: folder.path)
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var folder: String
    }

    @Test func generatesTypedKeys() async throws {
        let r = try await run("generate")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
        #expect(r.stdout.contains("public import HeraldLocalization"))
        #expect(r.stdout.contains("public enum Localizable {"))
        #expect(r.stdout.contains("    public static let inviteTitle = LocalizedKey(\"INVITE_TITLE\")\n"))
        #expect(r.stdout.contains("""
                public static func gamePlayRequestFormat(_ arg1: String, _ arg2: String) -> LocalizedKey {
                    LocalizedKey("GAME_PLAY_REQUEST_FORMAT", arguments: [arg1, arg2])
                }
            """))
        #expect(r.stdout.contains("public static func score(_ arg1: String, _ arg2: Int) -> LocalizedKey {"))
        #expect(r.stdout.contains("LocalizedKey(\"SCORE\", arguments: [arg1, String(arg2)])"))
        #expect(r.stdout.contains("public enum Digest {"))
        #expect(r.stdout.contains("public static func unread(count: Int) -> LocalizedKey {"))
        #expect(r.stdout.contains("LocalizedKey(\"UNREAD\", arguments: [String(count)])"))
        #expect(r.stdout.contains("\"GAME_PLAY_REQUEST_FORMAT\": 2,"))
    }

    static func stringsdict(_ files: String, _ folders: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0">
        <dict>
            <key>SENT</key>
            <dict>
                <key>NSStringLocalizedFormatKey</key>
                <string>%@: %#@files@, %#@folders@</string>
                <key>files</key>
                <dict>
                    <key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
                    <key>NSStringFormatValueTypeKey</key><string>d</string>
                    \(files)
                </dict>
                <key>folders</key>
                <dict>
                    <key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
                    <key>NSStringFormatValueTypeKey</key><string>d</string>
                    \(folders)
                </dict>
            </dict>
        </dict>
        </plist>
        """
    }

    /// A .stringsdict key with two variables: each variable's number is labelled
    /// by its name; a French variable without its "many" form is a warning at the key's line.
    @Test func stringsDictVariablesAreLabelled() async throws {
        let en = Self.stringsdict(
            "<key>one</key><string>%d file</string><key>other</key><string>%d files</string>",
            "<key>one</key><string>%d folder</string><key>other</key><string>%d folders</string>")
        let fr = Self.stringsdict(
            "<key>one</key><string>%d fichier</string><key>other</key><string>%d fichiers</string>",
            "<key>one</key><string>%d dossier</string><key>many</key><string>%d de dossiers</string><key>other</key><string>%d dossiers</string>")
        let r = try await run("generate", extra: ["en.lproj/Localizable.stringsdict": en, "fr.lproj/Localizable.stringsdict": fr])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("public static func sent(_ arg1: String, files: Int, folders: Int) -> LocalizedKey {"), "\(r.stdout)")
        #expect(r.stdout.contains("LocalizedKey(\"SENT\", arguments: [arg1, String(files), String(folders)])"))
        #expect(r.stderr.contains("fr.lproj/Localizable.stringsdict:4: warning: \"SENT\" in fr: the variable \"files\" has no many form"), "\(r.stderr)")
    }

    @Test func writesTheOutputFile() async throws {
        let folder = try TemporaryFolder()
        let input = try folder.write("en.lproj/Localizable.strings", Self.english)
        let output = folder.path + "/HeraldStrings.swift"
        let r = try await runProcess(try builtExecutable("herald-strings"), ["generate", "--output", output, input])
        #expect(r.status == 0)
        #expect(try String(contentsOfFile: output, encoding: .utf8).contains("enum Localizable"))
    }

    @Test func namesAreSwiftIdentifiers() async throws {
        let strings = """
            "default" = "a"; "2FA_CODE" = "b"; "welcome.title" = "c"; "WELCOME_TITLE" = "d"; "%@ sent you a photo" = "%@ sent you a photo";
            """
        let r = try await run("generate", edits: ["en.lproj/Localizable.strings": strings, "fr.lproj/Localizable.strings": strings])
        #expect(r.status == 0, "\(r.stderr)")
        for name in ["defaultKey =", "_2faCode =", "welcomeTitle =", "welcomeTitle2 =", "sentYouAPhoto(_ arg1: String)"] {
            #expect(r.stdout.contains("public static let \(name)") || r.stdout.contains("public static func \(name)"), "\(name)")
        }
    }

    @Test(arguments: [
        // what is broken, the file and line expected, what the message says
        ("fr.lproj/Localizable.strings", french.replacingOccurrences(of: "%1$@ a", with: "%1$y a"), "fr.lproj/Localizable.strings:3: error:",
         "\"SCORE\" in fr: \"%1$y\": unsupported conversion"),
        ("fr.lproj/Localizable.strings", french.replacingOccurrences(of: "\"INVITE_TITLE\" = \"Invitation\";", with: ""),
         "en.lproj/Localizable.strings:2: error:", "\"INVITE_TITLE\" has no fr translation (Localizable table)"),
        ("fr.lproj/Localizable.strings", french.replacingOccurrences(of: "%2$d points", with: "%2$@ points"),
         "fr.lproj/Localizable.strings:3: error:", "\"SCORE\" reads argument 2 as text in fr but as integer in en"),
        ("fr.lproj/Localizable.strings", french.replacingOccurrences(of: "%2$@ et %1$@", with: "%1$@"),
         "fr.lproj/Localizable.strings:2: error:", "takes 1 argument (text) in fr but 2 arguments (text, text) in en"),
        ("Digest.xcstrings", digest.replacingOccurrences(of: "%lld non lus", with: "%@ non lus"), "Digest.xcstrings:9: error:",
         "\"UNREAD\" reads argument 1 as text in fr but as integer in en"),
        ("Digest.xcstrings", digest.replacingOccurrences(of: "%lld unread message\"", with: "%lld unread %k\""),
         "Digest.xcstrings:6: error:", "plural form \"one\": \"%k\": unsupported conversion"),
        ("Digest.xcstrings", digest.replacingOccurrences(of: "\"shouldTranslate\" : false, ", with: ""),
         "Digest.xcstrings:12: error:", "\"APP_NAME\" has no fr translation (Digest table)"),
        ("Digest.xcstrings", "{\n  \"sourceLanguage\": \"en\",\n  \"strings\": {,}\n}", "Digest.xcstrings:3:", "error:"),
    ])
    func brokenCatalogsFailWithTheirFileAndLine(_ file: String, _ text: String, _ place: String, _ message: String) async throws {
        let r = try await run("generate", edits: [file: text])
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        let line = try #require(r.stderr.split(separator: "\n").first { $0.contains(place) }, "\(r.stderr)")
        #expect(line.hasPrefix(r.folder + "/"))
        #expect(line.contains(message), "\(line)")
        #expect(r.stderr.contains("nothing generated"))
    }

    @Test func templatesMustUseKeysRightly() async throws {
        let templates = """
            {"template":"ok","alert":{"loc-key":"SCORE","loc-args":[20,5]}}

            {"template":"short","alert":{"loc-key":"SCORE","loc-args":[20]}}
            {"template":"unknown","alert":{"title-loc-key":"NOPE"}}
            {"alert":"no name"}
            """
        let r = try await run("generate", extra: ["App.herald.jsonl": templates])
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").filter { $0.contains("App.herald.jsonl:") }.map { String($0.drop { $0 != ":" }) }.sorted()
        #expect(
            lines == [
                ":3: error: template \"short\" declares 1 loc-args but \"SCORE\" takes 2",
                ":4: error: template \"unknown\" title-loc-key \"NOPE\" is not in the Localizable catalogs",
                ":5: error: missing \"template\": the template's name, a non-empty string",
            ])
    }

    @Test(arguments: [
        // arguments (with the limit), status, what the report or the errors say
        (["--limit", "4096"], Int32(0), "    en          40 bytes  0%\n    fr          38 bytes  0%\n"),
        (["--limit", "39"], 1, ":1: error: template \"score\" in en is 40 bytes at worst, 1 over the custom limit of 39"),
        (["--limit", "binary", "--localize", "client"], 0, "    fr          64 bytes  3%"),
        (["--limit", "nope"], 2, "--limit takes a number of bytes or one of"),
    ])
    func checkMeasuresTheWorstCase(_ options: [String], _ status: Int32, _ expected: String) async throws {
        // {"aps":{"alert":"<text>"}}: 17 + 3 bytes around the text. With 😀 (1 character, 4 bytes) and -999 (at most
        // 4 characters for %d): en "%1$@ has %2$d points" is 4 + 5 + 4 + 7 = 20 bytes of text, 40 in all; fr 38.
        // Client-side: {"aps":{"alert":{"loc-key":"SCORE","loc-args":["😀","-999"]}}} is 64 bytes.
        let r = try await run("check", options, extra: ["App.herald.jsonl": "{\"template\":\"score\",\"alert\":{\"loc-key\":\"SCORE\",\"loc-args\":[1,4]}}\n"])
        #expect(r.status == status, "\(r.stdout)\(r.stderr)")
        #expect((r.stdout + r.stderr).contains(expected), "\(r.stdout)\(r.stderr)")
    }

    @Test func pluralFormsAreAllMeasured() async throws {
        // en "one" form ("1 unread message") is shorter than "other" with a 1-digit count ("9 unread messages"):
        // with room for 2 characters, the worst case is "-9 unread messages".
        let r = try await run(
            "check", ["--table", "Digest"],
            extra: ["App.herald.jsonl": "{\"template\":\"unread\",\"alert\":{\"loc-key\":\"UNREAD\",\"loc-args\":[2]}}\n"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("    en          38 bytes"), "\(r.stdout)")
    }
}

/// A folder under the temporary directory, removed when the value is released.
final class TemporaryFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("herald-plugin-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `relative`, making its folder; returns the full path.
    @discardableResult
    func write(_ relative: String, _ text: String) throws -> String {
        let url = URL(fileURLWithPath: path).appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }
}
