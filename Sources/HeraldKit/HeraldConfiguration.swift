import HeraldBinary
import HeraldCore
import HeraldLocalization
import HeraldPayload

/// Herald's configuration: which source, stages, policies and transport a
/// pipeline is made of. Every field has a default, so no file is needed for
/// the embedded default (JSON Lines in, the in-memory simulator out).
///
/// The file is JSON; see `docs/configuration.md` for every key.
public struct HeraldConfiguration: Sendable {
    public var pipeline = PipelineOptions()
    /// The payload size limit (`payload.profile` or `payload.limit`).
    /// The payload limit; `nil`: the transport's wire's (`binary` 2048, `http2` 4096, 5120 for VoIP).
    public var sizeLimit: SizeLimit?
    /// `reject` or `truncate`.
    public var sizePolicy = "reject"
    /// The alert text fields the `truncate` policy shortens, in order (`payload.truncateFields`).
    public var truncateFields: [TruncatableField] = [.body]
    /// `client` or `server` (`localize.mode`): the mode for requests that don't choose one.
    public var localization: LocalizationMode = .client
    /// The catalog directory, or one `.xcstrings` file (`localize.catalogs`; relative to the
    /// configuration file's folder). `nil`: no catalogs, client-side keys are only checked for form.
    public var catalogs: String?
    /// Languages tried, in order, after the request's own (`localize.fallback`).
    public var localizationFallback: [String] = []
    /// The last language tried, and the one client-side checks use (`localize.defaultLanguage`).
    public var defaultLanguage = "en"
    /// The table `loc-key`s are looked up in (`localize.table`).
    public var localizationTable = "Localizable"
    /// The binary format the frame stage writes.
    public var frameFormat: NotificationFormat = .frame
    /// The transport's registry name and its options.
    public var transportType = "simulator"
    public var transportOptions: ConfigNode = .empty()
    /// Several apps, each with its own transport (the `apps` section, instead of `transport`):
    /// requests go to their app by `app` or by topic (``AppsTransport``).
    public var apps: [AppSpec] = []
    /// Custom stages: registry name, position and options.
    public var customStages: [CustomStageSpec] = []
    /// Where outcomes go (`-` for standard output).
    public var outcomes = "-"
    /// The outcomes file the configuration names (`outcomes` or `outcomes.path`), if it names one.
    public var outcomesFile: String?
    /// `outcomes.webhook`, for `herald serve` to read (``ConfigNode``).
    public var outcomeWebhook: ConfigNode?
    /// The token store (`tokens.path`, an SQLite database); `nil` keeps dead tokens in memory for the run only.
    public var tokenStorePath: String?
    /// `tokens.type`: `memory` (the default without a path), `sqlite` (with `tokens.path`), or
    /// `postgres` (the queue's database, shared by every worker: `herald work` opens it).
    public var tokenStoreType = "memory"
    /// The parsed file, kept to report keys nothing read (checked when the pipeline is made).
    public var root: ConfigNode = .empty()

    /// One entry of `apps`: `{"name": "chat", "topics": ["com.example.chat"], "transport": {…}}`.
    public struct AppSpec: Sendable {
        public var name: String
        public var topics: [String]
        public var transportType: String
        public var transportOptions: ConfigNode
    }

    public struct CustomStageSpec: Sendable {
        public var type: String
        public var after: StagePosition
        public var options: ConfigNode
    }

    public init() {}

    /// Reads a configuration file; unknown keys and bad values are errors naming the key and the file.
    public static func load(path: String) throws(ConfigError) -> HeraldConfiguration {
        try parse(ConfigNode.load(path: path))
    }

    /// Reads a configuration from a parsed node.
    public static func parse(_ root: ConfigNode) throws(ConfigError) -> HeraldConfiguration {
        var c = HeraldConfiguration()
        c.root = root
        let pipeline = try root.child("pipeline")
        c.pipeline.batchSize = try pipeline.int("batchSize", in: 1...65536) ?? c.pipeline.batchSize
        c.pipeline.bufferedBatches = try pipeline.int("bufferedBatches", in: 1...1024) ?? c.pipeline.bufferedBatches
        c.pipeline.threads = try pipeline.int("threads", in: 0...1024) ?? c.pipeline.threads

        let payload = try root.child("payload")
        if let profile = try payload.string("profile") {
            guard let p = SizeLimit.profile(named: profile) else {
                throw payload.error("profile", "unknown profile \"\(profile)\"; known: \(SizeLimit.profiles.map(\.name).joined(separator: ", "))")
            }
            c.sizeLimit = p
        }
        if let limit = try payload.int("limit", in: 1...65535) { c.sizeLimit = SizeLimit(bytes: limit) }
        c.sizePolicy = try payload.string("policy", oneOf: ["reject", "truncate"]) ?? c.sizePolicy
        if let names = try payload.strings("truncateFields") {
            var fields: [TruncatableField] = []
            for name in names {
                guard let f = TruncatableField.named(name) else {
                    throw payload.error("truncateFields", "unknown field \"\(name)\"; known: \(TruncatableField.all.map(\.name).joined(separator: ", "))")
                }
                guard !fields.contains(f) else { throw payload.error("truncateFields", "\"\(name)\" is listed twice") }
                fields.append(f)
            }
            guard !fields.isEmpty else { throw payload.error("truncateFields", "must name at least one field") }
            c.truncateFields = fields
        }

        let localize = try root.child("localize")
        if let mode = try localize.string("mode", oneOf: ["client", "server"]) { c.localization = LocalizationMode(rawValue: mode) }
        if let dir = try localize.path("catalogs") { c.catalogs = dir }
        if let fallback = try localize.strings("fallback") {
            for tag in fallback where LanguageTag(parsing: tag) == nil {
                throw localize.error("fallback", "\"\(tag)\" is not a language tag")
            }
            c.localizationFallback = fallback
        }
        if let language = try localize.string("defaultLanguage") {
            guard LanguageTag(parsing: language) != nil else { throw localize.error("defaultLanguage", "\"\(language)\" is not a language tag") }
            c.defaultLanguage = language
        }
        if let table = try localize.string("table") {
            guard !table.isEmpty else { throw localize.error("table", "must not be empty") }
            c.localizationTable = table
        }

        let frame = try root.child("frame")
        if let f = try frame.string("format", oneOf: NotificationFormat.all.map(\.name)) { c.frameFormat = NotificationFormat.named(f)! }

        let transport = try root.child("transport")
        c.transportType = try transport.string("type") ?? c.transportType
        c.transportOptions = transport
        if root.has("apps") {
            guard !root.has("transport") else {
                throw root.error("apps", "give \"transport\" (one app) or \"apps\" (each with its own transport), not both")
            }
            for node in try root.children("apps") {
                guard let name = try node.string("name") else { throw node.error("name", "required: the app's name (a label in outcomes and metrics)") }
                guard RequestDecoder.isAppName(name) else { throw node.error("name", "\"\(name)\" is not an app name: \(RequestDecoder.appNameRule)") }
                guard let topics = try node.strings("topics"), !topics.isEmpty else {
                    throw node.error("topics", "required: the bundle identifiers the app sends for (requests are routed by topic)")
                }
                guard node.has("transport") else { throw node.error("transport", "required: the app's transport, as a \"transport\" section") }
                let t = try node.child("transport")
                c.apps.append(AppSpec(name: name, topics: topics, transportType: try t.string("type") ?? "http2", transportOptions: t))
            }
            guard !c.apps.isEmpty else { throw root.error("apps", "must list at least one app") }
        }

        for node in try root.children("stages") {
            guard let type = try node.string("type") else { throw node.error("type", "required: the stage's registered name") }
            let afterName = try node.string("after") ?? "frame"
            guard let after = StagePosition.named(afterName) else {
                throw node.error("after", "must be one of \(StagePosition.all.map(\.name).joined(separator: ", ")), got \"\(afterName)\"")
            }
            c.customStages.append(CustomStageSpec(type: type, after: after, options: node))
        }
        if case .object? = root.value("outcomes") {
            // {"path": "…", "webhook": {…}}: the webhook is herald serve's (it reads the node).
            let node = try root.child("outcomes")
            c.outcomesFile = try node.path("path")
            if node.has("webhook") { c.outcomeWebhook = try node.child("webhook") }
        } else {
            c.outcomesFile = try root.path("outcomes")
        }
        c.outcomes = c.outcomesFile ?? c.outcomes
        let tokens = try root.child("tokens")
        c.tokenStorePath = try tokens.path("path")
        c.tokenStoreType = try tokens.string("type", oneOf: ["memory", "sqlite", "postgres"]) ?? (c.tokenStorePath == nil ? "memory" : "sqlite")
        if c.tokenStoreType == "sqlite" && c.tokenStorePath == nil { throw tokens.error("path", "required with type \"sqlite\": the store's file") }
        if c.tokenStoreType != "sqlite" && c.tokenStorePath != nil { throw tokens.error("path", "only for type \"sqlite\"") }
        return c
    }
}
