import HeraldCore
import HeraldJSON

/// Reads an Xcode string catalog (`.xcstrings`, JSON, format version 1.0).
///
/// ```json
/// { "sourceLanguage": "en", "version": "1.0",
///   "strings": {
///     "GAME_PLAY_REQUEST_FORMAT": { "localizations": {
///       "en": { "stringUnit": { "state": "translated", "value": "%@ and %@ have invited you to play Monopoly" } },
///       "fr": { "stringUnit": { "state": "translated", "value": "%@ et %@ vous invitent à jouer au Monopoly" } } } },
///     "UNREAD": { "localizations": { "en": { "variations": { "plural": {
///       "one":   { "stringUnit": { "state": "translated", "value": "%lld unread message" } },
///       "other": { "stringUnit": { "state": "translated", "value": "%lld unread messages" } } } } } } } } }
/// ```
///
/// Read: `stringUnit` values (whatever their `state`), `variations.plural`
/// (compiled to a ``PluralTemplate``) and `variations.device` (the `iphone`
/// form, else `other`). A key without a value in the source language renders
/// as the key itself, as Xcode does. `substitutions` (a value with
/// `%#@name@` variables, each with `argNum`, `formatSpecifier` and plural
/// variations whose forms write `%arg`) compile to a ``SubstitutionTemplate``.
/// The JSON is parsed
/// with Herald's strict parser: a syntax error names the file, line and column;
/// a wrong structure names the file and the key path.
public enum XCStringsParser {
    public struct Item: Sendable {
        public var key: String
        public var language: String
        public var entry: CatalogEntry
    }

    public static func parse(_ bytes: [UInt8], file: String) throws(CatalogError) -> [Item] {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw CatalogError(file: file, line: error.line, column: error.column, message: error.message)
        }
        func fail(_ path: String, _ message: String) -> CatalogError {
            CatalogError(file: file, message: path.isEmpty ? message : "\(path): \(message)")
        }
        guard case .object(let top) = root else { throw fail("", "the top level must be an object") }
        guard case .string(let source)? = top["sourceLanguage"] else { throw fail("sourceLanguage", "required, a language tag") }
        if let version = top["version"], version.stringValue == nil { throw fail("version", "must be a string") }
        guard let stringsValue = top["strings"] else { return [] }
        guard case .object(let strings) = stringsValue else { throw fail("strings", "must be an object") }

        var items: [Item] = []
        for (key, value) in strings {
            let path = "strings.\(key)"
            guard case .object(let entry) = value else { throw fail(path, "must be an object") }
            var hasSource = false
            if let locs = entry["localizations"] {
                guard case .object(let localizations) = locs else { throw fail("\(path).localizations", "must be an object") }
                for (language, loc) in localizations {
                    let locPath = "\(path).localizations.\(language)"
                    let origin = "\(file): \(locPath)"
                    let value = try compile(loc, path: locPath, fail: fail)
                    items.append(Item(key: key, language: language, entry: CatalogEntry(value: value, origin: origin)))
                    if language == source { hasSource = true }
                }
            }
            if !hasSource {
                items.append(Item(key: key, language: source, entry: CatalogEntry(compiling: key, origin: "\(file): \(path) (the key)")))
            }
        }
        return items
    }

    static func compile(_ node: JSONValue, path: String, fail: (String, String) -> CatalogError) throws(CatalogError) -> CatalogEntry.Value {
        guard case .object(let o) = node else { throw fail(path, "must be an object") }
        if let substitutions = o["substitutions"] {
            return try compileSubstitutions(o, substitutions, path: path, fail: fail)
        }
        if let unit = o["stringUnit"] {
            guard case .object(let u) = unit, case .string(let text)? = u["value"] else {
                throw fail("\(path).stringUnit", "must be an object with a string \"value\"")
            }
            do { return .format(try FormatTemplate(compiling: text)) } catch { return .invalid(error.message) }
        }
        guard let variationsValue = o["variations"] else { throw fail(path, "has neither \"stringUnit\" nor \"variations\"") }
        guard case .object(let variations) = variationsValue else { throw fail("\(path).variations", "must be an object") }
        if let pluralValue = variations["plural"] {
            guard case .object(let plural) = pluralValue else { throw fail("\(path).variations.plural", "must be an object") }
            var forms: [PluralCategory: FormatTemplate] = [:]
            for (name, formNode) in plural {
                let formPath = "\(path).variations.plural.\(name)"
                guard let category = PluralCategory(rawValue: name) else {
                    throw fail(formPath, "unknown plural category (zero, one, two, few, many, other)")
                }
                switch try compile(formNode, path: formPath, fail: fail) {
                case .format(let t): forms[category] = t
                case .invalid(let message): return .invalid("plural form \"\(name)\": \(message)")
                case .plural: return .invalid("plural form \"\(name)\" has nested plural variations")
                case .substituted: return .invalid("plural form \"\(name)\" has substitutions (put the plural in the substitution)")
                }
            }
            do { return .plural(try PluralTemplate(forms: forms)) } catch { return .invalid(error.message) }
        }
        if let deviceValue = variations["device"] {
            guard case .object(let device) = deviceValue else { throw fail("\(path).variations.device", "must be an object") }
            guard let name = preferredDevice(device.entries.map(\.key)), let chosen = device[name] else {
                throw fail("\(path).variations.device", "is empty")
            }
            return try compile(chosen, path: "\(path).variations.device.\(name)", fail: fail)
        }
        throw fail("\(path).variations", "has neither \"plural\" nor \"device\"")
    }

    /// The device form a notification uses, of `names` (in their file's order): `iphone`, else
    /// `other`, else the first. A string catalog's `variations.device` and a `.stringsdict`'s
    /// `NSStringDeviceSpecificRuleType` choose alike.
    static func preferredDevice(_ names: [String]) -> String? {
        names.first { $0 == "iphone" } ?? names.first { $0 == "other" } ?? names.first
    }

    /// A value with `substitutions`: its `stringUnit` is the format, each
    /// substitution a variable. A substitution that is not complete (no plural
    /// variations yet, a form without a value) makes the value invalid, not the file.
    static func compileSubstitutions(
        _ o: JSONObject, _ node: JSONValue, path: String, fail: (String, String) -> CatalogError
    ) throws(CatalogError) -> CatalogEntry.Value {
        guard case .object(let subs) = node else { throw fail("\(path).substitutions", "must be an object") }
        guard case .object(let unit)? = o["stringUnit"], case .string(let format)? = unit["value"] else {
            return .invalid("substitutions but no \"stringUnit\" with a string \"value\" (the format)")
        }
        do throws(FormatError) {
            var definitions: [String: SubstitutionTemplate.Definition] = [:]
            for (name, subNode) in subs {
                definitions[name] = try substitution(name, subNode)
            }
            return .substituted(try SubstitutionTemplate(format: format, definitions: definitions))
        } catch {
            return .invalid(error.message)
        }
    }

    static func substitution(_ name: String, _ node: JSONValue) throws(FormatError) -> SubstitutionTemplate.Definition {
        guard case .object(let sub) = node else { throw FormatError("the substitution \"\(name)\" must be an object") }
        var argument: Int?
        if let arg = sub["argNum"] {
            guard case .number(let number) = arg, let n = number.intValue else {
                throw FormatError("the substitution \"\(name)\": argNum must be an integer")
            }
            argument = n
        }
        var valueType = "@"
        if let spec = sub["formatSpecifier"] {
            guard case .string(let t) = spec else { throw FormatError("the substitution \"\(name)\": formatSpecifier must be a string") }
            valueType = t
        }
        guard case .object(let variations)? = sub["variations"], case .object(let plural)? = variations["plural"] else {
            throw FormatError("the substitution \"\(name)\" has no plural variations (\"variations\": {\"plural\": …})")
        }
        var forms: [PluralCategory: String] = [:]
        for (category, formNode) in plural {
            guard let c = PluralCategory(rawValue: category) else {
                throw FormatError("the substitution \"\(name)\": \"\(category)\" is not a plural category (zero, one, two, few, many, other)")
            }
            guard case .object(let form) = formNode, case .object(let formUnit)? = form["stringUnit"],
                case .string(let text)? = formUnit["value"]
            else {
                throw FormatError("the substitution \"\(name)\": the \(category) form has no \"stringUnit\" with a string \"value\"")
            }
            forms[c] = text
        }
        return SubstitutionTemplate.Definition(argument: argument, valueType: valueType, forms: forms, placeholder: "%arg")
    }
}
