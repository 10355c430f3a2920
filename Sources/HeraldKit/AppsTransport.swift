import HeraldCore

/// Several apps behind one pipeline: each app has its own transport (its
/// endpoint, credentials and connections), and every request goes to the app
/// it names (`app`) or, naming none, to the app whose topics hold its topic
/// (compared without a push type's suffix, so `com.example.chat.voip` is
/// `com.example.chat`'s). A request for no configured app ends `dropped`
/// (`unknown-app`, naming what it asked for); a request with neither `app`
/// nor `topic` goes to the only app, or is dropped when there are several.
/// A request routed by `app` alone gets its app's first topic.
///
/// Routed requests carry their app's name (``NotificationRequest/app``), so
/// every outcome line and the per-app metrics name it. One app's trouble stays
/// its own: a refused credential fails that app's requests with the reason
/// (its transport's rule) while the others go on; a transport that throws on
/// a batch fails that app's part of it. Backpressure is shared: an app whose
/// transport holds its `maxQueued` makes the batch wait, as a single
/// transport would.
///
/// Built by the configuration's `apps` section (``HeraldAssembly/transport()``),
/// or in code from any transports.
public final class AppsTransport: Transport, TransportHealthReporting, TransportReporting, WireDescribing, LaneWindowing {
    /// One app: its name (a label in outcomes and metrics), the bundle identifiers it sends for,
    /// and its transport.
    public struct App: Sendable {
        public var name: String
        public var topics: [String]
        public var transport: any Transport
        public init(name: String, topics: [String], transport: any Transport) {
            self.name = name
            self.topics = topics
            self.transport = transport
        }
    }

    public let apps: [App]
    public let wire: TransportWire
    let byName: [String: Int]
    let byTopic: [String: Int]
    /// The apps' names, for reasons.
    let configured: String

    /// Fails when two apps share a name or a topic, or an app's name is not a label (see ``RequestDecoder``).
    public init(apps: [App], wire: TransportWire = .http2) throws(AppsError) {
        guard !apps.isEmpty else { throw AppsError("at least one app is needed") }
        var byName: [String: Int] = [:]
        var byTopic: [String: Int] = [:]
        for (i, app) in apps.enumerated() {
            guard RequestDecoder.isAppName(app.name) else {
                throw AppsError("\"\(app.name)\" is not an app name: \(RequestDecoder.appNameRule)")
            }
            if byName.updateValue(i, forKey: app.name) != nil { throw AppsError("two apps are named \"\(app.name)\"") }
            for topic in app.topics {
                if let other = byTopic.updateValue(i, forKey: topic) {
                    throw AppsError("topic \"\(topic)\" belongs to both \"\(apps[other].name)\" and \"\(app.name)\"")
                }
            }
        }
        self.apps = apps
        self.wire = wire
        self.byName = byName
        self.byTopic = byTopic
        configured = apps.map(\.name).joined(separator: ", ")
    }

    /// The app `request` goes to, or why none.
    public func route(_ request: NotificationRequest) -> Result<Int, AppsError> {
        if let name = request.app {
            guard let i = byName[name] else {
                return .failure(AppsError("no app is named \"\(name)\" (configured: \(configured))"))
            }
            return .success(i)
        }
        if let topic = request.topic {
            if let i = byTopic[topic] ?? byTopic[PushType.bundleID(ofTopic: topic)] { return .success(i) }
            return .failure(AppsError("no app has topic \"\(topic)\" (configured: \(configured))"))
        }
        if apps.count == 1 { return .success(0) }
        return .failure(AppsError("the request names neither an app nor a topic, and there are \(apps.count) apps"))
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var parts = [[Envelope]](repeating: [], count: apps.count)
        var dropped: [OutcomeRecord] = []
        for i in batch.indices {
            switch route(batch[i].request) {
            case .success(let app):
                var e = batch[i]
                if e.request.app == nil { e.request.app = apps[app].name }
                if e.request.topic == nil { e.request.topic = apps[app].topics.first }
                parts[app].append(e)
            case .failure(let why):
                dropped.append(batch[i].record(.dropped(OutcomeReason(.unknownApp, why.message))))
            }
        }
        if !dropped.isEmpty { outcomes.record(dropped) }
        await withTaskGroup(of: Void.self) { group in
            for (i, part) in parts.enumerated() where !part.isEmpty {
                let app = apps[i]
                group.addTask {
                    do {
                        try await app.transport.send(part, outcomes: outcomes)
                    } catch {
                        // As the pipeline does for a lone transport: none of this part was sent.
                        outcomes.record(part, as: .failed(OutcomeReason(.internalFailure, "app \(app.name): transport: \(error)")))
                    }
                }
            }
        }
    }

    public func finish(outcomes: OutcomeLedger) async {
        await withTaskGroup(of: Void.self) { group in
            for app in apps { group.addTask { await app.transport.finish(outcomes: outcomes) } }
        }
    }

    public func shutdownRequested() {
        for app in apps { app.transport.shutdownRequested() }
    }

    public func abandon(_ reason: String) {
        for app in apps { app.transport.abandon(reason) }
    }

    /// Each app's health, in order (transports that do not report are ready).
    public var appHealth: [(app: String, health: TransportHealth)] {
        apps.map { ($0.name, ($0.transport as? any TransportHealthReporting)?.health ?? .ready) }
    }

    /// Ready while any app can deliver (one app's refused credential must not take the service
    /// out of rotation for the others); unavailable, naming each app's reason, once none can.
    /// The apps' windows together (an app whose transport has none counts as none: 0).
    public var bulkWindow: Int { apps.reduce(0) { $0 + (($1.transport as? any LaneWindowing)?.bulkWindow ?? 0) } }

    public var health: TransportHealth {
        var reasons: [String] = []
        for (name, h) in appHealth {
            guard case .unavailable(let why) = h else { return .ready }
            reasons.append("app \(name): \(why)")
        }
        return .unavailable(reasons.joined(separator: "; "))
    }

    /// Every app's counters summed by name, in the order first seen.
    public var counters: [(name: String, value: Int)] {
        get async {
            var out: [(name: String, value: Int)] = []
            var at: [String: Int] = [:]
            for app in apps {
                guard let r = app.transport as? any TransportReporting else { continue }
                for (name, value) in await r.counters {
                    if let i = at[name] { out[i].value += value } else {
                        at[name] = out.count
                        out.append((name, value))
                    }
                }
            }
            return out
        }
    }
}

/// Why apps could not be set up, or why a request has no app.
public struct AppsError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
