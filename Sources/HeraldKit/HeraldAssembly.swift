import HeraldBinary
import HeraldCore
import HeraldLocalization
import HeraldPayload

/// Builds pipelines from a configuration and a registry.
///
/// The stage order is fixed: ingest (suppression) → localize → payload →
/// size guard → frame → transport; custom stages go after the position they
/// name, in the order given. Code can insert stages too, with ``insert(_:after:)``.
public struct HeraldAssembly: Sendable {
    public var configuration: HeraldConfiguration
    public var registry: HeraldRegistry
    public var tokenStore: any TokenStore
    var extraStages: [(StagePosition, NamedStage)] = []

    public init(configuration: HeraldConfiguration = HeraldConfiguration(), registry: HeraldRegistry = .standard(), tokenStore: any TokenStore = InMemoryTokenStore()) {
        self.configuration = configuration
        self.registry = registry
        self.tokenStore = tokenStore
    }

    /// Inserts a stage of the embedder's own after a built-in position.
    public mutating func insert(_ stage: NamedStage, after position: StagePosition) {
        extraStages.append((position, stage))
    }

    /// The built-in stages in order, each tagged with its position.
    public func builtinStages() throws -> [(StagePosition, NamedStage)] {
        let c = configuration
        let sizeGuard: any PipelineStage
        switch c.sizePolicy {
        case "reject": sizeGuard = SizeGuardStage(RejectingSizeGuard(limit: c.sizeLimit))
        case "truncate": sizeGuard = SizeGuardStage(TruncatingSizeGuard(limit: c.sizeLimit, fields: c.truncateFields))
        default:
            throw ConfigError(file: c.root.file, key: "payload.policy", message: "must be \"reject\" or \"truncate\", got \"\(c.sizePolicy)\"")
        }
        return [
            (.ingest, NamedStage("ingest", SuppressionStage(store: tokenStore))),
            (.localize, NamedStage("localize", LocalizeStage(KeyCheckingLocalizer()))),
            (.payload, NamedStage("payload", BuildPayloadStage(APSPayloadBuilder()))),
            (.sizeGuard, NamedStage("size", sizeGuard)),
            (.frame, NamedStage("frame", FrameStage(BinaryFramer(format: c.frameFormat)))),
        ]
    }

    /// All stages in order: built-ins with custom stages (configured, then inserted by code) after their positions.
    public func stages() throws -> [NamedStage] {
        var custom: [(StagePosition, NamedStage)] = []
        for spec in configuration.customStages {
            custom.append((spec.after, NamedStage(spec.type, try registry.makeStage(spec.type, options: spec.options))))
        }
        custom += extraStages
        var out: [NamedStage] = []
        for (position, stage) in try builtinStages() {
            out.append(stage)
            out += custom.filter { $0.0 == position }.map(\.1)
        }
        return out
    }

    /// The configured transport.
    public func transport() throws -> any Transport {
        try registry.makeTransport(
            configuration.transportType, options: configuration.transportOptions,
            context: TransportContext(payloadLimit: configuration.sizeLimit.bytes))
    }

    /// A pipeline from `source` through the configured stages to the configured transport.
    public func makePipeline(source: any NotificationSource, ledger: OutcomeLedger = OutcomeLedger(), transport: (any Transport)? = nil) throws -> Pipeline {
        let stages = try stages()
        let t = try transport ?? self.transport()
        try configuration.root.finish()
        return Pipeline(source: source, stages: stages, transport: t, ledger: ledger, options: configuration.pipeline)
    }
}
