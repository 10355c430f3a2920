import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldService
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// `herald serve`: the pipeline as a long-running service with an HTTP API.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the pipeline as a service: an HTTP API in, the configured transport out.",
        discussion: """
            Listens on the configuration's serve.host and serve.port (127.0.0.1:8080 by default; port 0 \
            picks a free one) and prints {"host":…,"port":…} on standard output once listening. \
            Bearer tokens come from serve.apiTokensFile or serve.apiTokensEnv. SIGTERM or SIGINT: \
            new requests get 503, what is queued and in flight drains, every outcome is recorded, exit 0; \
            a second signal stops at once and what was not sent ends failed. docs/service.md has the API.

            Example:
              herald serve --config herald.json
            """
    )

    @Option(help: "Configuration file (JSON) with a serve section and the transport.")
    var config: String

    @Option(help: "Port (overrides serve.port; 0 picks a free one).")
    var port: Int?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Log format: text or json.")
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument { case text, json }

    func run() async throws {
        let configuration = try loadConfiguration(config)
        var serve: ServiceConfiguration
        let service: HeraldService
        let writer: OutcomeWriter?
        let format = logFormat, level = logLevel
        var logger = Logger(label: "herald") { label in
            format == .json ? JSONLogHandler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
        logger.logLevel = level
        do {
            serve = try ServiceConfiguration.load(try configuration.root.child("serve"))
            if let port { serve.port = port }
            if let node = configuration.outcomeWebhook { serve.webhook = try WebhookConfiguration.load(node) }
            let assembly = try HeraldAssembly.configured(configuration)
            writer = configuration.outcomesFile != nil
                ? try OutcomeWriter(path: configuration.outcomes) { error in
                    writeToStandardError("herald: cannot write outcomes: \(error)\n")
                } : nil
            service = try HeraldService(configuration: serve, logger: logger, observers: writer.map { [$0] } ?? []) { source, ledger, metrics in
                try assembly.makePipeline(source: source, ledger: ledger, metrics: metrics)
            }
        } catch let e as SetupError {
            throw e
        } catch {
            throw SetupError("\(error)")
        }
        let host = serve.host
        let snapshot = try await service.run { port in
            var ready = JSONLine()
            ready.add("host", host)
            ready.add("port", port)
            ready.print()
            fflush(nil)
        }
        writer?.flush()
        var fields = JSONLine()
        fields.add("entered", snapshot.entered)
        for k in Outcome.Kind.allCases { fields.add(k.rawValue, snapshot.count(k)) }
        fields.add("balanced", snapshot.isBalanced)
        if let webhook = service.webhook {
            let c = webhook.counts
            var w = JSONLine()
            w.add("delivered", c.delivered)
            w.add("undelivered", c.undelivered)
            w.add("overflow", c.overflow)
            fields.add("webhook", w)
        }
        var line = JSONLine()
        line.add("summary", fields)
        // On standard output, after the ready line: what a supervisor (or a test) reads last.
        line.print()
        fflush(nil)
        if !snapshot.isBalanced { throw ExitCode(1) }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// One JSON object per log line on standard error: time, level, label, message, metadata.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var w = JSONWriter(capacity: 160)
        w.raw("{\"time\":")
        w.string(ISO8601DateFormatter().string(from: Date()))
        w.raw(",\"level\":")
        w.string(event.level.rawValue)
        w.raw(",\"label\":")
        w.string(label)
        w.raw(",\"message\":")
        w.string(event.message.description)
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        if !all.isEmpty {
            w.raw(",\"metadata\":{")
            var first = true
            for (k, v) in all.sorted(by: { $0.key < $1.key }) {
                w.separator(&first)
                w.string(k)
                w.raw(":")
                w.string(v.description)
            }
            w.raw("}")
        }
        w.raw("}\n")
        writeToStandardError(String(decoding: w.bytes, as: UTF8.self))
    }
}
