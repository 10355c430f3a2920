import HeraldCore
import Testing
@testable import HeraldLocalization

@Suite struct XCStringsTests {
    static let catalogJSON = #"""
        {
          "sourceLanguage" : "en",
          "strings" : {
            "GAME_PLAY_REQUEST_FORMAT" : {
              "comment" : "The seeds' example",
              "extractionState" : "manual",
              "localizations" : {
                "en" : { "stringUnit" : { "state" : "translated", "value" : "%@ and %@ have invited you to play Monopoly" } },
                "fr" : { "stringUnit" : { "state" : "translated", "value" : "%2$@ et %1$@ vous invitent à jouer au Monopoly" } },
                "zh-Hant" : { "stringUnit" : { "state" : "needs_review", "value" : "%@和%@邀請你玩大富翁" } }
              }
            },
            "Welcome back!" : {
              "localizations" : {
                "de" : { "stringUnit" : { "state" : "translated", "value" : "Willkommen zurück!" } }
              }
            },
            "UNREAD" : {
              "localizations" : {
                "en" : { "variations" : { "plural" : {
                  "one" : { "stringUnit" : { "state" : "translated", "value" : "%lld unread message" } },
                  "other" : { "stringUnit" : { "state" : "translated", "value" : "%lld unread messages" } }
                } } },
                "ru" : { "variations" : { "plural" : {
                  "one" : { "stringUnit" : { "state" : "translated", "value" : "%lld непрочитанное сообщение" } },
                  "few" : { "stringUnit" : { "state" : "translated", "value" : "%lld непрочитанных сообщения" } },
                  "many" : { "stringUnit" : { "state" : "translated", "value" : "%lld непрочитанных сообщений" } },
                  "other" : { "stringUnit" : { "state" : "translated", "value" : "%lld непрочитанного сообщения" } }
                } } }
              }
            },
            "TAP" : {
              "localizations" : {
                "en" : { "variations" : { "device" : {
                  "iphone" : { "stringUnit" : { "state" : "translated", "value" : "Tap to open" } },
                  "mac" : { "stringUnit" : { "state" : "translated", "value" : "Click to open" } }
                } } }
              }
            },
            "FILES" : {
              "localizations" : {
                "en" : { "stringUnit" : { "state" : "translated", "value" : "%#@files@" },
                         "substitutions" : { "files" : { "argNum" : 1, "formatSpecifier" : "lld" } } }
              }
            }
          },
          "version" : "1.0"
        }
        """#

    @Test func loadsAndRenders() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("Localizable.xcstrings", Self.catalogJSON)
        let catalog = try StringCatalog.load(path: dir.path)
        #expect(Set(catalog.languages.map(\.description)) == ["en", "fr", "zh-Hant", "de", "ru"])
        let localizer = try CatalogLocalizer(catalog: catalog)
        func body(_ key: String, _ args: [String]?, _ language: String) throws -> String? {
            var r = request(locKey: key, locArgs: args, language: language)
            try localizer.localize(&r)
            return r.aps.alert?.body
        }
        #expect(try body("GAME_PLAY_REQUEST_FORMAT", ["Jenna", "Frank"], "en") == "Jenna and Frank have invited you to play Monopoly")
        #expect(try body("GAME_PLAY_REQUEST_FORMAT", ["Jenna", "Frank"], "fr-BE") == "Frank et Jenna vous invitent à jouer au Monopoly")
        #expect(try body("GAME_PLAY_REQUEST_FORMAT", ["Jenna", "Frank"], "zh-HK") == "Jenna和Frank邀請你玩大富翁")
        // The source language's value is the key itself when it has no localization.
        #expect(try body("Welcome back!", nil, "en-GB") == "Welcome back!")
        #expect(try body("Welcome back!", nil, "de-CH") == "Willkommen zurück!")
        #expect(try body("UNREAD", ["1"], "en") == "1 unread message")
        #expect(try body("UNREAD", ["3"], "en") == "3 unread messages")
        #expect(try body("UNREAD", ["21"], "ru") == "21 непрочитанное сообщение")
        #expect(try body("UNREAD", ["22"], "ru") == "22 непрочитанных сообщения")
        #expect(try body("UNREAD", ["25"], "ru") == "25 непрочитанных сообщений")
        #expect(try body("TAP", nil, "en") == "Tap to open")
        #expect(failure(localizer, request(locKey: "FILES", locArgs: ["2"], language: "en"))?.contains("substitution \"files\" has no plural variations") == true)
        #expect(catalog.diagnostics.contains { $0.contains("FILES") })
    }

    @Test func stringsFilesOverrideTheStringCatalog() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("Localizable.xcstrings", Self.catalogJSON)
        dir.write("fr.lproj/Localizable.strings", "\"GAME_PLAY_REQUEST_FORMAT\" = \"%@ & %@\";\n")
        let catalog = try StringCatalog.load(path: dir.path)
        let localizer = try CatalogLocalizer(catalog: catalog)
        var r = request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["A", "B"], language: "fr")
        try localizer.localize(&r)
        #expect(r.aps.alert?.body == "A & B")
        #expect(catalog.diagnostics.contains { $0.contains("overrides") })
    }

    @Test func oneFileCanBeLoadedDirectly() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        let path = dir.write("Alerts.xcstrings", Self.catalogJSON)
        let catalog = try StringCatalog.load(path: path)
        #expect(catalog.table("Alerts") != nil)
    }

    @Test(arguments: [
        ("{\"sourceLanguage\": \"en\", \"strings\": {,}}", "Localizable.xcstrings:1:"),
        ("[]", "the top level must be an object"),
        ("{\"strings\": {}}", "sourceLanguage: required"),
        ("{\"sourceLanguage\": \"en\", \"strings\": {\"K\": {\"localizations\": {\"en\": {}}}}}", "strings.K.localizations.en: has neither"),
        ("{\"sourceLanguage\": \"en\", \"strings\": {\"K\": {\"localizations\": {\"en\": {\"stringUnit\": {\"value\": 3}}}}}}", "stringUnit: must be an object"),
        ("{\"sourceLanguage\": \"en\", \"strings\": {\"K\": {\"localizations\": {\"en\": {\"variations\": {\"plural\": {\"lots\": {}}}}}}}}", "unknown plural category"),
    ])
    func malformed(_ json: String, _ fragment: String) throws {
        do {
            _ = try XCStringsParser.parse(Array(json.utf8), file: "Localizable.xcstrings")
            Issue.record("expected an error")
        } catch {
            #expect(error.file == "Localizable.xcstrings")
            #expect(error.description.contains(fragment), "\(error)")
        }
    }
}
