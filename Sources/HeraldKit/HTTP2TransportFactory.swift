import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldOpenSSL
import Logging

/// Builds the `http2` transport (APNs' HTTP/2 provider API) from its configuration node:
///
/// ```json
/// "transport": {
///   "type": "http2",
///   "environment": "sandbox",
///   "topic": "com.example.app",
///   "providerToken": {"keyFile": "AuthKey_ABC123DEFG.p8", "keyID": "ABC123DEFG", "teamID": "DEF123GHIJ"},
///   "connections": 2
/// }
/// ```
///
/// Keys:
/// - `environment`: `production` or `sandbox`; or `host` and `port` (both
///   required without `environment`), and `serverName` when the certificate
///   names another host than `host` (also the `:authority`).
/// - Authentication: `providerToken` (token), or a client certificate with
///   the TLS keys shared with `gateway` (``TLSOptions``: `certificate`/`key`
///   or `p12`, `passphraseFile`/`passphraseEnv`, `caFile`, `verify`,
///   `handshakeTimeoutSeconds`, `maxTLSVersion`).
/// - `topic`: for requests that name none (the app's bundle identifier).
/// - Connections: `connections`, `maxStreams` (a cap on what APNs announces),
///   `maxQueued`, `connectTimeoutSeconds`, `requestTimeoutSeconds`,
///   `idlePingSeconds`, `maxAttempts`, `maxOutageSeconds`, `firstConnectAttempts` (0: none), `drainTimeoutSeconds`,
///   `bulkQueueingMilliseconds` (0: the bulk lane may fill every stream),
///   `backoffInitialMilliseconds`, `backoffMaxMilliseconds`.
/// - `proxy`: `{"host": …, "port": …}` and optionally `authorizationFile` or
///   `authorizationEnv` (the `Proxy-Authorization` value, e.g. `Basic …`).
/// - `channelsHost`, `channelsPort`: where `herald channels` manages broadcast
///   channels; by default the environment's `api-manage-broadcast…` endpoint,
///   or `host` and `port` when those are given.
package enum HTTP2TransportFactory {
    /// The configuration for channel management (``APNsChannelClient``): the
    /// transport's, with the channel management endpoint for host and port.
    package static func channelsConfiguration(_ node: ConfigNode) throws(ConfigError) -> HTTP2TransportConfiguration {
        var c = try configuration(node)
        let environment = try node.string("environment").flatMap(APNsEnvironment.channels(named:))
        if let host = try node.string("channelsHost") {
            c.host = host
        } else if let environment, !node.has("host") {
            c.host = environment.host
        }
        if let port = try node.int("channelsPort", in: 1...65535) {
            c.port = port
        } else if let environment, !node.has("port") {
            c.port = environment.port
        }
        return c
    }

    static func configuration(_ node: ConfigNode) throws(ConfigError) -> HTTP2TransportConfiguration {
        _ = (try node.string("channelsHost"), try node.int("channelsPort", in: 1...65535))  // read by channelsConfiguration
        let (host, port) = try EndpointOptions.hostAndPort(node, environments: APNsEnvironment.all.map { ($0.name, $0.host, $0.port) })
        var c = HTTP2TransportConfiguration(
            host: host, port: port, tls: try TLSOptions.client(node), providerToken: try HTTP2SimulatorTransportFactory.providerTokenKey(node))
        if c.providerToken == nil && c.tls.identity == nil {
            throw node.error("providerToken", "required: a provider token (.p8 key) or a client certificate (certificate and key, or p12)")
        }
        c.serverName = try node.string("serverName")
        c.defaultTopic = try node.string("topic")
        c.delivery.connections = try node.int("connections", in: 1...64) ?? c.delivery.connections
        c.fastLaneConnection = try node.bool("fastLaneConnection") ?? c.fastLaneConnection
        c.maxStreamsPerConnection = try node.int("maxStreams", in: 1...100_000) ?? c.maxStreamsPerConnection
        c.maxQueued = try node.int("maxQueued", in: 1...10_000_000) ?? c.maxQueued
        if let s = try node.int("connectTimeoutSeconds", in: 1...600) { c.delivery.connectTimeout = .seconds(s) }
        if let s = try node.int("requestTimeoutSeconds", in: 1...600) { c.delivery.requestTimeout = .seconds(s) }
        if let s = try node.int("idlePingSeconds", in: 1...3600) { c.delivery.idlePing = .seconds(s) }
        if let s = try node.int("maxOutageSeconds", in: 1...86_400) { c.delivery.maxOutage = .seconds(s) }
        if let n = try node.int("firstConnectAttempts", in: 0...1000) { c.delivery.firstConnectAttempts = n == 0 ? nil : n }
        if let ms = try node.int("bulkQueueingMilliseconds", in: 0...60_000) { c.delivery.bulkQueueing = ms == 0 ? nil : .milliseconds(ms) }
        if let s = try node.int("drainTimeoutSeconds", in: 1...3600) { c.drainTimeout = .seconds(s) }
        c.delivery.maxAttempts = try node.int("maxAttempts", in: 1...100) ?? c.delivery.maxAttempts
        let initial = try node.int("backoffInitialMilliseconds", in: 1...600_000)
        let maximum = try node.int("backoffMaxMilliseconds", in: 1...3_600_000)
        if initial != nil || maximum != nil {
            c.delivery.backoff = BackoffPolicy(
                initial: .milliseconds(initial ?? 100), maximum: .milliseconds(maximum ?? max(initial ?? 100, 30_000)))
        }
        if node.has("proxy") {
            let p = try node.child("proxy")
            guard let h = try p.string("host") else { throw p.error("host", "required: the proxy's host") }
            guard let port = try p.int("port", in: 1...65535) else { throw p.error("port", "required: the proxy's port") }
            let file = try p.path("authorizationFile")
            let env = try p.string("authorizationEnv")
            if file != nil && env != nil { throw p.error("authorizationFile", "give authorizationFile or authorizationEnv, not both") }
            c.proxy = HTTPProxy(host: h, port: port, authorization: file.map(SecretSource.file) ?? env.map(SecretSource.environment))
        }
        return c
    }
}

extension HTTP2Transport {
    /// Builds the transport from a configuration node, reporting TLS problems against the node.
    static func make(_ node: ConfigNode, context: TransportContext) throws(ConfigError) -> HTTP2Transport {
        var configuration = try HTTP2TransportFactory.configuration(node)
        configuration.logger = context.logger
        if let key = configuration.providerToken, let pool = context.providerTokens {
            configuration.sharedTokens = try HTTP2SimulatorTransportFactory.shared(key, in: pool, node)
        }
        do {
            return try HTTP2Transport(configuration: configuration)
        } catch {
            throw node.error(configuration.tls.identity == nil ? "caFile" : (node.has("p12") ? "p12" : "certificate"), error.description)
        }
    }
}
