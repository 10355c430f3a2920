import ArgumentParser
import HeraldCore
import HeraldKit
import HeraldPayload
#if canImport(Glibc)
import Glibc
#endif

struct PayloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Print the exact compact payload each request would send, or its dropped outcome.",
        discussion: """
            Runs the same localize, payload and size-guard stages as `herald send`, one output line \
            per request line: the payload bytes as they would go on the wire, or the outcome JSON \
            (as `herald send` writes it) when the request would be dropped. Profiles: \
            \(SizeLimit.profiles.map { "\($0.name) (\($0.bytes))" }.joined(separator: ", ")).

            Examples:
              herald payload requests.jsonl
              herald payload --profile voip --policy truncate requests.jsonl
            """
    )

    @Argument(help: "JSON Lines requests, or - for standard input.")
    var input: String = "-"

    @Option(help: "Payload size limit in bytes (instead of --profile).")
    var limit: Int?

    @Option(help: "Size limit profile: \(SizeLimit.profiles.map(\.name).joined(separator: ", ")).")
    var profile: String?

    @Option(help: "What to do with a payload over the limit.")
    var policy: SizePolicyArgument?

    @OptionGroup(title: "Localization")
    var localization: LocalizationOptions

    @Option(help: "Configuration file (JSON); the options above override its payload settings.")
    var config: String?

    func validate() throws {
        if limit != nil && profile != nil { throw ValidationError("give --limit or --profile, not both") }
        if let limit, !(1...65535).contains(limit) { throw ValidationError("--limit must be from 1 to 65535") }
        if let profile, SizeLimit.profile(named: profile) == nil {
            throw ValidationError("unknown profile \"\(profile)\"; known: \(SizeLimit.profiles.map(\.name).joined(separator: ", "))")
        }
    }

    func run() async throws {
        var configuration = try loadConfiguration(config)
        localization.apply(to: &configuration)
        if let limit { configuration.sizeLimit = SizeLimit(bytes: limit) }
        if let profile { configuration.sizeLimit = SizeLimit.profile(named: profile)! }
        if let policy { configuration.sizePolicy = policy.rawValue }

        let preview: PayloadPreview
        do { preview = try PayloadPreview(assembly: HeraldAssembly(configuration: configuration)) } catch { throw SetupError("\(error)") }
        var out = OutputBuffer()
        do {
            try await preview.run(path: input) { result in out.appendLine(result.line) }
        } catch {
            try? out.finish()
            throw SetupError("cannot read input: \(error)")
        }
        try out.finish()
    }
}
