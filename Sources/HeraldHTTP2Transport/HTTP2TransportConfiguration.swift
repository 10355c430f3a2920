import HeraldCore
import HeraldHTTP2
import HeraldOpenSSL
import Logging

/// Where APNs' HTTP/2 provider API is.
public struct APNsEnvironment: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let host: String
    public let port: Int

    public init(name: String, host: String, port: Int) {
        self.name = name
        self.host = host
        self.port = port
    }

    /// `api.push.apple.com:443`.
    public static let production = APNsEnvironment(name: "production", host: "api.push.apple.com", port: 443)
    /// `api.sandbox.push.apple.com:443` (the development environment; answers carry `apns-unique-id`).
    public static let sandbox = APNsEnvironment(name: "sandbox", host: "api.sandbox.push.apple.com", port: 443)
    public static let all: [APNsEnvironment] = [.production, .sandbox]
    public static func named(_ n: String) -> APNsEnvironment? { all.first { $0.name == n } }

    public var description: String { "\(name) (\(host):\(port))" }
}

/// An HTTPS proxy reached with `CONNECT host:port` before TLS starts.
public struct HTTPProxy: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Sent as `Proxy-Authorization` (e.g. `Basic …`); read from a file or the environment, never logged.
    public var authorization: SecretSource?

    public init(host: String, port: Int, authorization: SecretSource? = nil) {
        self.host = host
        self.port = port
        self.authorization = authorization
    }

    public var description: String { "\(host):\(port)" + (authorization == nil ? "" : " (with credentials)") }
}

/// How the HTTP/2 transport reaches APNs, authenticates, and gives up.
public struct HTTP2TransportConfiguration: Sendable {
    /// Where the transport logs (connection events at `trace`; `HERALD_HTTP2_TRACE=1` turns them on).
    public var logger = Logger(label: "herald.http2")
    /// APNs' host and port (a fresh DNS look-up for each connection).
    public var host: String
    public var port: Int
    /// The name the server's certificate must carry (and the SNI, and `:authority`); defaults to `host`.
    public var serverName: String?
    /// TLS: trust and verification, and our certificate when authenticating with one.
    /// The transport adds ALPN `h2` and requires the server to choose it.
    public var tls: TLSConfiguration
    /// Token authentication: the provider token (one JWT per team, shared by
    /// every connection, re-signed every 40 minutes). `nil` with a certificate in `tls`.
    public var providerToken: ProviderTokenKey?
    /// The provider token's JWT, shared with other transports of the same team (the `apps`
    /// section gives every app of a team the same one); `nil` makes one from ``providerToken``.
    public var sharedTokens: SharedProviderTokens?
    /// The topic for requests that name none (the app's bundle identifier).
    public var defaultTopic: String?
    /// Connections, timeouts, retries and backoff: the rules the in-memory HTTP/2 simulator transport runs too.
    public var delivery = HTTP2DeliveryPolicy()
    /// Fast-lane notifications on a connection of their own (one more than `delivery.connections`,
    /// on an event loop of its own where the group has one to spare), never behind a campaign's
    /// frames in a connection or its loop's work; the bulk lane keeps the `connections` others. It
    /// takes as many as its streams hold at once: past that the fast lane spills onto the bulk
    /// lane's connections, going before the bulk lane there. On by default (docs/apps.md, "Lanes");
    /// off, every connection carries both lanes.
    public var fastLaneConnection = true
    /// Streams per connection when the server announces no limit (and a cap on what it announces).
    public var maxStreamsPerConnection = 1000
    /// Notifications held (queued and in flight) before `send` waits: backpressure.
    public var maxQueued = 16_384
    /// How long `finish` waits for answers before what is left fails.
    public var drainTimeout: Duration = .seconds(30)
    /// An HTTPS proxy to tunnel through, if any.
    public var proxy: HTTPProxy?
    /// The flow-control window we offer APNs (answers are small; the default suffices).
    public var initialWindowSize = 1 << 20

    public init(host: String, port: Int, tls: TLSConfiguration, providerToken: ProviderTokenKey? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.providerToken = providerToken
    }

    /// APNs in `environment`, trusting the system's store.
    public init(environment: APNsEnvironment, tls: TLSConfiguration = .client(identity: nil), providerToken: ProviderTokenKey? = nil) {
        self.init(host: environment.host, port: environment.port, tls: tls, providerToken: providerToken)
    }

    var endpoint: String { hostAndPort(host, port) }
}

/// `host:port`, with an IPv6 address in brackets (`[::1]:443`): endpoints, `CONNECT` targets, URLs.
package func hostAndPort(_ host: String, _ port: Int) -> String {
    host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
}
