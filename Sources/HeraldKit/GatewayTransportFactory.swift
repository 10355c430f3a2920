import HeraldBinary
import HeraldCore
import HeraldGateway
import HeraldOpenSSL
import Logging

/// Builds the `gateway` transport (the binary interface over TLS) from its configuration node:
///
/// ```json
/// "transport": {
///   "type": "gateway",
///   "environment": "sandbox",
///   "certificate": "apns-cert.pem", "key": "apns-key.pem", "passphraseFile": "apns-key.pass",
///   "connections": 4
/// }
/// ```
///
/// Keys:
/// - `environment`: `production` or `sandbox`; or `host` and `port` (both
///   required without `environment`), and `serverName` when the certificate
///   names another host than `host`.
/// - Identity: `certificate` and `key` (PEM; the key may be encrypted), or
///   `p12` (PKCS#12). The passphrase or password comes from `passphraseFile`
///   (its first line) or `passphraseEnv` (the name of an environment variable),
///   never from the configuration itself.
/// - Trust: `caFile` (PEM) instead of the system trust store; `verify: false`
///   turns verification off (logged loudly; tests only).
/// - Connections: `connections`, `maxQueued`, `connectTimeoutSeconds`,
///   `handshakeTimeoutSeconds`, `drainTimeoutSeconds`, `socketSendBuffer`,
///   `spareConnections`, `maxTLSVersion` (`"1.2"` or `"1.3"`).
/// - Delivery (shared with the `simulator` transport, ``DeliveryPolicyFactory``):
///   `writeBytes`, `maxUnconfirmed`, `minUnconfirmed`, `confirmAfterMilliseconds`,
///   `answerTimeoutMilliseconds`, `maxSilentCloses`, `maxOutageSeconds`,
///   `backoffInitialMilliseconds`, `backoffMaxMilliseconds`.
enum GatewayTransportFactory {
    static func configuration(_ node: ConfigNode) throws(ConfigError) -> GatewayConfiguration {
        let (host, port) = try EndpointOptions.hostAndPort(node, environments: GatewayEnvironment.all.map { ($0.name, $0.host, $0.port) })

        let tls = try TLSOptions.client(node)

        var c = GatewayConfiguration(host: host, port: port, tls: tls, serverName: try node.string("serverName"))
        c.connections = try node.int("connections", in: 1...64) ?? c.connections
        c.maxQueued = try node.int("maxQueued", in: 1...10_000_000) ?? c.maxQueued
        c.delivery = try DeliveryPolicyFactory.make(node)
        if let s = try node.int("connectTimeoutSeconds", in: 1...600) { c.connectTimeout = .seconds(s) }
        if let s = try node.int("drainTimeoutSeconds", in: 1...3600) { c.drainTimeout = .seconds(s) }
        c.socketSendBuffer = try node.int("socketSendBuffer", in: 4096...(64 << 20))
        c.spareConnections = try node.int("spareConnections", in: 0...8) ?? c.spareConnections
        _ = try feedbackEndpoint(node)
        return c
    }

    /// The feedback service that goes with this gateway: `feedbackHost` and
    /// `feedbackPort`, else the environment's; `nil` when neither is given.
    static func feedbackEndpoint(_ node: ConfigNode) throws(ConfigError) -> (host: String, port: Int)? {
        let env = try node.string("environment").flatMap(GatewayEnvironment.named)
        let host = try node.string("feedbackHost") ?? env?.feedbackHost
        let port = try node.int("feedbackPort", in: 1...65535) ?? env?.feedbackPort
        guard let host, let port else { return nil }
        return (host, port)
    }
}

/// The feedback service client for a configured `gateway` transport.
public enum FeedbackSetup {
    /// A client for the feedback service that goes with the configured gateway
    /// (same identity and trust). `host` and `port` override the configuration.
    public static func client(_ configuration: HeraldConfiguration, host: String? = nil, port: Int? = nil) throws(ConfigError) -> FeedbackClient {
        let node = configuration.transportOptions
        guard configuration.transportType == "gateway" else {
            throw node.error("type", "the feedback service needs the \"gateway\" transport (its certificate and trust), not \"\(configuration.transportType)\"")
        }
        let gateway = try GatewayTransportFactory.configuration(node)
        let configured = try GatewayTransportFactory.feedbackEndpoint(node)
        guard let h = host ?? configured?.host, let p = port ?? configured?.port else {
            throw node.error("feedbackHost", "required: give environment, or feedbackHost and feedbackPort")
        }
        do {
            return FeedbackClient(host: h, port: p, tls: try TLSContext(gateway.tls), serverName: gateway.serverName)
        } catch {
            throw node.error(node.has("p12") ? "p12" : "certificate", error.description)
        }
    }
}

extension GatewayTransport {
    /// Builds the transport from a configuration node, reporting TLS problems against the node.
    static func make(_ node: ConfigNode, logger: Logger) throws(ConfigError) -> GatewayTransport {
        var configuration = try GatewayTransportFactory.configuration(node)
        configuration.logger = logger
        do {
            return try GatewayTransport(configuration: configuration)
        } catch {
            throw node.error(configuration.tls.identity == nil ? "caFile" : (node.has("p12") ? "p12" : "certificate"), error.description)
        }
    }
}
