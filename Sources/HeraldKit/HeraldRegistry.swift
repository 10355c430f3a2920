import HeraldCore
import HeraldGateway
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldRecorder
import HeraldSimulator
import Logging
import Synchronization

/// Where a custom stage goes: after one of the built-in stages.
public struct StagePosition: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    init(_ name: String) { self.name = name }
    public static let ingest = StagePosition("ingest")
    public static let localize = StagePosition("localize")
    public static let payload = StagePosition("payload")
    public static let sizeGuard = StagePosition("size")
    public static let frame = StagePosition("frame")
    /// The built-in positions, in pipeline order.
    public static let all: [StagePosition] = [.ingest, .localize, .payload, .sizeGuard, .frame]
    public static func named(_ n: String) -> StagePosition? { all.first { $0.name == n } }
    public var description: String { name }
}

/// Maps names to factories, so a configuration file can select stages and
/// transports by name. Embedders register their own alongside the built-ins.
///
/// ```swift
/// let registry = HeraldRegistry.standard()
/// registry.registerStage("drop-topic") { options in
///     DropTopic(topic: try options.string("topic") ?? "")
/// }
/// ```
public final class HeraldRegistry: Sendable {
    public typealias StageFactory = @Sendable (ConfigNode) throws -> any PipelineStage
    public typealias TransportFactory = @Sendable (ConfigNode, TransportContext) throws -> any Transport

    let stageFactories = Mutex<[String: StageFactory]>([:])
    let transportFactories = Mutex<[String: (wire: TransportWire, make: TransportFactory)]>([:])

    public init() {}

    /// A registry with Herald's built-in stages and transports.
    public static func standard() -> HeraldRegistry {
        let r = HeraldRegistry()
        BuiltinStages.register(in: r)
        r.registerTransport("simulator") { node, context in
            try SimulatorTransportFactory.make(node, payloadLimit: context.payloadLimit, threads: context.threads)
        }
        r.registerTransport("http2-simulator", wire: .http2) { node, context in
            try HTTP2SimulatorTransportFactory.make(node, context: context)
        }
        r.registerTransport("http2", wire: .http2) { node, context in
            try HTTP2Transport.make(node, context: context)
        }
        r.registerTransport("gateway") { node, context in
            try GatewayTransport.make(node, logger: context.logger)
        }
        r.registerTransport("recorder") { node, context in
            guard let path = try node.path("path") else { throw node.error("path", "required: the directory the log's segments go to") }
            var options = RecorderOptions()
            options.includeFrames = try node.bool("frames") ?? true
            if let mib = try node.int("segmentMiB", in: 1...65536) { options.maxSegmentBytes = mib << 20 }
            if let s = try node.int("segmentSeconds", in: 1...(30 * 86_400)) { options.maxSegmentAge = .seconds(s) }
            if let level = try node.int("level", in: 1...9) { options.level = Int32(level) }
            do {
                return try RecorderTransport(directory: path, options: options, logger: context.logger)
            } catch {
                throw node.error("path", "\(error)")
            }
        }
        return r
    }

    public func registerStage(_ name: String, factory: @escaping StageFactory) {
        stageFactories.withLock { $0[name] = factory }
    }

    /// Registers a transport by name; `wire` is what it sends (binary frames,
    /// or HTTP/2 requests it builds itself), which picks the frame stage and
    /// the default payload limit.
    public func registerTransport(_ name: String, wire: TransportWire = .binary, factory: @escaping TransportFactory) {
        transportFactories.withLock { $0[name] = (wire, factory) }
    }

    /// The wire of the transport registered as `name` (binary when unknown: its factory's error names it).
    public func wire(ofTransport name: String) -> TransportWire {
        transportFactories.withLock { $0[name]?.wire } ?? .binary
    }

    public var stageNames: [String] { stageFactories.withLock { $0.keys.sorted() } }
    public var transportNames: [String] { transportFactories.withLock { $0.keys.sorted() } }

    func makeStage(_ name: String, options: ConfigNode) throws -> any PipelineStage {
        guard let f = stageFactories.withLock({ $0[name] }) else {
            throw options.error("type", "unknown stage \"\(name)\"; known: \(stageNames.joined(separator: ", "))")
        }
        return try f(options)
    }

    func makeTransport(_ name: String, options: ConfigNode, context: TransportContext) throws -> any Transport {
        guard let f = transportFactories.withLock({ $0[name]?.make }) else {
            throw options.error("type", "unknown transport \"\(name)\"; known: \(transportNames.joined(separator: ", "))")
        }
        return try f(options, context)
    }
}

/// What a transport factory may need to know about the rest of the pipeline.
public struct TransportContext: Sendable {
    /// The payload limit in force.
    public var payloadLimit: Int
    /// Where the transport logs.
    public var logger: Logger
    /// The cores the pipeline spreads its work over (``PipelineOptions/effectiveThreads``).
    public var threads: Int
    /// Provider tokens shared by every transport signing with the same key (`apps`: one JWT per
    /// team); `nil`: the transport signs its own.
    public var providerTokens: ProviderTokenPool?
    public init(payloadLimit: Int, logger: Logger = Logger(label: "herald"), threads: Int = 1) {
        self.payloadLimit = payloadLimit
        self.logger = logger
        self.threads = threads
    }
}
