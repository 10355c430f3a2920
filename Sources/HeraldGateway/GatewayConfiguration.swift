import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import Logging
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

/// How the gateway transport connects, batches, confirms and gives up.
public struct GatewayConfiguration: Sendable {
    /// Where the transport logs (connection events at `trace`; `HERALD_GATEWAY_TRACE=1` turns them on).
    public var logger = Logger(label: "herald.gateway")
    /// The gateway's host and port.
    public var host: String
    public var port: Int
    /// The name the server's certificate must carry (and the SNI); defaults to `host`.
    public var serverName: String?
    /// TLS: our identity (the provider certificate), trust, verification.
    public var tls: TLSConfiguration
    /// Persistent connections in parallel.
    public var connections: Int = 1
    /// How notifications are written, confirmed, resent and given up (the
    /// same rules as the in-memory simulator transport).
    public var delivery = DeliveryPolicy()
    /// Notifications waiting to be written, over all connections, before `send` waits (backpressure).
    public var maxQueued: Int = 16_384
    /// Spare connections each connection keeps ready (TCP and TLS done) while
    /// it has work queued, so the connection after an error response costs no
    /// handshake wait (the binary interface ends a connection at every error).
    /// On a real network a handshake costs round trips; on loopback, with
    /// both ends on two cores, it saves nothing. 0 opens connections only
    /// when needed.
    public var spareConnections = 1
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
    /// Time allowed to open a TCP connection (the TLS handshake has its own
    /// timeout, and ``DeliveryPolicy/connectTimeout`` bounds both).
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
