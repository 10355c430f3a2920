import Synchronization

/// Chooses, for a device's preferred language, the catalog languages to try in order.
///
/// For a request tag `T` the chain is:
/// 1. the languages of `T`'s language whose script is compatible — for
///    Chinese the script is explicit or implied by the region (TW, HK, MO →
///    Hant; CN, SG and no region → Hans), and Hans and Hant never mix; other
///    languages match whatever their script unless both name different ones —
///    best first: the same tag exactly (`zh-Hant-TW`), the same region and
///    script (`zh-TW` for `zh-Hant-TW`), the language (and script) without a
///    region (`fr` for `fr-CA`, `zh-Hant` for `zh-HK`), then the same language
///    in other regions (`pt-BR` for `pt-PT`), by name;
/// 2. the same for each language of the configured fallback list, in order;
/// 3. the same for the default language;
/// 4. `Base`, when the catalogs have a base localization.
///
/// Languages already in the chain are not repeated. A missing or unreadable
/// tag starts at step 2. Chains are computed once per distinct tag and cached
/// (up to ``cacheLimit`` tags; beyond that they are computed each time).
public final class LanguageResolver: Sendable {
    public let languages: [LanguageTag]
    public let fallback: [LanguageTag]
    public let defaultLanguage: LanguageTag
    /// The chain for a request without a usable language.
    public let defaultChain: [Int]
    /// The languages `defaultLanguage` resolves to (then `Base`): the catalog client-side checks use.
    public let defaultLanguageChain: [Int]
    public let cacheLimit: Int
    let cache = Mutex(StringIndex<[Int]>())

    /// - Throws: a ``ResolverError`` when the default language (or a fallback
    ///   language) is not a language tag, or when no catalog serves the default language.
    public init(languages: [LanguageTag], defaultLanguage: String = "en", fallback: [String] = [], cacheLimit: Int = 4096) throws(ResolverError) {
        self.languages = languages
        self.cacheLimit = cacheLimit
        guard let d = LanguageTag(parsing: defaultLanguage) else { throw ResolverError("default language \"\(defaultLanguage)\" is not a language tag") }
        self.defaultLanguage = d
        var f: [LanguageTag] = []
        for name in fallback {
            guard let t = LanguageTag(parsing: name) else { throw ResolverError("fallback language \"\(name)\" is not a language tag") }
            f.append(t)
        }
        self.fallback = f
        let base = languages.firstIndex(where: \.isBase)
        var tail: [Int] = []
        for t in f { Self.appendCandidates(for: t, languages: languages, to: &tail) }
        var defaults: [Int] = []
        Self.appendCandidates(for: d, languages: languages, to: &defaults)
        if let base { defaults.append(base) }
        guard !defaults.isEmpty else {
            throw ResolverError(
                "no catalog for the default language \"\(d)\" (catalog languages: \(languages.map(\.description).sorted().joined(separator: ", ")))")
        }
        self.defaultLanguageChain = defaults
        for i in defaults where !tail.contains(i) { tail.append(i) }
        self.defaultChain = tail
    }

    /// The languages to try for a request's `language`, best first.
    public func chain(for tag: String?) -> [Int] {
        guard let tag else { return defaultChain }
        if let cached = cache.withLock({ $0[tag] }) { return cached }
        let chain = computeChain(for: tag)
        cache.withLock { c in
            if c.count < cacheLimit { c.set(tag, chain) }
        }
        return chain
    }

    func computeChain(for tag: String) -> [Int] {
        guard let t = LanguageTag(parsing: tag), !t.isBase else { return defaultChain }
        var chain: [Int] = []
        Self.appendCandidates(for: t, languages: languages, to: &chain)
        for i in defaultChain where !chain.contains(i) { chain.append(i) }
        return chain
    }

    /// Appends the catalog languages matching `t`, best first, skipping those already in `out`.
    static func appendCandidates(for t: LanguageTag, languages: [LanguageTag], to out: inout [Int]) {
        var scored: [(score: Int, name: String, index: Int)] = []
        let ts = t.effectiveScript
        for (i, l) in languages.enumerated() where l.language == t.language && !l.isBase {
            let ls = l.effectiveScript
            if let ts, let ls, ts != ls { continue }
            let score: Int
            if l == t {
                score = 0
            } else if l.region == t.region {
                score = 1
            } else if l.region == nil {
                score = 2
            } else {
                score = 3
            }
            scored.append((score, l.description, i))
        }
        scored.sort { ($0.score, $0.name) < ($1.score, $1.name) }
        for s in scored where !out.contains(s.index) { out.append(s.index) }
    }

    /// The chain as language tags, for messages and docs.
    public func describeChain(for tag: String?) -> [String] { chain(for: tag).map { languages[$0].description } }
}

/// A resolver that cannot be built: a bad language tag or no catalog for the default language.
public struct ResolverError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
