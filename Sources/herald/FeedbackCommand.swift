import ArgumentParser
import HeraldCore
import HeraldGateway
import HeraldJSON
import HeraldKit
import HeraldOpenSSL
import HeraldTesting

struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Fetch the feedback service's list of dead tokens into the token store.",
        discussion: """
            Connects to the feedback service of the configured gateway transport (same certificate \
            and trust), prints one JSON line per tuple ({"token":…,"timestamp":…}), and records each \
            in the token store (`tokens.path`), so later sends to those tokens end as suppressed \
            unless the app registered again after the timestamp.

            Examples:
              herald feedback --config herald.json
              herald feedback --config herald.json --host 127.0.0.1 --port 40124
            """
    )

    @Option(help: "Configuration file (JSON) with a gateway transport.")
    var config: String

    @Option(help: "Feedback host (overrides the configuration).")
    var host: String?

    @Option(help: "Feedback port (overrides the configuration).")
    var port: Int?

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let client: FeedbackClient
        let assembly: HeraldAssembly
        do {
            client = try FeedbackSetup.client(configuration, host: host, port: port)
            assembly = try HeraldAssembly.configured(configuration)
        } catch {
            throw SetupError("\(error)")
        }
        var entries: [FeedbackEntry]
        var skipped: [String] = []
        var incomplete: FeedbackIncomplete?
        do {
            let fetched = try await client.fetch()
            entries = fetched.entries
            skipped = fetched.skipped
        } catch let e as FeedbackIncomplete {
            // The service has forgotten what it sent: keep the good tuples, then say what went wrong.
            entries = e.entries
            incomplete = e
        } catch {
            throw SetupError("feedback service \(client.host):\(client.port): \(error)")
        }
        var out: [UInt8] = []
        for e in entries {
            assembly.tokenStore.unregistered(e.token, at: e.timestamp)
            var w = JSONWriter(capacity: 100)
            w.raw("{\"token\":")
            w.string(e.token.hex)
            w.raw(",\"timestamp\":")
            w.int(Int(e.timestamp))
            w.raw("}\n")
            out += w.bytes
        }
        try writeAll(1, &out, to: "standard output")
        var fields = JSONLine()
        fields.add("tuples", entries.count)
        if !skipped.isEmpty { fields.add("skipped", skipped.count) }
        fields.add("token_store", configuration.tokenStorePath ?? "memory (not kept)")
        if let incomplete { fields.add("problem", incomplete.reason) }
        var line = JSONLine()
        line.add("feedback", fields)
        writeToStandardError(line.line)
        if let incomplete { throw SetupError("\(incomplete)") }
    }
}
