import HeraldCore
import HeraldLocalization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `herald-strings generate [--output FILE] [--reference LANG] FILE…`: checks
/// the catalogs (and that the templates use their keys rightly) and writes the
/// typed keys. Every problem is printed as `path:line: error: …`; with any,
/// nothing is written and the exit status is 1.
struct GenerateCommand {
    var output: String?
    var reference = "en"
    var inputs: CatalogInputs

    init(_ arguments: [String]) throws(UsageError) {
        let parsed = try Arguments(arguments, options: ["--output", "--reference"])
        output = parsed.values["--output"]
        reference = parsed.values["--reference"] ?? reference
        inputs = try CatalogInputs(parsed.files)
        if inputs.catalogCount == 0 { throw UsageError("no .strings or .xcstrings files given") }
    }

    func run() -> Int32 {
        var log = DiagnosticLog()
        let loaded = inputs.load(into: &log)
        let audit = CatalogAudit(loaded.catalog, reference: LanguageTag(parsing: reference), untranslated: loaded.untranslated)
        // A missing plural form renders the other form: said, but the build goes on.
        for problem in audit.problems {
            log.report(loaded.locator.diagnostic(problem, severity: problem.code == .missingPluralForm ? .warning : .error))
        }
        checkTemplates(loaded, audit, &log)
        guard log.errors == 0 else {
            writeToStandardError("herald-strings: \(log.errors) error\(log.errors == 1 ? "" : "s") in the catalogs; nothing generated\n")
            return 1
        }
        let names = (inputs.stringsFiles + inputs.stringCatalogs).map { path in
            path.split(separator: "/").suffix(path.hasSuffix(".strings") ? 2 : 1).joined(separator: "/")
        }
        let source = SwiftSource.make(audit.signatures, sources: names.sorted())
        guard let output else {
            print(source, terminator: "")
            return 0
        }
        do {
            try write(source, to: output)
        } catch {
            writeToStandardError("herald-strings: \(error)\n")
            return 1
        }
        return 0
    }

    /// Each template's keys must be in the default table, with as many arguments as declared.
    func checkTemplates(_ loaded: CatalogInputs.Loaded, _ audit: CatalogAudit, _ log: inout DiagnosticLog) {
        let signatures = Dictionary(
            audit.signatures.filter { $0.table == StringCatalog.defaultTable }.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        for file in inputs.templates {
            for template in NotificationTemplate.load(file, log: &log) {
                guard let alert = template.request.aps.alert else { continue }
                for field in LocalizedField.allCases {
                    guard let key = field.key(alert) else { continue }
                    let declared = template.slots[field]?.count ?? 0
                    let problem: String
                    if let signature = signatures[key] {
                        guard signature.arguments.count != declared else { continue }
                        problem = "declares \(declared) \(field.argumentsKey) but \"\(key)\" takes \(signature.arguments.count)"
                    } else if loaded.catalog.table()?.keyID(key) == nil {
                        problem = "\(field.rawValue)-key \"\(key)\" is not in the \(StringCatalog.defaultTable) catalogs"
                    } else {
                        continue  // the key is there but broken: reported with the catalogs
                    }
                    log.report(Diagnostic(file: file, line: template.line, message: "template \"\(template.name)\" \(problem)"))
                }
            }
        }
    }

    /// Writes `text` to `path`, replacing it.
    func write(_ text: String, to path: String) throws(IOError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw IOError(path: path, errno: errno) }
        defer { close(fd) }
        try writeAll(fd, Array(text.utf8), to: path)
    }
}
