import ArgumentParser
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldLocalization

/// `herald validate`: checks requests and catalogs without sending anything.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check requests (and the catalogs they use) without sending: report each request that would be dropped or truncated, and why.",
        discussion: """
            Runs the same localize, payload, size-guard and frame stages as `herald send` with the same \
            configuration, and prints one JSON line per request that would not go out as written: \
            its `dropped` outcome (as `herald send` writes it), or {"line":…,"id":…,"outcome":"truncated","from":…,"to":…}. \
            A last line on standard error sums up. Nothing is sent and the token store is not read.

            With catalogs, each problem a build check would report about them comes first on standard error, \
            as `herald: warning: catalog: <file>: <message> [<code>]`: a value that does not compile \
            (invalid-value), a language whose value takes other arguments than the default language's \
            (argument-mismatch), a plural value without a form its language's CLDR rules need \
            (missing-plural-form: a device would show the `other` form). Keys missing in a language \
            fall back along the language chain and are left to `herald-strings check`, which knows the \
            keys not to translate. The summary counts them as catalog_problems; they do not change the exit status.

            Examples:
              herald validate requests.jsonl
              herald validate --config herald.json --catalogs Localizable/ requests.jsonl

            Exit status: 0 every request would go out as written; 3 some would be dropped or truncated; \
            1 the configuration or the catalogs could not be loaded.
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "Configuration file (JSON).")
    var config: String?

    @OptionGroup(title: "Localization")
    var localization: LocalizationOptions

    func run() async throws {
        var configuration = try loadConfiguration(config)
        localization.apply(to: &configuration)
        let preview: PayloadPreview
        do {
            preview = try PayloadPreview(assembly: HeraldAssembly(configuration: configuration), framing: true)
        } catch {
            throw SetupError("\(error)")
        }
        let catalogProblems = try Self.reportCatalogProblems(configuration)
        var requests = 0, dropped = 0, truncated = 0
        var out = OutputBuffer()
        do {
            try await preview.run(path: input) { result in
                requests += 1
                switch result {
                case .payload: return
                case .outcome(let record):
                    dropped += 1
                    out.appendLine(OutcomeWriter.line(record))
                case .truncated(let payload, let from, let record):
                    truncated += 1
                    var line = JSONLine()
                    if let n = record.line { line.add("line", n) }
                    if let id = record.id { line.add("id", Int(id)) }
                    line.add("outcome", "truncated")
                    line.add("from", from)
                    line.add("to", payload.count)
                    out.appendLine(line.bytes)
                }
            }
        } catch {
            try? out.finish()
            throw SetupError("cannot read input: \(error)")
        }
        let written: Result<Void, any Error> = Result { try out.finish() }
        var fields = JSONLine()
        fields.add("requests", requests)
        fields.add("ok", requests - dropped - truncated)
        fields.add("dropped", dropped)
        fields.add("truncated", truncated)
        if let catalogProblems { fields.add("catalog_problems", catalogProblems) }
        var summary = JSONLine()
        summary.add("validate", fields)
        writeToStandardError(summary.line)
        try written.get()
        if dropped + truncated > 0 { throw ExitCode(3) }
    }

    /// The configured catalogs' problems (``CatalogAudit``) on standard error, checked
    /// against the default language; how many, or `nil` without catalogs.
    static func reportCatalogProblems(_ configuration: HeraldConfiguration) throws -> Int? {
        guard let path = configuration.catalogs else { return nil }
        let catalog: StringCatalog
        do {
            catalog = try StringCatalog.load(path: path)
        } catch {
            throw SetupError("\(error)")
        }
        let shown: Set<CatalogProblem.Code> = [.invalidValue, .argumentMismatch, .missingPluralForm]
        let audit = CatalogAudit(catalog, reference: LanguageTag(parsing: configuration.defaultLanguage))
        var count = 0
        for problem in audit.problems where shown.contains(problem.code) {
            count += 1
            warnAtStart("catalog: \(problem) [\(problem.code)]")
        }
        return count
    }
}
