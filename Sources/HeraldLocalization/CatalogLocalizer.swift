import HeraldCore

/// Localizes alerts from compiled string catalogs, server-side or client-side.
///
/// The mode is the request's own (`"localization": "server" | "client"`),
/// else the one this localizer was made with.
///
/// - **Server-side**: `loc-key`/`loc-args`, `title-loc-key`/`title-loc-args`
///   and `subtitle-loc-key`/`subtitle-loc-args` are rendered into `body`,
///   `title` and `subtitle` in the request's language (resolved by the
///   ``LanguageResolver``: exact, without region, script-aware for Chinese,
///   then the fallback chain, the default language and `Base`), and the keys
///   are removed, so the device shows the text as it is. A key missing in a
///   language falls back along the chain.
/// - **Client-side**: the keys go to the device unchanged, after checking that
///   each is in the default language's catalog and that its argument count
///   matches the template's specifiers (otherwise the device would show a
///   broken message).
///
/// Every failure is a ``StageFailure`` (the request ends `dropped`) naming the
/// key, the language and the file: a key missing everywhere, arguments that
/// don't match the template, an argument a numeric specifier cannot read.
/// `action-loc-key` is always left for the device.
///
/// ```swift
/// let catalog = try StringCatalog.load(path: "Catalogs")
/// let localizer = try CatalogLocalizer(catalog: catalog, defaultLanguage: "en", fallback: ["es"])
/// try localizer.localize(&request)   // request.aps.alert?.body is now in the device's language
/// ```
public struct CatalogLocalizer: Localizer {
    public let catalog: StringCatalog
    public let table: StringTable
    public let resolver: LanguageResolver
    public let mode: LocalizationMode
    /// Each catalog language's plural rule set, resolved once.
    let pluralRuleSets: [UInt8]

    /// - Parameters:
    ///   - catalog: the loaded catalogs.
    ///   - table: the table keys are looked up in (the device uses `Localizable`).
    ///   - defaultLanguage: the last language tried, and the one client-side checks use.
    ///   - fallback: languages tried, in order, after the request's own.
    ///   - mode: the mode for requests that don't choose one.
    public init(
        catalog: StringCatalog, table: String = StringCatalog.defaultTable, defaultLanguage: String = "en",
        fallback: [String] = [], mode: LocalizationMode = .server
    ) throws(ResolverError) {
        guard let t = catalog.table(table) else {
            throw ResolverError("no table \"\(table)\" in the catalogs (tables: \(catalog.tables.keys.sorted().joined(separator: ", ")))")
        }
        self.catalog = catalog
        self.table = t
        self.resolver = try LanguageResolver(languages: catalog.languages, defaultLanguage: defaultLanguage, fallback: fallback)
        self.mode = mode
        self.pluralRuleSets = resolver.languages.map { PluralRules.ruleSet(of: $0) }
    }

    public func localize(_ request: inout NotificationRequest) throws(StageFailure) {
        // The alert is moved out and back rather than copied: a copy would retain all of its parts.
        guard var alert = request.aps.alert.take() else { return }
        defer { request.aps.alert = alert }
        try KeyCheckingLocalizer.check(key: alert.locKey, args: alert.locArgs, name: "loc")
        try KeyCheckingLocalizer.check(key: alert.titleLocKey, args: alert.titleLocArgs, name: "title-loc")
        try KeyCheckingLocalizer.check(key: alert.subtitleLocKey, args: alert.subtitleLocArgs, name: "subtitle-loc")
        guard alert.hasLocalizationKeys else { return }
        if (request.localization ?? mode) == .client {
            if let key = alert.locKey { try check(key, alert.locArgs, "loc") }
            if let key = alert.titleLocKey { try check(key, alert.titleLocArgs, "title-loc") }
            if let key = alert.subtitleLocKey { try check(key, alert.subtitleLocArgs, "subtitle-loc") }
            return
        }
        let chain = resolver.chain(for: request.language)
        if let key = alert.locKey { alert.body = try render(key, alert.locArgs, "loc", chain) }
        if let key = alert.titleLocKey { alert.title = try render(key, alert.titleLocArgs, "title-loc", chain) }
        if let key = alert.subtitleLocKey { alert.subtitle = try render(key, alert.subtitleLocArgs, "subtitle-loc", chain) }
        alert.clearLocalizationKeys()
    }

    /// Renders `key` with `args` in the first language of `chain` that has it.
    public func render(_ key: String, _ args: [String]?, _ name: String, _ chain: [Int]) throws(StageFailure) -> String {
        if let id = table.keyID(key) {
            for language in chain {
                guard let box = table.box(keyID: id, language: language) else { continue }
                do {
                    if box.isFormat { return try box.template.render(args ?? []) }
                    if let substitution = box.substitution { return try substitution.render(args ?? [], ruleSet: pluralRuleSets[language]) }
                    return try box.entry.render(args ?? [], ruleSet: pluralRuleSets[language])
                } catch {
                    throw StageFailure("\(name)-key \"\(key)\" in \(resolver.languages[language]) (\(box.entry.origin)): \(error.message)")
                }
            }
        }
        throw StageFailure(
            "\(name)-key \"\(key)\" is not in the \(table.name) catalogs of \(chain.map { resolver.languages[$0].description }.joined(separator: ", "))")
    }

    /// Checks `key` against the default language's catalog (client-side).
    public func check(_ key: String, _ args: [String]?, _ name: String) throws(StageFailure) {
        if let id = table.keyID(key) {
            for language in resolver.defaultLanguageChain {
                guard let entry = table.entry(keyID: id, language: language) else { continue }
                do {
                    try entry.checkArgumentCount(args?.count ?? 0)
                    return
                } catch {
                    throw StageFailure("\(name)-key \"\(key)\" in \(resolver.languages[language]) (\(entry.origin)): \(error.message)")
                }
            }
        }
        throw StageFailure(
            "\(name)-key \"\(key)\" is not in the default \(table.name) catalog (\(resolver.defaultLanguageChain.map { resolver.languages[$0].description }.joined(separator: ", ")))")
    }
}
