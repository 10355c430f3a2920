import Foundation
import Testing

@testable import HeraldLocalization

/// `.stringsdict` files: two plural variables in one string, a variable-width
/// entry, in English, French, Arabic, Russian, Polish and Japanese; each
/// rendering compared byte for byte.
@Suite struct StringsDictTests {
    /// One language's file: `FILES` ("%#@files@ … %#@folders@"), `HOURS`
    /// (a decimal value type) and `WELCOME` (variable width).
    static func stringsdict(format: String, files: [String: String], folders: [String: String], welcome: [Int: String]) -> String {
        func forms(_ d: [String: String]) -> String {
            d.keys.sorted().map { "<key>\($0)</key><string>\(d[$0]!)</string>" }.joined(separator: "\n            ")
        }
        let widths = welcome.keys.sorted().map { "<key>\($0)</key><string>\(welcome[$0]!)</string>" }.joined(separator: "\n            ")
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
                <key>FILES</key>
                <dict>
                    <key>NSStringLocalizedFormatKey</key>
                    <string>\(format)</string>
                    <key>files</key>
                    <dict>
                        <key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
                        <key>NSStringFormatValueTypeKey</key><string>d</string>
                        \(forms(files))
                    </dict>
                    <key>folders</key>
                    <dict>
                        <key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
                        <key>NSStringFormatValueTypeKey</key><string>lld</string>
                        \(forms(folders))
                    </dict>
                </dict>
                <key>WELCOME</key>
                <dict>
                    <key>NSStringVariableWidthRuleType</key>
                    <dict>
                        \(widths)
                    </dict>
                </dict>
            </dict>
            </plist>
            """
    }

    static let files: [(language: String, text: String)] = [
        (
            "en",
            stringsdict(
                format: "%#@files@ in %#@folders@",
                files: ["zero": "No files", "one": "%d file", "other": "%d files"],
                folders: ["one": "%lld folder", "other": "%lld folders"],
                welcome: [20: "Welcome", 50: "Welcome to Herald"])
        ),
        (
            "fr",
            stringsdict(
                format: "%#@files@ dans %#@folders@",
                files: ["one": "%d fichier", "many": "%d de fichiers", "other": "%d fichiers"],
                folders: ["one": "%lld dossier", "many": "%lld de dossiers", "other": "%lld dossiers"],
                welcome: [20: "Bienvenue", 50: "Bienvenue sur Herald"])
        ),
        (
            "ar",
            stringsdict(
                format: "%#@files@ في %#@folders@",
                files: [
                    "zero": "لا ملفات", "one": "ملف واحد", "two": "ملفان", "few": "%d ملفات", "many": "%d ملفًا", "other": "%d ملف",
                ],
                folders: [
                    "zero": "لا مجلدات", "one": "مجلد واحد", "two": "مجلدين", "few": "%lld مجلدات", "many": "%lld مجلدًا",
                    "other": "%lld مجلد",
                ],
                welcome: [20: "مرحبًا", 50: "مرحبًا بك في Herald"])
        ),
        (
            "ru",
            stringsdict(
                format: "%#@files@ в %#@folders@",
                files: ["one": "%d файл", "few": "%d файла", "many": "%d файлов", "other": "%d файла"],
                folders: ["one": "%lld папке", "few": "%lld папках", "many": "%lld папках", "other": "%lld папки"],
                welcome: [20: "Привет", 50: "Добро пожаловать в Herald"])
        ),
        (
            "pl",
            stringsdict(
                format: "%#@files@ w %#@folders@",
                files: ["one": "%d plik", "few": "%d pliki", "many": "%d plików", "other": "%d pliku"],
                folders: ["one": "%lld folderze", "few": "%lld folderach", "many": "%lld folderach", "other": "%lld folderu"],
                welcome: [20: "Witaj", 50: "Witamy w Herald"])
        ),
        (
            "ja",
            stringsdict(
                format: "%2$#@folders@内の%1$#@files@",
                files: ["other": "%d 個のファイル"],
                folders: ["other": "%lld 個のフォルダ"],
                welcome: [10: "ようこそ", 40: "Herald へようこそ"])
        ),
    ]

    /// (language, files, folders) → the exact text.
    static let vectors: [(String, String, String, String)] = [
        ("en", "0", "1", "No files in 1 folder"),
        ("en", "1", "2", "1 file in 2 folders"),
        ("en", "21", "1", "21 files in 1 folder"),
        ("fr", "0", "1", "0 fichier dans 1 dossier"),
        ("fr", "2", "1000000", "2 fichiers dans 1000000 de dossiers"),
        ("fr", "1000000", "3", "1000000 de fichiers dans 3 dossiers"),
        ("ar", "0", "1", "لا ملفات في مجلد واحد"),
        ("ar", "2", "3", "ملفان في 3 مجلدات"),
        ("ar", "11", "100", "11 ملفًا في 100 مجلد"),
        ("ar", "102", "2", "102 ملف في مجلدين"),
        ("ar", "1", "110", "ملف واحد في 110 مجلدات"),
        ("ru", "1", "1", "1 файл в 1 папке"),
        ("ru", "3", "21", "3 файла в 21 папке"),
        ("ru", "11", "5", "11 файлов в 5 папках"),
        ("ru", "22", "112", "22 файла в 112 папках"),
        ("pl", "1", "1", "1 plik w 1 folderze"),
        ("pl", "22", "3", "22 pliki w 3 folderach"),
        ("pl", "12", "25", "12 plików w 25 folderach"),
        ("pl", "0", "101", "0 plików w 101 folderach"),
        ("ja", "1", "1", "1 個のフォルダ内の1 個のファイル"),
        ("ja", "5", "2", "2 個のフォルダ内の5 個のファイル"),
    ]

    static let welcome: [String: String] = [
        "en": "Welcome to Herald", "fr": "Bienvenue sur Herald", "ar": "مرحبًا بك في Herald", "ru": "Добро пожаловать в Herald",
        "pl": "Witamy w Herald", "ja": "Herald へようこそ",
    ]

    func withCatalog<T>(_ body: (StringCatalog) throws -> T) throws -> T {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        for (language, text) in Self.files { dir.write("\(language).lproj/Localizable.stringsdict", text) }
        return try body(try StringCatalog.load(path: dir.path))
    }

    func render(_ catalog: StringCatalog, _ key: String, _ language: String, _ args: [String]) throws -> String {
        let tag = LanguageTag(parsing: language)!
        let table = try #require(catalog.table())
        let index = try #require(catalog.languageIndex(tag), "\(language)")
        let entry = try #require(table.entry(key, language: index), "\(key) in \(language)")
        return try entry.render(args, language: tag)
    }

    @Test func twoVariablesInSixLanguages() throws {
        try withCatalog { catalog in
            #expect(catalog.diagnostics.isEmpty, "\(catalog.diagnostics)")
            for (language, files, folders, expected) in Self.vectors {
                let text = try render(catalog, "FILES", language, [files, folders])
                #expect(Array(text.utf8) == Array(expected.utf8), "\(language) \(files) \(folders): \(text)")
            }
        }
    }

    @Test func variableWidthReadsTheWidest() throws {
        try withCatalog { catalog in
            for (language, expected) in Self.welcome {
                let text = try render(catalog, "WELCOME", language, [])
                #expect(Array(text.utf8) == Array(expected.utf8), "\(language): \(text)")
            }
        }
    }

    /// Every language's forms are complete for its CLDR rules: the audit says nothing.
    @Test func completeFormsAuditClean() throws {
        try withCatalog { catalog in
            let audit = CatalogAudit(catalog)
            #expect(audit.problems.isEmpty, "\(audit.problems)")
            let signature = try #require(audit.signatures.first { $0.key == "FILES" })
            #expect(signature.arguments == [.integer, .integer])
        }
    }

    /// A Russian variable with only one/other: the audit names the forms Russian needs.
    @Test func missingFormReported() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("en.lproj/Localizable.stringsdict", Self.files[0].text)
        dir.write(
            "ru.lproj/Localizable.stringsdict",
            Self.stringsdict(
                format: "%#@files@ в %#@folders@", files: ["one": "%d файл", "other": "%d файла"],
                folders: ["one": "%lld папке", "few": "%lld папках", "many": "%lld папках", "other": "%lld папки"],
                welcome: [1: "Привет"]))
        let audit = CatalogAudit(try StringCatalog.load(path: dir.path))
        let problems = audit.problems.filter { $0.code == .missingPluralForm }
        #expect(problems.count == 1)
        #expect(problems.first?.language == LanguageTag(parsing: "ru"))
        #expect(problems.first?.message.contains("the variable \"files\" has no few, many forms (ru has one, few, many, other") == true, "\(problems)")
        #expect(problems.first?.origin.hasSuffix("ru.lproj/Localizable.stringsdict: FILES") == true)
    }

    /// A decimal value type picks the form by the digits it writes.
    @Test func decimalValueType() throws {
        let hours = try SubstitutionTemplate(
            format: "%#@hours@ left",
            definitions: ["hours": .init(valueType: ".1f", forms: [.one: "%.1f hour", .other: "%.1f hours"])])
        let en = LanguageTag(parsing: "en")!
        #expect(try hours.render(["1"], language: en) == "1.0 hours left")
        let bare = try SubstitutionTemplate(
            format: "%#@hours@ left", definitions: ["hours": .init(valueType: "@", forms: [.one: "%@ hour", .other: "%@ hours"])])
        #expect(try bare.render(["1"], language: en) == "1 hour left")
        #expect(try bare.render(["1.5"], language: en) == "1.5 hours left")
        #expect(try bare.render(["1.5"], language: LanguageTag(parsing: "fr")!) == "1.5 hour left")
    }

    /// Other arguments beside the variables; a form without the number.
    @Test func variablesAmongArguments() throws {
        let t = try SubstitutionTemplate(
            format: "%@ sent %#@photos@ to %@",
            definitions: ["photos": .init(valueType: "d", forms: [.one: "a photo", .other: "%d photos"])])
        let en = LanguageTag(parsing: "en")!
        #expect(t.argumentCount == 3)
        #expect(try t.render(["Ann", "1", "Bob"], language: en) == "Ann sent a photo to Bob")
        #expect(try t.render(["Ann", "4", "Bob"], language: en) == "Ann sent 4 photos to Bob")
        #expect(throws: FormatError.self) { try t.render(["Ann", "4"], language: en) }
    }

    @Test(arguments: [
        ("%#@x@", [String: SubstitutionTemplate.Definition](), "the variable \"x\" (%#@x@) is not defined"),
        ("%#@x@", ["x": SubstitutionTemplate.Definition(valueType: "d", forms: [.one: "%d"])], "needs an \"other\" form"),
        ("%#@x@", ["x": SubstitutionTemplate.Definition(valueType: "k", forms: [.other: "%d"])], "value type \"k\""),
        ("%#@x@", ["x": SubstitutionTemplate.Definition(valueType: "d", forms: [.other: "%q"])], "form \"other\""),
        ("no variable", [:], "has no variable"),
    ])
    func compileErrors(_ format: String, _ definitions: [String: SubstitutionTemplate.Definition], _ fragment: String) {
        #expect {
            _ = try SubstitutionTemplate(format: format, definitions: definitions)
        } throws: { error in
            (error as? FormatError)?.message.contains(fragment) == true
        }
    }

    /// A broken file names the file; a broken key is an invalid entry naming the
    /// key and what is wrong, and the rest of the file loads.
    @Test func badInput() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("en.lproj/Localizable.strings", "\"A\" = \"a\";")
        let broken = dir.write("en.lproj/Broken.stringsdict", "<?xml version=\"1.0\"?><plist><dict><key>X</key><string>x</dict></plist>")
        #expect {
            _ = try StringCatalog.load(path: dir.path)
        } throws: { error in
            guard let e = error as? CatalogError else { return false }
            return e.file == broken && e.message.contains("not a property list")
        }
        dir.remove()
        let dir2 = TemporaryCatalogs()
        defer { dir2.remove() }
        dir2.write(
            "en.lproj/Localizable.stringsdict",
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>BAD</key><dict><key>NSStringLocalizedFormatKey</key><string>%#@n@</string>
              <key>n</key><dict><key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
              <key>NSStringFormatValueTypeKey</key><string>d</string><key>several</key><string>%d</string></dict></dict>
            <key>GOOD</key><dict><key>NSStringLocalizedFormatKey</key><string>%#@n@</string>
              <key>n</key><dict><key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
              <key>NSStringFormatValueTypeKey</key><string>d</string><key>one</key><string>one</string><key>other</key><string>%d</string></dict></dict>
            </dict></plist>
            """)
        let catalog = try StringCatalog.load(path: dir2.path)
        #expect(catalog.diagnostics.contains { $0.contains("Localizable.stringsdict: BAD") && $0.contains("\"several\" is not a plural category") }, "\(catalog.diagnostics)")
        #expect(try render(catalog, "GOOD", "en", ["1"]) == "one")
        #expect(try render(catalog, "GOOD", "en", ["7"]) == "7")
    }

    /// A `.stringsdict` entry overrides the same key of the `.strings` file.
    @Test func stringsDictOverridesStrings() throws {
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("en.lproj/Localizable.strings", "\"WELCOME\" = \"Hi\";\n\"OTHER\" = \"kept\";")
        dir.write("en.lproj/Localizable.stringsdict", Self.files[0].text)
        let catalog = try StringCatalog.load(path: dir.path)
        #expect(try render(catalog, "WELCOME", "en", []) == "Welcome to Herald")
        #expect(try render(catalog, "OTHER", "en", []) == "kept")
        #expect(catalog.diagnostics.contains { $0.contains("\"WELCOME\" overrides") && $0.contains("Localizable.strings:1") }, "\(catalog.diagnostics)")
    }

    /// A string catalog's substitutions (`%#@name@`, argNum, `%arg`).
    @Test func xcstringsSubstitutions() throws {
        let json = """
            { "sourceLanguage": "en", "version": "1.0", "strings": {
              "%lld files in %lld folders": { "localizations": {
                "en": { "stringUnit": { "state": "translated", "value": "%#@files@ in %#@folders@" },
                  "substitutions": {
                    "files": { "argNum": 1, "formatSpecifier": "lld", "variations": { "plural": {
                      "one": { "stringUnit": { "state": "translated", "value": "%arg file" } },
                      "other": { "stringUnit": { "state": "translated", "value": "%arg files" } } } } },
                    "folders": { "argNum": 2, "formatSpecifier": "lld", "variations": { "plural": {
                      "one": { "stringUnit": { "state": "translated", "value": "%arg folder" } },
                      "other": { "stringUnit": { "state": "translated", "value": "%arg folders" } } } } } } },
                "ja": { "stringUnit": { "state": "translated", "value": "%#@folders@内の%#@files@" },
                  "substitutions": {
                    "files": { "argNum": 1, "formatSpecifier": "lld", "variations": { "plural": {
                      "other": { "stringUnit": { "state": "translated", "value": "%arg 個のファイル" } } } } },
                    "folders": { "argNum": 2, "formatSpecifier": "lld", "variations": { "plural": {
                      "other": { "stringUnit": { "state": "translated", "value": "%arg 個のフォルダ" } } } } } } } } } } }
            """
        let dir = TemporaryCatalogs()
        defer { dir.remove() }
        dir.write("Localizable.xcstrings", json)
        let catalog = try StringCatalog.load(path: dir.path)
        #expect(catalog.diagnostics.isEmpty, "\(catalog.diagnostics)")
        let key = "%lld files in %lld folders"
        #expect(try render(catalog, key, "en", ["1", "3"]) == "1 file in 3 folders")
        #expect(try render(catalog, key, "en", ["2", "1"]) == "2 files in 1 folder")
        #expect(try render(catalog, key, "ja", ["2", "1"]) == "1 個のフォルダ内の2 個のファイル")
    }
}
