import HeraldCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `herald-strings`: the tool behind Herald's SwiftPM plugins (see
/// `docs/plugins.md`). Kept to the catalog and payload modules, so a package
/// using the plugins builds little.
@main
enum HeraldStrings {
    static let usage = """
        usage: herald-strings generate [--output FILE] [--reference LANG] FILE…
               herald-strings check [--limit http2|binary|voip|binary-legacy|BYTES] [--default-language LANG]
                                    [--localize server|client] [--table NAME] FILE…

        FILE: .strings files (in <language>.lproj folders), .xcstrings string catalogs
        and *.herald.jsonl notification templates.

        generate  checks the catalogs (bad specifiers, missing translations, arguments that differ
                  between languages) and the templates' keys, then writes Swift with one typed
                  member per key (to standard output without --output). Problems are printed as
                  path:line: error: …, and the exit status is 1.
        check     prints the worst-case payload size of every template in every language against
                  the limit (default http2, 4096 bytes); exit status 1 when one is over or cannot be built.

        Exit status: 0 fine, 1 problems found, 2 wrong arguments.
        """

    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard let command = arguments.first else { fail(usage) }
        arguments.removeFirst()
        do {
            switch command {
            case "generate": exit(try GenerateCommand(arguments).run())
            case "check": exit(try CheckCommand(arguments).run())
            case "-h", "--help", "help":
                print(usage)
                exit(0)
            default: throw UsageError("unknown command \(command)")
            }
        } catch {
            fail("herald-strings: \(error)\n\n\(usage)")
        }
    }

    static func fail(_ message: String) -> Never {
        writeToStandardError(message + "\n")
        exit(2)
    }
}

/// A command line split into option values (every option takes one) and files.
struct Arguments {
    var values: [String: String] = [:]
    var files: [String] = []

    init(_ arguments: [String], options: Set<String>) throws(UsageError) {
        var it = arguments.makeIterator()
        while let a = it.next() {
            if options.contains(a) {
                guard let value = it.next() else { throw UsageError("\(a) needs a value") }
                values[a] = value
            } else if a.hasPrefix("--") {
                throw UsageError("unknown option \(a)")
            } else {
                files.append(a)
            }
        }
    }
}
