import HeraldCore
import Testing
@testable import HeraldLocalization

/// End to end: catalogs written to a temporary directory as an app bundle
/// lays them out, loaded, and used to localize requests in both modes.
@Suite struct CatalogLocalizerTests {
    /// Twelve languages; each translates the invitation, and a few keys are
    /// missing in some languages to exercise fallback.
    static let invitations: [(String, String, TextEncoding)] = [
        ("en", "%@ and %@ have invited you to play Monopoly", .utf16LE),
        ("fr", "%@ et %@ vous invitent à jouer au Monopoly", .utf16BE),
        ("de", "%@ und %@ haben dich zu Monopoly eingeladen", .utf8),
        ("es", "%@ y %@ te han invitado a jugar al Monopoly", .utf8BOM),
        ("it", "%@ e %@ ti hanno invitato a giocare a Monopoly", .utf16LE),
        ("pt-BR", "%@ e %@ convidaram você para jogar Banco Imobiliário", .utf8),
        ("ja", "%2$@さんと%1$@さんがモノポリーに招待しています", .utf16LE),
        ("ko", "%@님과 %@님이 모노폴리에 초대했습니다", .utf8),
        ("zh-Hans", "%@和%@邀请你玩大富翁", .utf16LE),
        ("zh-Hant", "%@和%@邀請你玩大富翁", .utf16BE),
        ("ru", "%@ и %@ приглашают вас сыграть в Монополию", .utf8),
        ("ar", "دعاك %2$@ و%1$@ للعب مونوبولي", .utf8),
        ("he", "%@ ו-%@ הזמינו אותך לשחק מונופול", .utf16LE),
    ]

    static func makeCatalogs() -> TemporaryCatalogs {
        let dir = TemporaryCatalogs()
        for (language, invitation, encoding) in invitations {
            var text = "/* Invitation to a game */\n\"GAME_PLAY_REQUEST_FORMAT\" = \"\(invitation)\";\n"
            if language != "de" { text += "\"TITLE\" = \"Monopoly (\(language))\";\n" }
            if language == "en" {
                text += "\"SCORE\" = \"You scored %d points (%.1f%%)\";\n\"ONLY_EN\" = \"English only\";\n\"BROKEN\" = \"%1$@ %@\";\n"
            }
            if language == "es" { text += "\"ONLY_ES\" = \"Sólo en español\";\n" }
            if language == "fr" { text += "\"SCORE\" = \"Vous avez %d points (%.1f %%)\";\n\"SUB\" = \"Salon %@\";\n" }
            dir.write("\(language).lproj/Localizable.strings", text, encoding: encoding)
        }
        dir.write("en.lproj/InfoPlist.strings", "CFBundleDisplayName = \"Herald\";\n")
        dir.write("Base.lproj/Localizable.strings", "\"ONLY_BASE\" = \"From Base\";\n")
        // A .stringsdict table with one key whose variable lacks its "other" form (a diagnostic).
        dir.write(
            "en.lproj/Plurals.stringsdict",
            "<plist version=\"1.0\"><dict><key>N</key><dict><key>NSStringLocalizedFormatKey</key><string>%#@n@</string>"
                + "<key>n</key><dict><key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>"
                + "<key>one</key><string>one</string></dict></dict></dict></plist>")
        dir.write("README.txt", "not a catalog")
        return dir
    }

    @Test func loadsAnAppBundleLayout() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let catalog = try StringCatalog.load(path: dir.path)
        #expect(catalog.languages.count == Self.invitations.count + 1)
        #expect(Set(catalog.tables.keys) == ["Localizable", "InfoPlist", "Plurals"])
        let table = try #require(catalog.table())
        for (i, language) in catalog.languages.enumerated() where !language.isBase {
            #expect(table.entry("GAME_PLAY_REQUEST_FORMAT", language: i) != nil, "\(language)")
        }
        #expect(catalog.diagnostics.contains { $0.contains("Plurals.stringsdict: N") && $0.contains("needs an \"other\" form") })
        #expect(catalog.diagnostics.contains { $0.contains("BROKEN") && $0.contains("cannot be mixed") })
    }

    /// The seeds' example, rendered server-side in every language.
    @Test func serverSideRendersEveryLanguage() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path), mode: .server)
        let expected: [String: String] = [
            "en-US": "Jenna and Frank have invited you to play Monopoly",
            "fr-CA": "Jenna et Frank vous invitent à jouer au Monopoly",
            "de": "Jenna und Frank haben dich zu Monopoly eingeladen",
            "es-MX": "Jenna y Frank te han invitado a jugar al Monopoly",
            "it": "Jenna e Frank ti hanno invitato a giocare a Monopoly",
            "pt_BR": "Jenna e Frank convidaram você para jogar Banco Imobiliário",
            "ja-JP": "FrankさんとJennaさんがモノポリーに招待しています",
            "ko": "Jenna님과 Frank님이 모노폴리에 초대했습니다",
            "zh-Hans-CN": "Jenna和Frank邀请你玩大富翁",
            "zh-TW": "Jenna和Frank邀請你玩大富翁",
            "zh-HK": "Jenna和Frank邀請你玩大富翁",
            "ru": "Jenna и Frank приглашают вас сыграть в Монополию",
            "ar-EG": "دعاك Frank وJenna للعب مونوبولي",
            "he": "Jenna ו-Frank הזמינו אותך לשחק מונופול",
            "sw": "Jenna and Frank have invited you to play Monopoly",
        ]
        for (language, text) in expected {
            var r = request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna", "Frank"], titleLocKey: "TITLE", language: language)
            try localizer.localize(&r)
            let alert = try #require(r.aps.alert)
            #expect(alert.body == text, "\(language)")
            #expect(alert.locKey == nil && alert.locArgs == nil && alert.titleLocKey == nil && alert.titleLocArgs == nil)
        }
    }

    @Test func missingKeyFallsBackAlongTheChain() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path), defaultLanguage: "en", fallback: ["es"])
        func title(_ key: String, _ language: String?) throws -> String? {
            var r = request(titleLocKey: key, language: language)
            try localizer.localize(&r)
            return r.aps.alert?.title
        }
        #expect(try title("TITLE", "fr") == "Monopoly (fr)")
        #expect(try title("TITLE", "de") == "Monopoly (es)")  // de lacks it: fallback es
        #expect(try title("ONLY_EN", "fr") == "English only")  // then the default
        #expect(try title("ONLY_ES", "ja") == "Sólo en español")
        #expect(try title("ONLY_BASE", "ja") == "From Base")  // then Base
        #expect(try title("TITLE", nil) == "Monopoly (es)")  // no language: the fallback chain
        let reason = failure(localizer, request(locKey: "NOWHERE", language: "fr"))
        #expect(reason == "loc-key \"NOWHERE\" is not in the Localizable catalogs of fr, es, en, Base")
        let inOther = failure(localizer, request(locKey: "CFBundleDisplayName", language: "en"))
        #expect(inOther?.contains("\"CFBundleDisplayName\" is not in the Localizable catalogs") == true)
    }

    @Test func titleSubtitleAndNumbers() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path))
        var r = request(locKey: "SCORE", locArgs: ["42", "87.25"], titleLocKey: "TITLE", subtitleLocKey: "SUB", subtitleLocArgs: ["7"], language: "fr-FR")
        try localizer.localize(&r)
        #expect(r.aps.alert?.body == "Vous avez 42 points (87.2 %)")
        #expect(r.aps.alert?.title == "Monopoly (fr)")
        #expect(r.aps.alert?.subtitle == "Salon 7")
        #expect(r.aps.alert?.isBodyOnly == false)
    }

    @Test(arguments: [
        (request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna"], language: "fr"),
         "loc-key \"GAME_PLAY_REQUEST_FORMAT\" in fr ("),
        (request(locKey: "SCORE", locArgs: ["many", "1"], language: "en"), "\"many\" is not an integer, as %d needs"),
        (request(locKey: "BROKEN", locArgs: ["a", "b"], language: "en"), "invalid template"),
        (request(titleLocKey: "TITLE", titleLocArgs: ["x"], language: "it"), "title-loc-key \"TITLE\" in it"),
        (request(locArgs: ["x"]), "loc-args given without loc-key"),
        (request(locKey: ""), "loc-key is empty"),
    ])
    func serverSideFailuresNameKeyAndLanguage(_ r: NotificationRequest, _ fragment: String) throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path))
        let reason = try #require(failure(localizer, r))
        #expect(reason.contains(fragment), "\(reason)")
    }

    @Test func mismatchNamesTheFileAndLine() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path))
        let reason = failure(localizer, request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna"], language: "fr"))
        #expect(reason == "loc-key \"GAME_PLAY_REQUEST_FORMAT\" in fr (\(dir.path)/fr.lproj/Localizable.strings:2): the template \"%@ et %@ vous invitent à jouer au Monopoly\" takes 2 arguments, got 1")
    }

    @Test func clientSideChecksKeysAgainstTheDefaultCatalog() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path), mode: .client)
        var ok = request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna", "Frank"], titleLocKey: "TITLE", language: "fr")
        let before = ok
        try localizer.localize(&ok)
        #expect(ok == before)  // passed through untouched
        #expect(failure(localizer, request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna"]))?.contains("takes 2 arguments, got 1") == true)
        #expect(failure(localizer, request(locKey: "GAME_PLAY_REQUEST_FORMAT"))?.contains("takes 2 arguments, got 0") == true)
        #expect(failure(localizer, request(locKey: "ONLY_ES")) == "loc-key \"ONLY_ES\" is not in the default Localizable catalog (en, Base)")
        #expect(failure(localizer, request(subtitleLocKey: "NOPE"))?.hasPrefix("subtitle-loc-key \"NOPE\"") == true)
        // Numbers are not read client-side: the device formats them.
        #expect(failure(localizer, request(locKey: "SCORE", locArgs: ["x", "y"])) == nil)
        // A request may ask for the other mode.
        var server = request(locKey: "GAME_PLAY_REQUEST_FORMAT", locArgs: ["Jenna", "Frank"], language: "de", mode: .server)
        try localizer.localize(&server)
        #expect(server.aps.alert?.body == "Jenna und Frank haben dich zu Monopoly eingeladen")
        #expect(server.aps.alert?.isBodyOnly == true)
    }

    @Test func requestsWithoutKeysAreUntouched() throws {
        let dir = Self.makeCatalogs()
        defer { dir.remove() }
        let localizer = try CatalogLocalizer(catalog: StringCatalog.load(path: dir.path))
        var r = NotificationRequest(token: DeviceToken(bytes: [1, 2, 3]), aps: APS())
        let before = r
        try localizer.localize(&r)
        #expect(r == before)
        r.aps.alert = Alert(body: "Plain")
        try localizer.localize(&r)
        #expect(r.aps.alert?.body == "Plain")
    }

    @Test func keyCheckingLocalizerRefusesServerModeWithoutCatalogs() {
        #expect(failure(KeyCheckingLocalizer(), request(locKey: "K", mode: .server))?.contains("no catalogs") == true)
        #expect(failure(KeyCheckingLocalizer(), request(locKey: "K")) == nil)
    }

    @Test func loadErrors() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        #expect(throws: CatalogError.self) { try StringCatalog.load(path: dir.path + "/missing") }
        #expect(throws: CatalogError.self) { try StringCatalog.load(path: dir.path) }  // empty: no catalogs
        let file = dir.write("fr.lproj/Localizable.strings", "\"A\" = \"a\";\n\"B\" = \"b\"\n\"C\" = \"c\";\n", encoding: .utf16BE)
        do {
            _ = try StringCatalog.load(path: dir.path)
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "\(file):3:1: expected \";\" after the entry, found \"\"\"")
        }
        dir.write("fr.lproj/Localizable.strings", "\"A\" = \"a\";\n", encoding: .utf16BE)
        let catalog = try StringCatalog.load(path: dir.path)
        #expect(throws: ResolverError.self) { try CatalogLocalizer(catalog: catalog, table: "Nope", defaultLanguage: "fr") }
        #expect(throws: ResolverError.self) { try CatalogLocalizer(catalog: catalog, defaultLanguage: "en") }
        #expect(throws: Never.self) { try CatalogLocalizer(catalog: catalog, defaultLanguage: "fr") }
    }
}
