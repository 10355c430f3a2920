import HeraldCore
import HeraldLocalization
import HeraldPayload

/// `herald-strings check [--limit NAME|BYTES] [--default-language LANG]
/// [--localize server|client] [--table NAME] FILE…`: the worst-case payload
/// size of every template in every language of the catalogs, against the
/// limit. A template over the limit, or one that cannot be built, is an
/// error at its line (`path:line: error: …`) and the exit status is 1.
struct CheckCommand {
    var limit = SizeLimit.http2
    var defaultLanguage = "en"
    var mode = LocalizationMode.server
    var table = StringCatalog.defaultTable
    var inputs: CatalogInputs

    init(_ arguments: [String]) throws(UsageError) {
        let parsed = try Arguments(arguments, options: ["--limit", "--default-language", "--table", "--localize"])
        if let text = parsed.values["--limit"] { limit = try Self.limit(text) }
        defaultLanguage = parsed.values["--default-language"] ?? defaultLanguage
        table = parsed.values["--table"] ?? table
        if let m = parsed.values["--localize"] {
            guard m == "server" || m == "client" else { throw UsageError("--localize takes server or client, not \(m)") }
            mode = LocalizationMode(rawValue: m)
        }
        inputs = try CatalogInputs(parsed.files)
        if inputs.catalogCount == 0 { throw UsageError("no .strings or .xcstrings files given") }
        if inputs.templates.isEmpty { throw UsageError("no templates (\(CatalogInputs.templateSuffix) files) given") }
    }

    static func limit(_ text: String) throws(UsageError) -> SizeLimit {
        if let profile = SizeLimit.profile(named: text) { return profile }
        if let n = Int(text), n > 0 { return SizeLimit(bytes: n) }
        let names = SizeLimit.profiles.map { "\($0.name) (\($0.bytes))" }.joined(separator: ", ")
        throw UsageError("--limit takes a number of bytes or one of \(names), not \(text)")
    }

    func run() -> Int32 {
        var log = DiagnosticLog()
        let loaded = inputs.load(into: &log)
        let audit = CatalogAudit(loaded.catalog, reference: LanguageTag(parsing: defaultLanguage), untranslated: loaded.untranslated)
        for problem in audit.problems { log.report(loaded.locator.diagnostic(problem, severity: .warning)) }
        guard log.errors == 0 else { return 1 }
        let worstCase: WorstCasePayload
        do {
            worstCase = WorstCasePayload(localizer: try makeLocalizer(loaded.catalog), mode: mode)
        } catch {
            writeToStandardError("herald-strings: \(error.message)\n")
            return 1
        }
        let languages = loaded.catalog.languages.filter { !$0.isBase }
        var measured = 0, over = 0
        print("herald-check: worst-case payload sizes against \(limit)")
        for file in inputs.templates {
            for template in NotificationTemplate.load(file, log: &log) {
                print("\(file):\(template.line): \(template.name) (\((template.request.localization ?? mode).rawValue)-side)")
                for language in languages {
                    switch worstCase.size(of: template, language: language) {
                    case .success(let size):
                        measured += 1
                        if report(size, of: template, in: language, &log) { over += 1 }
                    case .failure(let failure):
                        let message = "template \"\(template.name)\" in \(language): \(failure.reason)"
                        log.report(Diagnostic(file: file, line: template.line, message: message))
                    }
                }
            }
        }
        print("herald-check: \(measured) sizes measured, \(over) over the limit, \(log.errors) error\(log.errors == 1 ? "" : "s")")
        return log.errors == 0 ? 0 : 1
    }

    /// The localizer, with the default language if the catalogs have it, else their first language.
    func makeLocalizer(_ catalog: StringCatalog) throws(ResolverError) -> CatalogLocalizer {
        let hasDefault = catalog.languages.contains { $0.description == defaultLanguage || $0.language == defaultLanguage }
        let first = catalog.languages.first(where: { !$0.isBase })?.description ?? defaultLanguage
        return try CatalogLocalizer(catalog: catalog, table: table, defaultLanguage: hasDefault ? defaultLanguage : first)
    }

    /// Prints one language's row; a size over the limit is also an error at the template's line. Returns whether it is over.
    func report(_ size: Int, of template: NotificationTemplate, in language: LanguageTag, _ log: inout DiagnosticLog) -> Bool {
        let excess = size - limit.bytes
        let verdict = excess > 0 ? "OVER by \(excess)" : "\(size * 100 / limit.bytes)%"
        print("    \(language.description.padding(8)) \(String(size).leftPadding(5)) bytes  \(verdict)")
        guard excess > 0 else { return false }
        log.report(Diagnostic(
            file: template.file, line: template.line,
            message: "template \"\(template.name)\" in \(language) is \(size) bytes at worst, \(excess) over the \(limit.name) limit of \(limit.bytes)"))
        return true
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
    fileprivate func leftPadding(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
