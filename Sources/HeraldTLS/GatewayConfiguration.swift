import HeraldBinary
import HeraldCore
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the binary interface's gateway is.
public struct GatewayEnvironment: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let host: String
    public let port: Int
    public let feedbackHost: String
    public let feedbackPort: Int

    public init(name: String, host: String, port: Int, feedbackHost: String, feedbackPort: Int) {
        self.name = name
        self.host = host
        self.port = port
        self.feedbackHost = feedbackHost
        self.feedbackPort = feedbackPort
    }

    /// `gateway.push.apple.com:2195` (feedback `feedback.push.apple.com:2196`).
    public static let production = GatewayEnvironment(
        name: "production", host: "gateway.push.apple.com", port: 2195, feedbackHost: "feedback.push.apple.com", feedbackPort: 2196)
    /// `gateway.sandbox.push.apple.com:2195` (feedback `feedback.sandbox.push.apple.com:2196`).
    public static let sandbox = GatewayEnvironment(
        name: "sandbox", host: "gateway.sandbox.push.apple.com", port: 2195,
        feedbackHost: "feedback.sandbox.push.apple.com", feedbackPort: 2196)
    public static let all: [GatewayEnvironment] = [.production, .sandbox]
    public static func named(_ n: String) -> GatewayEnvironment? { all.first { $0.name == n } }

    public var description: String { "\(name) (\(host):\(port))" }
}

extension TimeAmount {
    init(_ d: Duration) {
        self = .nanoseconds(d.inNanoseconds)
    }
}

/// How the gateway transport connects, batches, confirms and gives up.
public struct GatewayConfiguration: Sendable {
    /// The gateway's host and port.
    public var host: String
    public var port: Int
    /// The name the server's certificate must carry (and the SNI); defaults to `host`.
    public var serverName: String?
    /// TLS: our identity (the provider certificate), trust, verification.
    public var tls: TLSConfiguration
    /// Persistent connections in parallel.
    public var connections: Int = 1
    /// Frames are gathered into writes of about this many bytes.
    public var writeBytes: Int = 64 << 10
    /// A notification is known to be accepted when this long has passed since
    /// its bytes went to the network and no error response came for it or an
    /// earlier one (the binary interface never says "accepted"). Errors from
    /// the gateway and status 10 confirm earlier notifications at once.
    public var acceptAfter: Duration = .seconds(1)
    /// At most this many notifications wait for confirmation per connection
    /// (bounds memory). When reached, the connection writes a probe the
    /// gateway is certain to reject, whose answer confirms everything before
    /// it, and goes on on a fresh connection.
    public var maxUnconfirmed: Int = 100_000
    /// After error responses the limit above shrinks (halving, down to this),
    /// so fewer notifications are written past a failing one and resent; it
    /// grows back (doubling) while notifications are confirmed without errors.
    public var minUnconfirmed: Int = 256
    /// Notifications waiting to be written, over all connections, before `send` waits (backpressure).
    public var maxQueued: Int = 16_384
    /// Reconnection delays after failures.
    public var backoff = BackoffPolicy()
    /// Consecutive failed connection attempts after which the waiting notifications fail.
    public var maxConnectAttempts: Int = 6
    /// Connections closed in a row with notifications in flight, no error
    /// response and nothing confirmed in between, before the one notification
    /// left in flight fails (each such close halves what may be in flight, so
    /// the streak isolates a notification the gateway chokes on). A gateway
    /// that keeps closing `maxConnectAttempts` more times fails everything waiting.
    public var maxSilentCloses: Int = 12
    /// How long `finish` waits for the gateway to confirm everything before the rest fails.
    public var drainTimeout: Duration = .seconds(30)
    /// The socket's send buffer (SO_SNDBUF) in bytes; `nil` leaves it to the
    /// system's autotuning (right for a real network). Everything in it is in
    /// flight, so a small buffer means less to resend after an error on a
    /// fast link such as loopback.
    public var socketSendBuffer: Int?
    /// The connection's user-space write buffer: writing pauses above `high`
    /// bytes not yet taken by the socket and resumes below `low`.
    public var writeBufferHigh: Int = 256 << 10
    public var writeBufferLow: Int = 64 << 10
    /// Time allowed to open a TCP connection.
    public var connectTimeout: Duration = .seconds(10)

    public init(host: String, port: Int, tls: TLSConfiguration, serverName: String? = nil, connections: Int = 1) {
        self.host = host
        self.port = port
        self.tls = tls
        self.serverName = serverName
        self.connections = connections
    }

    /// Apple's gateway for `environment`, with `identity` and the system trust store.
    public init(environment: GatewayEnvironment, identity: TLSIdentity, trust: TLSTrust = .system, connections: Int = 1) {
        self.init(host: environment.host, port: environment.port, tls: .client(identity: identity, trust: trust), connections: connections)
    }
}
