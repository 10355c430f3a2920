import CoreMetrics
import Foundation
import HeraldBinary
import HeraldCore
import HeraldHTTP2
import HeraldLocalization
import HeraldPayload
import HeraldStore
import Logging

/// Builds pipelines from a configuration and a registry.
///
/// The stage order is fixed: ingest (suppression) → localize → payload →
/// size guard → frame → transport; custom stages go after the position they
/// name, in the order given. Code can insert stages too, with ``insert(_:after:)``.
public struct HeraldAssembly: Sendable {
    public var configuration: HeraldConfiguration
    public var registry: HeraldRegistry
    public var tokenStore: any TokenStore
    /// Where the pipeline's components log.
    public var logger: Logger
    var extraStages: [(StagePosition, NamedStage)] = []

    /// `logger`: where the transport, the token store and the TLS layer log
    /// (swift-log; each component adds its own metadata).
    public init(
        configuration: HeraldConfiguration = HeraldConfiguration(), registry: HeraldRegistry = .standard(),
        tokenStore: any TokenStore = InMemoryTokenStore(), logger: Logger = Logger(label: "herald")
    ) {
        self.logger = logger
        self.configuration = configuration
        self.registry = registry
        self.tokenStore = tokenStore
    }

    /// An assembly whose token store is `tokenStore` when given, else the one
    /// the configuration names (`tokens.path`: an SQLite ``SQLiteTokenStore``),
    /// or in memory. `tokens.type: postgres` needs the store given (`herald work` opens it on the queue's database).
    public static func configured(
        _ configuration: HeraldConfiguration, registry: HeraldRegistry = .standard(), logger: Logger = Logger(label: "herald"),
        tokenStore: (any TokenStore)? = nil
    ) throws(ConfigError) -> HeraldAssembly {
        var store: any TokenStore = InMemoryTokenStore()
        if let tokenStore {
            store = tokenStore
        } else if configuration.tokenStoreType == "postgres" {
            throw ConfigError(
                file: configuration.root.file, key: "tokens.type",
                message: "\"postgres\" is the queue's database: only herald work (with a queue section) opens it")
        } else if let path = configuration.tokenStorePath {
            do { store = try SQLiteTokenStore(path: path, logger: logger) } catch {
                throw ConfigError(file: configuration.root.file, key: "tokens.path", message: error.description)
            }
        }
        return HeraldAssembly(configuration: configuration, registry: registry, tokenStore: store, logger: logger)
    }

    /// Inserts a stage of the embedder's own after a built-in position.
    public mutating func insert(_ stage: NamedStage, after position: StagePosition) {
        extraStages.append((position, stage))
    }

    /// The wire the configured transport speaks (its registry entry's; with `apps`, HTTP/2).
    public var configuredWire: TransportWire {
        configuration.apps.isEmpty ? registry.wire(ofTransport: configuration.transportType) : .http2
    }

    /// The payload limit in force: the configuration's, else the wire's (the
    /// HTTP/2 API takes larger payloads).
    public func sizeLimit(for wire: TransportWire) -> SizeLimit {
        configuration.sizeLimit ?? (wire == .http2 ? .http2 : .binary)
    }

    /// The built-in stages in order, each tagged with its position, for a
    /// transport speaking `wire` (by default the configured transport's).
    public func builtinStages(wire: TransportWire? = nil) throws -> [(StagePosition, NamedStage)] {
        let c = configuration
        let wire = wire ?? configuredWire
        let limit = sizeLimit(for: wire)
        let sizeGuard: any PipelineStage
        switch c.sizePolicy {
        case "reject": sizeGuard = SizeGuardStage(RejectingSizeGuard(limit: limit))
        case "truncate": sizeGuard = SizeGuardStage(TruncatingSizeGuard(limit: limit, fields: c.truncateFields))
        default:
            throw ConfigError(file: c.root.file, key: "payload.policy", message: "must be \"reject\" or \"truncate\", got \"\(c.sizePolicy)\"")
        }
        // Localization and the payload's building make a traced notification's stage spans;
        // the in-memory checks and framing do not (``NamedStage/traced``).
        return [
            (.ingest, NamedStage("ingest", SuppressionStage(store: tokenStore), traced: false)),
            (.localize, NamedStage("localize", try localizeStage())),
            (.payload, NamedStage("payload", BuildPayloadStage(APSPayloadBuilder()))),
            (.sizeGuard, NamedStage("size", sizeGuard, traced: false)),
            (.frame, NamedStage("frame", wire == .http2 ? HTTP2FramePosition() as any PipelineStage : FrameStage(BinaryFramer(format: c.frameFormat)), traced: false)),
        ]
    }

    /// The localize stage: a ``CatalogLocalizer`` over the configured catalogs,
    /// loaded and compiled here, once; without catalogs, the ``KeyCheckingLocalizer``
    /// (client-side only).
    public func localizeStage() throws -> any PipelineStage {
        let c = configuration
        guard let path = c.catalogs else {
            if c.localization == .server {
                throw ConfigError(
                    file: c.root.file, key: "localize.mode",
                    message: "server-side localization needs catalogs (localize.catalogs or --catalogs)")
            }
            return LocalizeStage(KeyCheckingLocalizer())
        }
        let catalog = try StringCatalog.load(path: path)
        do {
            return LocalizeStage(
                try CatalogLocalizer(
                    catalog: catalog, table: c.localizationTable, defaultLanguage: c.defaultLanguage,
                    fallback: c.localizationFallback, mode: c.localization))
        } catch {
            throw ConfigError(file: c.root.file, key: "localize", message: "\(path): \(error.message)")
        }
    }

    /// All stages in order: built-ins with custom stages (configured, then inserted by code) after their positions.
    public func stages(wire: TransportWire? = nil) throws -> [NamedStage] {
        var custom: [(StagePosition, NamedStage)] = []
        for spec in configuration.customStages {
            custom.append((spec.after, NamedStage(spec.type, try registry.makeStage(spec.type, options: spec.options))))
        }
        custom += extraStages
        var out: [NamedStage] = []
        for (position, stage) in try builtinStages(wire: wire) {
            out.append(stage)
            out += custom.filter { $0.0 == position }.map(\.1)
        }
        return out
    }

    /// The configured transport: the `transport` section's, or with `apps` an ``AppsTransport``
    /// over one transport an app (each an HTTP/2 one; the apps of a team share its provider token).
    public func transport() throws -> any Transport {
        var context = TransportContext(
            payloadLimit: sizeLimit(for: configuredWire).bytes, logger: logger, threads: configuration.pipeline.effectiveThreads)
        guard !configuration.apps.isEmpty else {
            return try Self.paced(
                try registry.makeTransport(configuration.transportType, options: configuration.transportOptions, context: context),
                options: configuration.transportOptions)
        }
        context.providerTokens = ProviderTokenPool()
        var apps: [AppsTransport.App] = []
        for spec in configuration.apps {
            guard registry.wire(ofTransport: spec.transportType) == .http2 else {
                throw spec.transportOptions.error(
                    "type", "an app's transport speaks HTTP/2 (\"http2\" or \"http2-simulator\"), not \"\(spec.transportType)\"")
            }
            context.logger = logger
            context.logger[metadataKey: "app"] = "\(spec.name)"
            apps.append(AppsTransport.App(
                name: spec.name, topics: spec.topics,
                transport: try Self.paced(
                    try registry.makeTransport(spec.transportType, options: spec.transportOptions, context: context), options: spec.transportOptions)))
        }
        do { return try AppsTransport(apps: apps) } catch {
            throw ConfigError(file: configuration.root.file, key: "apps", message: error.message)
        }
    }

    /// `transport` behind a ``PacedTransport`` when its section has `pacing` (docs/apps.md,
    /// "Pacing"): `perSecond` (the transport's, so the app's, rate) with `burst`,
    /// `perTokenSeconds` (the least time between two notifications to one device token) with
    /// `collapse`, and `maxHeld`.
    static func paced(_ transport: any Transport, options: ConfigNode) throws -> any Transport {
        guard options.has("pacing") else { return transport }
        let p = try options.child("pacing")
        let perSecond = try p.double("perSecond")
        if let r = perSecond, !(r > 0 && r <= 10_000_000) { throw p.error("perSecond", "must be more than 0 and at most 10,000,000, got \(r)") }
        let perToken = try p.double("perTokenSeconds")
        if let s = perToken, !(s > 0 && s <= 86_400) { throw p.error("perTokenSeconds", "must be more than 0 and at most 86,400 (a day), got \(s)") }
        guard perSecond != nil || perToken != nil else {
            throw p.error("perSecond", "give perSecond (the rate for this transport), perTokenSeconds (the least time between two notifications to one device), or both")
        }
        let collapse = try p.bool("collapse") ?? false
        if collapse && perToken == nil { throw p.error("collapse", "collapses what waits for a device token's pace: give perTokenSeconds too") }
        let rules = Pacer.Rules(
            perSecond: perSecond, burst: try p.int("burst", in: 1...10_000_000), perToken: perToken.map { .seconds($0) }, collapse: collapse)
        return PacedTransport(transport, rules: rules, maxHeld: try p.int("maxHeld", in: 1...100_000_000) ?? 100_000)
    }

    /// A pipeline from `source` through the configured stages to the configured transport.
    /// `metrics`: where the pipeline's per-stage metrics and latencies go (none by default).
    public func makePipeline(
        source: any NotificationSource, ledger: OutcomeLedger = OutcomeLedger(), transport: (any Transport)? = nil,
        metrics: (any MetricsFactory)? = nil
    ) throws -> Pipeline {
        // A transport given in code says its wire (`WireDescribing`); a configured one has its registry entry's.
        let wire = transport.map { ($0 as? any WireDescribing)?.wire ?? .binary } ?? configuredWire
        let stages = try stages(wire: wire)
        let t = try transport ?? self.transport()
        try configuration.root.finish()
        // The feedback loop: a token APNs calls invalid is suppressed from then on.
        ledger.addObserver(TokenStoreFeedbackObserver(store: tokenStore, clock: { UInt32(clamping: Int(Date().timeIntervalSince1970)) }))
        return Pipeline(source: source, stages: stages, transport: t, ledger: ledger, options: configuration.pipeline, metrics: metrics)
    }
}
