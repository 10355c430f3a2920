import HeraldCore
import HeraldLocalization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A message about a place in a file, printed as compilers print them
/// (`path:line:column: error: message`), so SwiftPM, Xcode and editors show
/// it at that place.
struct Diagnostic: Error, CustomStringConvertible {
    enum Severity: String { case error, warning, note }

    var file: String
    /// 1-based; 0 when the message is about the whole file.
    var line: Int
    var column = 0
    var severity = Severity.error
    var message: String

    init(file: String, line: Int, column: Int = 0, severity: Severity = .error, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.severity = severity
        self.message = message
    }

    init(_ error: CatalogError) {
        self.init(file: error.file, line: error.line, column: error.column, message: error.message)
    }

    var description: String {
        var place = file
        if line > 0 { place += ":\(line)" }
        if line > 0 && column > 0 { place += ":\(column)" }
        return "\(place): \(severity.rawValue): \(message)"
    }
}

/// The diagnostics of one run, printed on standard error as they come.
struct DiagnosticLog {
    private(set) var errors = 0
    private(set) var warnings = 0

    mutating func report(_ d: Diagnostic) {
        switch d.severity {
        case .error: errors += 1
        case .warning: warnings += 1
        case .note: break
        }
        fflush(nil)  // all of standard output first: keeps the order of the report (standard output) and the diagnostics
        writeToStandardError(d.description + "\n")
    }

    mutating func report(_ all: [Diagnostic]) {
        for d in all { report(d) }
    }
}

/// Turns a catalog entry's origin (``CatalogEntry/origin``) into a file and
/// line: `.strings` origins are `file:line` already; string catalog origins
/// name the file and a key path, whose line is found in the file's text;
/// `.stringsdict` origins name the file and the key, found the same way.
struct OriginLocator {
    /// The key lines of each string catalog read, by path.
    var catalogLines: [String: JSONKeyLines] = [:]
    /// The line of each key of each `.stringsdict` file read, by path.
    var keyLines: [String: [String: Int]] = [:]

    func locate(origin: String, key: String, language: LanguageTag?) -> (file: String, line: Int) {
        for (file, lines) in catalogLines where origin.hasPrefix(file + ": ") {
            let entry = ["strings", key]
            if let language, let line = lines.line(of: entry + ["localizations", language.description]) { return (file, line) }
            return (file, lines.line(of: entry) ?? 1)
        }
        for (file, lines) in keyLines where origin.hasPrefix(file + ": ") {
            return (file, lines[String(origin.dropFirst(file.count + 2))] ?? 1)
        }
        if let colon = origin.lastIndex(of: ":"), let line = Int(origin[origin.index(after: colon)...]) {
            return (String(origin[..<colon]), line)
        }
        return (origin, 0)
    }

    func diagnostic(_ p: CatalogProblem, severity: Diagnostic.Severity = .error) -> Diagnostic {
        // A missing translation points at the key where it is (the origin's language has it).
        let language = p.code == .missingTranslation ? nil : p.language
        let (file, line) = locate(origin: p.origin, key: p.key, language: language)
        return Diagnostic(file: file, line: line, severity: severity, message: p.message)
    }
}
