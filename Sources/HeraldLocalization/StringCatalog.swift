/// Every string of an app's localizations, compiled: languages × tables × keys.
///
/// Load it once from a directory laid out as an app bundle is:
///
/// ```
/// Catalogs/
///   en.lproj/Localizable.strings      ← table "Localizable", language en
///   en.lproj/Alerts.strings           ← table "Alerts"
///   fr.lproj/Localizable.strings
///   zh-Hant.lproj/Localizable.strings
///   Base.lproj/Localizable.strings    ← the base localization
///   ru.lproj/Localizable.stringsdict  ← plural rules and variables (%#@name@), table "Localizable"
///   Localizable.xcstrings             ← a string catalog: table "Localizable", all its languages
/// ```
///
/// Only the top level of the directory is searched. Where files give the same
/// table, language and key, a `.stringsdict` wins over a `.strings` file, and
/// both over a string catalog (noted in ``diagnostics``): the order a device
/// reads a built app's tables in, where Xcode has compiled the catalog to
/// `.strings` and `.stringsdict` and a hand-written file is the override.
/// Values are compiled to ``FormatTemplate``s at load; a value that does not
/// compile is kept as an invalid entry (using it is an error naming the key,
/// language and file) and listed in ``diagnostics``.
public struct StringCatalog: Sendable {
    /// The languages found, in the order first seen; indices are language ids.
    public private(set) var languages: [LanguageTag] = []
    /// The tables by name (`Localizable`, …).
    public private(set) var tables: [String: StringTable] = [:]
    /// Notes about the load that are not errors: ignored files, overridden keys, invalid templates.
    public private(set) var diagnostics: [String] = []
    var languageIDs: [LanguageTag: Int] = [:]

    /// The table the device reads `loc-key`s from.
    public static let defaultTable = "Localizable"

    public init() {}

    /// The id of a language, by canonical tag.
    public func languageIndex(_ tag: LanguageTag) -> Int? {
        languageIDs[tag]
    }

    public func table(_ name: String = StringCatalog.defaultTable) -> StringTable? { tables[name] }

    @discardableResult
    mutating func languageID(_ tag: LanguageTag) -> Int {
        if let i = languageIDs[tag] { return i }
        languages.append(tag)
        languageIDs[tag] = languages.count - 1
        return languages.count - 1
    }

    /// Adds (or replaces) one entry. Returns the entry it replaced, if any.
    @discardableResult
    public mutating func add(_ entry: CatalogEntry, key: String, language: LanguageTag, table: String = StringCatalog.defaultTable) -> CatalogEntry? {
        let lang = languageID(language)
        if case .invalid(let message) = entry.value {
            diagnostics.append("\(entry.origin): \(language) \"\(key)\": \(message)")
        }
        var t = tables[table] ?? StringTable(name: table)
        tables[table] = nil  // keep the table uniquely referenced while it changes
        let previous = t.set(entry, key: key, language: lang)
        tables[table] = t
        return previous
    }

    /// Adds the values of `strings` (key → template), compiling them.
    public mutating func add(strings: [(key: String, value: String)], language: LanguageTag, table: String = StringCatalog.defaultTable, origin: String = "(memory)") {
        for (key, value) in strings {
            add(CatalogEntry(compiling: value, origin: origin), key: key, language: language, table: table)
        }
    }

    /// Loads a catalog directory (see the type's documentation), or one `.xcstrings` file.
    public static func load(path: String) throws(CatalogError) -> StringCatalog {
        var catalog = StringCatalog()
        if !FileSystem.isDirectory(path) {
            if let problem = FileSystem.accessProblem(path) { throw CatalogError(file: path, message: "cannot open: \(problem)") }
            if path.hasSuffix(".xcstrings") {
                try catalog.loadStringCatalog(path, table: tableName(path, extension: ".xcstrings"))
                return catalog
            }
            throw CatalogError(file: path, message: "not a directory of <language>.lproj folders and .xcstrings files")
        }
        let entries = try FileSystem.list(path)
        func join(_ a: String, _ b: String) -> String { a.hasSuffix("/") ? a + b : a + "/" + b }
        for e in entries where !e.isDirectory && e.name.hasSuffix(".xcstrings") {
            try catalog.loadStringCatalog(join(path, e.name), table: tableName(e.name, extension: ".xcstrings"))
        }
        for e in entries where e.isDirectory && e.name.hasSuffix(".lproj") {
            let dir = join(path, e.name)
            guard let tag = LanguageTag(parsing: e.name.dropLast(6)) else {
                catalog.diagnostics.append("\(dir): ignored, \"\(e.name.dropLast(6))\" is not a language")
                continue
            }
            for f in try FileSystem.list(dir) where !f.isDirectory {
                let file = join(dir, f.name)
                if f.name.hasSuffix(".strings") {
                    try catalog.loadStringsFile(file, language: tag, table: tableName(f.name, extension: ".strings"))
                }
            }
            // After the .strings files: a .stringsdict entry overrides a .strings one.
            for f in try FileSystem.list(dir) where !f.isDirectory && f.name.hasSuffix(".stringsdict") {
                try catalog.loadStringsDictFile(join(dir, f.name), language: tag, table: tableName(f.name, extension: ".stringsdict"))
            }
        }
        if catalog.languages.isEmpty {
            throw CatalogError(file: path, message: "no catalogs: expected <language>.lproj/<table>.strings or <table>.xcstrings")
        }
        return catalog
    }

    static func tableName(_ path: String, extension ext: String) -> String {
        var name = Substring(path)
        if let slash = name.lastIndex(of: "/") { name = name[name.index(after: slash)...] }
        return String(name.dropLast(ext.count))
    }

    /// Reads one `.strings` file into `table` for `language`.
    public mutating func loadStringsFile(_ file: String, language: LanguageTag, table: String) throws(CatalogError) {
        let bytes = try FileSystem.readFile(file)
        let entries = try StringsFileParser.parse(bytes, file: file)
        for e in entries {
            addNotingOverride(CatalogEntry(compiling: e.value, origin: "\(file):\(e.line)"), key: e.key, language: language, table: table, file: file)
        }
    }

    /// Reads one `.stringsdict` file into `table` for `language`.
    public mutating func loadStringsDictFile(_ file: String, language: LanguageTag, table: String) throws(CatalogError) {
        let bytes = try FileSystem.readFile(file)
        for item in try StringsDictParser.parse(bytes, file: file) {
            addNotingOverride(item.entry, key: item.key, language: language, table: table, file: file)
        }
    }

    /// Adds an entry read from `file`, noting in ``diagnostics`` when it replaces one from another file.
    mutating func addNotingOverride(_ entry: CatalogEntry, key: String, language: LanguageTag, table: String, file: String) {
        if let previous = add(entry, key: key, language: language, table: table), !previous.origin.hasPrefix(file + ":") {
            diagnostics.append("\(entry.origin): \(language) \"\(key)\" overrides \(previous.origin)")
        }
    }

    /// Reads one string catalog (`.xcstrings`) into `table`.
    public mutating func loadStringCatalog(_ file: String, table: String) throws(CatalogError) {
        let bytes = try FileSystem.readFile(file)
        for item in try XCStringsParser.parse(bytes, file: file) {
            guard let tag = LanguageTag(parsing: item.language) else {
                diagnostics.append("\(file): \"\(item.key)\": ignored localization \"\(item.language)\", not a language")
                continue
            }
            add(item.entry, key: item.key, language: tag, table: table)
        }
    }
}

/// One table's keys and their compiled values per language. Keys are
/// interned once, so a lookup hashes the key once whatever the number of
/// languages tried.
public struct StringTable: Sendable {
    public let name: String
    var keyIDs: [String: Int] = [:]
    /// The same ids with a cheaper hash, tried first (``keyID(_:)``).
    var fastKeyIDs = StringIndex<Int>()
    /// The keys, by id.
    public private(set) var keys: [String] = []
    /// `entries[language][key]`; rows are as long as the highest key id set in them.
    /// Boxed, so a lookup retains one reference rather than copying the entry's parts.
    var entries: [[EntryBox?]] = []

    init(name: String) { self.name = name }

    mutating func set(_ entry: CatalogEntry, key: String, language: Int) -> CatalogEntry? {
        let id: Int
        if let existing = keyIDs[key] {
            id = existing
        } else {
            id = keys.count
            keys.append(key)
            keyIDs[key] = id
            fastKeyIDs.set(key, id)
        }
        while entries.count <= language { entries.append([]) }
        if entries[language].count <= id {
            entries[language].append(contentsOf: repeatElement(nil, count: id + 1 - entries[language].count))
        }
        let previous = entries[language][id]?.entry
        entries[language][id] = EntryBox(entry)
        return previous
    }

    /// The interned id of `key`.
    public func keyID(_ key: String) -> Int? { fastKeyIDs[key] ?? keyIDs[key] }

    /// The entry for a key id in a language, if that language has it.
    public func entry(keyID: Int, language: Int) -> CatalogEntry? {
        box(keyID: keyID, language: language)?.entry
    }

    @inline(__always)
    func box(keyID: Int, language: Int) -> EntryBox? {
        guard language < entries.count, keyID < entries[language].count else { return nil }
        return entries[language][keyID]
    }

    /// The entry for `key` in `language`.
    public func entry(_ key: String, language: Int) -> CatalogEntry? {
        keyID(key).flatMap { entry(keyID: $0, language: language) }
    }

    /// How many keys the language has.
    public func count(language: Int) -> Int {
        language < entries.count ? entries[language].reduce(0) { $0 + ($1 == nil ? 0 : 1) } : 0
    }
}

/// An immutable catalog entry behind one reference.
final class EntryBox: Sendable {
    let entry: CatalogEntry
    /// The entry's template when it is a plain `.format` (the common case), reached
    /// without copying the entry; otherwise an unused empty template.
    let template: FormatTemplate
    let isFormat: Bool
    /// The entry's template when it is `.substituted` (a `.stringsdict` entry), reached the same way.
    let substitution: SubstitutionTemplate?

    init(_ entry: CatalogEntry) {
        self.entry = entry
        if case .format(let t) = entry.value {
            template = t
            isFormat = true
        } else {
            template = FormatTemplate.empty
            isFormat = false
        }
        if case .substituted(let s) = entry.value { substitution = s } else { substitution = nil }
    }
}
