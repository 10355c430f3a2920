import HeraldCore
import HeraldHTTP2
import HeraldOpenSSL
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix

/// APNs' channel management API for broadcast pushes (iOS 18): create, read,
/// list and delete an app's channels on `api-manage-broadcast…` (see
/// ``APNsEnvironment/productionChannels``), with the same TLS, proxy and
/// authentication as the ``HTTP2Transport``.
///
/// Channel management is rare (a channel per event), so each call opens its own
/// connection (TCP, the optional proxy tunnel, TLS with ALPN `h2`, HTTP/2),
/// sends one request on one stream, and closes; every call has a timeout.
public final class APNsChannelClient: Sendable {
    public let configuration: HTTP2TransportConfiguration
    let tls: TLSContext
    let group: any EventLoopGroup
    let tokens: SharedProviderTokens?
    /// How long one call may take, connecting included.
    public let timeout: Duration

    /// `configuration`'s host and port are the channel management endpoint's.
    public init(
        configuration: HTTP2TransportConfiguration, timeout: Duration = .seconds(30),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws(TLSError) {
        var tlsConfiguration = configuration.tls
        tlsConfiguration.applicationProtocols = ["h2"]
        tlsConfiguration.requireApplicationProtocol = true
        self.configuration = configuration
        self.tls = try TLSContext(tlsConfiguration, logger: configuration.logger)
        self.group = group
        self.timeout = timeout
        tokens = configuration.providerToken.map { SharedProviderTokens(ProviderTokens(key: $0)) }
    }

    /// Sends `request` and reads APNs' answer: the result, or a ``BroadcastChannelError``
    /// with APNs' status and reason (status 0 when no answer came).
    public func call(_ request: BroadcastChannelRequest) async throws(BroadcastChannelError) -> BroadcastChannelResult {
        let wire = request.request(requestID: APNsID.random())
        let authorization: String?
        do {
            authorization = try tokens.map { t throws(ProviderTokenError) in
                "bearer " + (try t.token(now: Int64(Duration.sinceEpoch.components.seconds)))
            }
        } catch {
            throw BroadcastChannelError(status: 0, reason: "cannot sign a provider token: \(error)")
        }
        let response: APNsResponse
        do {
            response = try await withThrowingTaskGroup(of: APNsResponse?.self) { group in
                group.addTask { try await self.exchange(wire, authorization: authorization) }
                group.addTask {
                    try await Task.sleep(for: self.timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let answer = first else {
                    throw BroadcastChannelError(status: 0, reason: "no answer from \(configuration.endpoint) within \(timeout)")
                }
                return answer
            }
        } catch let error as BroadcastChannelError {
            throw error
        } catch {
            throw BroadcastChannelError(status: 0, reason: "channel management at \(configuration.endpoint): \(error)")
        }
        return try request.result(of: response)
    }

    /// One connection, one stream: the request out, the answer in.
    func exchange(_ request: APNsRequest, authorization: String?) async throws -> APNsResponse {
        let configuration = self.configuration
        let tls = self.tls
        let serverName = configuration.serverName ?? configuration.host
        let (host, port) = configuration.proxy.map { ($0.host, $0.port) } ?? (configuration.host, configuration.port)
        let (channel, multiplexer) = try await ClientBootstrap(group: group)
            .connectTimeout(TimeAmount(configuration.delivery.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let proxy = configuration.proxy {
                        try sync.addHandler(ProxyConnectHandler(target: configuration.host, port: configuration.port, proxy: proxy))
                    }
                    try sync.addHandler(OpenSSLHandler(context: tls, serverName: serverName))
                    let multiplexer = try sync.configureAsyncHTTP2Pipeline(mode: .client) { $0.eventLoop.makeSucceededVoidFuture() }
                    return (channel, multiplexer)
                }
            }
        do {
            let stream = try await multiplexer.openStream { stream in
                stream.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<HTTP2Frame.FramePayload, HTTP2Frame.FramePayload>(wrappingChannelSynchronously: stream)
                }
            }
            let response = try await stream.executeThenClose { inbound, outbound in
                var headers = HPACKHeaders()
                headers.add(name: ":method", value: request.method)
                headers.add(name: ":scheme", value: "https")
                headers.add(name: ":path", value: request.path)
                headers.add(name: ":authority", value: serverName)
                if let authorization { headers.add(name: "authorization", value: authorization, indexing: .neverIndexed) }
                for h in request.headers { headers.add(name: h.name, value: h.value) }
                try await outbound.write(.headers(.init(headers: headers, endStream: request.body.isEmpty)))
                if !request.body.isEmpty {
                    try await outbound.write(.data(.init(data: .byteBuffer(ByteBuffer(bytes: request.body)), endStream: true)))
                }
                var status: Int?
                var answerHeaders: [(name: String, value: String)] = []
                var body: [UInt8] = []
                for try await payload in inbound {
                    switch payload {
                    case .headers(let h):
                        for (name, value, _) in h.headers {
                            if name == ":status", status == nil { status = Int(value) } else if name.hasPrefix("apns-") { answerHeaders.append((name, value)) }
                        }
                        if h.endStream { return APNsResponse(status: status ?? 0, headers: answerHeaders, body: body) }
                    case .data(let d):
                        if case .byteBuffer(let b) = d.data, body.count + b.readableBytes <= 1 << 20 { body += b.readableBytesView }
                        if d.endStream { return APNsResponse(status: status ?? 0, headers: answerHeaders, body: body) }
                    case .rstStream(let code):
                        throw BroadcastChannelError(status: 0, reason: "APNs reset the stream (\(code))")
                    default:
                        break
                    }
                }
                throw BroadcastChannelError(status: 0, reason: "the connection ended before APNs answered")
            }
            channel.close(promise: nil)
            return response
        } catch {
            channel.close(promise: nil)
            throw error
        }
    }
}

extension APNsEnvironment {
    /// Channel management for production: `api-manage-broadcast.push.apple.com:2196`.
    public static let productionChannels = APNsEnvironment(name: "production", host: "api-manage-broadcast.push.apple.com", port: 2196)
    /// Channel management for the development environment: `api-manage-broadcast.sandbox.push.apple.com:2195`.
    public static let sandboxChannels = APNsEnvironment(
        name: "sandbox", host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)

    /// The channel management endpoint of the environment named `name`.
    public static func channels(named name: String) -> APNsEnvironment? {
        [productionChannels, sandboxChannels].first { $0.name == name }
    }
}
