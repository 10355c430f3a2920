import HeraldCore
import HeraldJSON
import HeraldLocalization

/// The files a run was given, sorted by kind: `.strings` and `.stringsdict`
/// files (their language from the enclosing `<language>.lproj` folder, their
/// table from the file name), string catalogs (`.xcstrings`) and notification
/// templates (`*.herald.jsonl`, see `docs/plugins.md`).
struct CatalogInputs {
    var stringsFiles: [String] = []
    var stringsDictFiles: [String] = []
    var stringCatalogs: [String] = []
    var templates: [String] = []

    static let templateSuffix = ".herald.jsonl"

    /// Sorts `paths` by kind; anything else is a usage error.
    init(_ paths: [String]) throws(UsageError) {
        for path in paths {
            if path.hasSuffix(".strings") {
                stringsFiles.append(path)
            } else if path.hasSuffix(".stringsdict") {
                stringsDictFiles.append(path)
            } else if path.hasSuffix(".xcstrings") {
                stringCatalogs.append(path)
            } else if path.hasSuffix(Self.templateSuffix) {
                templates.append(path)
            } else {
                throw UsageError("\(path): not a .strings, .stringsdict, .xcstrings or \(Self.templateSuffix) file")
            }
        }
    }

    var catalogCount: Int { stringsFiles.count + stringsDictFiles.count + stringCatalogs.count }

    /// The catalog, what locates its entries, and the keys marked `"shouldTranslate": false`.
    struct Loaded {
        var catalog = StringCatalog()
        var locator = OriginLocator()
        var untranslated: Set<String> = []
    }

    /// Loads every catalog, reporting what cannot be read (and `.strings`
    /// files outside a `.lproj` folder) to `log`.
    func load(into log: inout DiagnosticLog) -> Loaded {
        var out = Loaded()
        func language(of file: String, _ kind: String) -> LanguageTag? {
            guard let folder = Self.lprojFolder(of: file) else {
                log.report(Diagnostic(file: file, line: 0, message: "a \(kind) file must be in a <language>.lproj folder"))
                return nil
            }
            guard let language = LanguageTag(parsing: folder) else {
                log.report(Diagnostic(file: file, line: 0, message: "\"\(folder).lproj\" does not name a language"))
                return nil
            }
            return language
        }
        for file in stringsFiles {
            guard let language = language(of: file, ".strings") else { continue }
            do {
                try out.catalog.loadStringsFile(file, language: language, table: Self.tableName(file, ".strings"))
            } catch {
                log.report(Diagnostic(error))
            }
        }
        // After the .strings files: a .stringsdict entry overrides a .strings one, as in StringCatalog.load.
        for file in stringsDictFiles {
            guard let language = language(of: file, ".stringsdict") else { continue }
            do {
                try out.catalog.loadStringsDictFile(file, language: language, table: Self.tableName(file, ".stringsdict"))
                out.locator.keyLines[file] = Self.plistKeyLines(try readSmallFile(file, limit: 64 << 20))
            } catch let error as CatalogError {
                log.report(Diagnostic(error))
            } catch {
                log.report(Diagnostic(file: file, line: 0, message: "cannot read: \(error)"))
            }
        }
        for file in stringCatalogs {
            do {
                try out.catalog.loadStringCatalog(file, table: Self.tableName(file, ".xcstrings"))
                let bytes = try readSmallFile(file, limit: 64 << 20)
                out.locator.catalogLines[file] = JSONKeyLines(bytes)
                out.untranslated.formUnion(Self.untranslatedKeys(bytes))
            } catch let error as CatalogError {
                log.report(Diagnostic(error))
            } catch {
                log.report(Diagnostic(file: file, line: 0, message: "cannot read: \(error)"))
            }
        }
        // `file:line: fr "KEY" overrides <origin>`: a .strings file and a string catalog give the same key.
        for note in out.catalog.diagnostics where note.contains(" overrides ") {
            guard let split = note.firstRange(of: ": ") else { continue }
            let (file, line) = out.locator.locate(origin: String(note[..<split.lowerBound]), key: "", language: nil)
            log.report(Diagnostic(file: file, line: line, severity: .warning, message: String(note[split.upperBound...])))
        }
        return out
    }

    /// The line of each `<key>NAME</key>`'s first occurrence in an XML
    /// property list (a top-level key comes before the variables inside it);
    /// empty for a binary one.
    static func plistKeyLines(_ bytes: [UInt8]) -> [String: Int] {
        var lines: [String: Int] = [:]
        for (number, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            var rest = String(decoding: line, as: UTF8.self)[...]
            while let open = rest.firstRange(of: "<key>"), let close = rest[open.upperBound...].firstRange(of: "</key>") {
                let name = String(rest[open.upperBound..<close.lowerBound])
                if lines[name] == nil { lines[name] = number + 1 }
                rest = rest[close.upperBound...]
            }
        }
        return lines
    }

    /// The language folder's name without `.lproj`, if the file is in one.
    static func lprojFolder(of path: String) -> Substring? {
        let parts = path.split(separator: "/")
        guard parts.count >= 2, parts[parts.count - 2].hasSuffix(".lproj") else { return nil }
        return parts[parts.count - 2].dropLast(6)
    }

    static func tableName(_ path: String, _ ext: String) -> String {
        String((path.split(separator: "/").last ?? Substring(path)).dropLast(ext.count))
    }

    /// The keys of a string catalog marked `"shouldTranslate": false`.
    static func untranslatedKeys(_ bytes: [UInt8]) -> [String] {
        guard let strings = (try? JSONParser.parse(bytes))?.objectValue?["strings"]?.objectValue else { return [] }
        return strings.compactMap { $0.value.objectValue?["shouldTranslate"]?.boolValue == false ? $0.key : nil }
    }
}

/// Wrong arguments on the command line (exit status 2).
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
