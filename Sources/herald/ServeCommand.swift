import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldPostgres
import HeraldService
import Logging
import ServiceLifecycle
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

    @OptionGroup(title: "Logs")
    var logs: LogOptions

    func run() async throws {
        await SignalledServiceGroup.trapSignalsEarly()
        let configuration = try loadConfiguration(config)
        var serve: ServiceConfiguration
        let service: HeraldService
        let writer: OutcomeWriter?
        let logger = logs.logger()
        // Traces (OTEL_TRACES_EXPORTER): the exporter runs in the service's group, first (it stops last).
        let tracing = try TracingSetup.fromEnvironment(logger: logger)
        // With a queue section: requests become rows of the PostgreSQL queue, and this service is one of its workers.
        let queue = configuration.root.has("queue") ? try await openQueue(config, configuration: configuration, logger: logs.logger(label: "herald.postgres")) : nil
        var tokens: PostgresTokenStore?
        if configuration.tokenStoreType == "postgres" {
            guard let queue else { throw SetupError("\(config): tokens.type \"postgres\" is the queue's database: add a queue section") }
            do { tokens = try await PostgresTokenStore(queue: queue).start() } catch {
                await queue.close()
                throw SetupError("\(error)")
            }
        }
        do {
            serve = try ServiceConfiguration.load(try configuration.root.child("serve"))
            serve.apps = configuration.apps.map(\.name)
            if let port { serve.port = port }
            serve.tracing = tracing != nil
            serve.spanExporter = tracing?.spanExporter
            if let node = configuration.outcomeWebhook { serve.webhook = try WebhookConfiguration.load(node) }
            Self.warnAboutExposure(serve)
            let assembly = try HeraldAssembly.configured(configuration, logger: logger, tokenStore: tokens)
            // With the queue, accepted requests become its rows and this service's pipeline is one of its workers.
            if !serve.worker && queue == nil {
                throw SetupError("\(config): serve.worker false leaves the requests to other workers: that needs a queue section")
            }
            let intake = queue.map { [serve] queue in
                PostgresIntake(queue: queue, capacity: serve.queueCapacity, idempotencyWindow: serve.idempotencyWindow, worker: serve.worker) { [logger] problem in
                    logger.error("\(problem)")
                }
            }
            // Outcome lines name a queue's rows as its source does ("row"); in memory, "line".
            writer = configuration.outcomesFile != nil
                ? try OutcomeWriter(path: configuration.outcomes, lineKey: intake?.source.lineKey ?? "line") { error in
                    writeToStandardError("herald: cannot write outcomes: \(error)\n")
                } : nil
            service = try HeraldService(configuration: serve, logger: logger, observers: writer.map { [$0] } ?? [], intake: intake) { source, ledger, metrics in
                try assembly.makePipeline(source: source, ledger: ledger, metrics: metrics)
            }
        } catch {
            if let tokens { await tokens.close() }
            await queue?.close()
            throw error as? SetupError ?? SetupError("\(error)")
        }
        let host = serve.host
        let snapshot: LedgerSnapshot
        // The queue and the token store run in the service's group: they stop after the pipeline and
        // the HTTP server (what the store still holds is written, then the pool closes), also on an error.
        let lifecycles: [any Service] = (tracing?.services ?? []) + (queue.map { [$0] } ?? []) + (tokens.map { [$0] } ?? [])
        snapshot = try await service.run(services: lifecycles) { port in
            var ready = JSONLine()
            ready.add("host", host)
            ready.add("port", port)
            ready.print()
            fflush(nil)
        }
        writer?.flush()
        let tokenChangesLeft = tokens?.changesNotWritten ?? 0
        var fields = JSONLine()
        fields.add("entered", snapshot.entered)
        for k in Outcome.Kind.allCases { fields.add(k.rawValue, snapshot.count(k)) }
        fields.add("balanced", snapshot.isBalanced)
        if tokens != nil { fields.add("token_changes_not_written", tokenChangesLeft) }
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

    /// Warnings at start for what carries secrets in clear: the API listening beyond loopback
    /// (Herald serves plain HTTP: TLS belongs to a proxy in front), and a webhook at an http:// URL.
    static func warnAboutExposure(_ serve: ServiceConfiguration) {
        if !isLoopback(serve.host) {
            warnAtStart(
                "serve.host is \(serve.host): the API (its bearer tokens, the device tokens in requests and outcomes) is served in plain HTTP "
                    + "beyond this machine; put TLS in front of it (a proxy) or listen on 127.0.0.1")
        }
        if let webhook = serve.webhook, let url = URL(string: webhook.url), url.scheme?.lowercased() == "http", !isLoopback(url.host ?? "") {
            warnAtStart("outcomes.webhook.url is plain http:// to \(url.host ?? "?"): its bearer token and full device tokens travel in clear; use https://")
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return h == "localhost" || h == "::1" || h.hasPrefix("127.")
    }
}
