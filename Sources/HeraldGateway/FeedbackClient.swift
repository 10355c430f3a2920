import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import NIOCore
import NIOPosix

/// The feedback service's client: connects over TLS (with the same provider
/// certificate as the gateway), reads the tuples the service writes as soon
/// as the session is up, until it closes, and decodes them.
///
/// The service empties its list once read, so every call returns only what
/// is new. A truncated last tuple is an error (nothing is returned, so
/// nothing is half-applied).
public struct FeedbackClient: FeedbackSource {
    public var host: String
    public var port: Int
    public var serverName: String?
    public var timeout: Duration
    let tls: TLSContext
    let group: any EventLoopGroup

    /// - Parameters:
    ///   - tls: a client context (our identity, the trust store).
    ///   - timeout: how long one fetch may take.
    public init(host: String, port: Int, tls: TLSContext, serverName: String? = nil, timeout: Duration = .seconds(60),
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.host = host
        self.port = port
        self.serverName = serverName
        self.timeout = timeout
        self.tls = tls
        self.group = group
    }

    /// Apple's feedback service for `environment`.
    public init(environment: GatewayEnvironment, tls: TLSContext) {
        self.init(host: environment.feedbackHost, port: environment.feedbackPort, tls: tls)
    }

    public func fetchFeedback() async throws -> [FeedbackEntry] {
        let loop = group.next()
        let done = loop.makePromise(of: [UInt8].self)
        let tls = self.tls
        let name = serverName ?? host
        let where_ = "\(host):\(port)"
        let channel = try await ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(timeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        try OpenSSLHandler(context: tls, serverName: name), FeedbackReadHandler(done: done),
                    ])
                }
            }
            .connect(host: host, port: port).get()
        let timer = loop.scheduleTask(in: TimeAmount(timeout)) {
            done.fail(TLSError(.protocolError, "the feedback service \(where_) did not finish within \(timeout)"))
            channel.close(promise: nil)
        }
        defer { timer.cancel() }
        let bytes = try await done.futureResult.get()
        var decoder = FeedbackDecoder()
        var entries: [FeedbackEntry] = []
        try decoder.read(bytes) { entries.append($0); return true }
        try decoder.finish()
        return entries
    }
}

/// Collects everything the feedback service writes until it closes.
final class FeedbackReadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let done: EventLoopPromise<[UInt8]>
    var bytes: [UInt8] = []
    var failed = false

    init(done: EventLoopPromise<[UInt8]>) { self.done = done }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
        if bytes.count > 64 << 20 {
            failed = true
            done.fail(TLSError(.protocolError, "the feedback service sent more than 64 MiB"))
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failed = true
        done.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !failed { done.succeed(bytes) }
        context.fireChannelInactive()
    }
}
