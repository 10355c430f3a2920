/// A language identifier reduced to what catalog matching needs: language,
/// script and region, in canonical case (`zh-Hant-TW`, `pt-BR`, `en`).
///
/// Parsing is lenient about separators and case (`pt_BR`, `ZH-hant-tw`,
/// `en-US-u-ca-gregory` → `en-US`): variants and extensions are ignored.
/// A few legacy names found in old bundles (`English.lproj`, `French.lproj`…)
/// and deprecated codes (`iw`, `in`, `ji`) map to their modern codes. `Base`
/// (Xcode's base localization) is its own tag.
public struct LanguageTag: Sendable, Hashable, CustomStringConvertible {
    /// Lowercase ISO 639 code (`en`, `zh`, `yue`), or `Base`.
    public let language: String
    /// Titlecase ISO 15924 script (`Hant`), when given.
    public let script: String?
    /// Uppercase ISO 3166 region or UN M.49 area (`BR`, `419`), when given.
    public let region: String?

    public init(language: String, script: String? = nil, region: String? = nil) {
        self.language = language
        self.script = script
        self.region = region
    }

    /// Base.lproj: the development language's base localization.
    public static let base = LanguageTag(language: "Base")

    public var isBase: Bool { language == "Base" }

    /// The canonical form, e.g. `zh-Hant-TW`.
    public var description: String {
        var s = language
        if let script { s += "-" + script }
        if let region { s += "-" + region }
        return s
    }

    /// The script text in this language is written in: the explicit script, or
    /// for Chinese the one its region implies (TW, HK, MO → Hant; others → Hans).
    /// `nil` when unknown (most languages have one usual script).
    public var effectiveScript: String? {
        if let script { return script }
        if language == "zh" {
            switch region {
            case "TW", "HK", "MO": return "Hant"
            default: return "Hans"
            }
        }
        return nil
    }

    static let legacyNames: [String: String] = [
        "english": "en", "french": "fr", "german": "de", "japanese": "ja", "spanish": "es",
        "italian": "it", "dutch": "nl", "portuguese": "pt", "swedish": "sv", "danish": "da",
        "finnish": "fi", "norwegian": "nb", "korean": "ko", "russian": "ru", "polish": "pl",
        "chinese": "zh",
    ]
    static let deprecatedCodes: [String: String] = ["iw": "he", "in": "id", "ji": "yi", "no": "nb"]

    /// Parses a BCP 47 tag (or a POSIX-style `pt_BR`, or an lproj directory's
    /// name without `.lproj`). Returns `nil` when the first subtag is not a language.
    public init?(parsing text: some StringProtocol) {
        var parts: [Substring] = []
        var current = Substring(text)
        while let sep = current.firstIndex(where: { $0 == "-" || $0 == "_" }) {
            parts.append(current[..<sep])
            current = current[current.index(after: sep)...]
        }
        parts.append(current)
        guard let first = parts.first, !first.isEmpty, first.allSatisfy({ $0.isASCII && $0.isLetter }) else { return nil }
        var language = first.lowercased()
        if language == "base" {
            guard parts.count == 1 else { return nil }
            self = .base
            return
        }
        if let legacy = Self.legacyNames[language], parts.count == 1 {
            language = legacy
        } else {
            guard (2...3).contains(first.count) else { return nil }
            language = Self.deprecatedCodes[language] ?? language
        }
        var script: String?
        var region: String?
        for part in parts.dropFirst() {
            if part.count == 1 { break }  // an extension (`-u-…`) or private use (`-x-…`): ignore the rest
            if part.count == 4, script == nil, region == nil, part.allSatisfy({ $0.isASCII && $0.isLetter }) {
                script = part.prefix(1).uppercased() + part.dropFirst().lowercased()
            } else if region == nil, part.count == 2, part.allSatisfy({ $0.isASCII && $0.isLetter }) {
                region = part.uppercased()
            } else if region == nil, part.count == 3, part.allSatisfy({ $0.isASCII && $0.isNumber }) {
                region = String(part)
            } else if part.isEmpty {
                return nil
            }
            // Anything else is a variant: ignored.
        }
        self.init(language: language, script: script, region: region)
    }
}
