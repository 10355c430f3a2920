import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import Logging
import NIOCore
import NIOPosix

/// The feedback service's client: connects over TLS (with the same provider
/// certificate as the gateway), reads the tuples the service writes as soon
/// as the session is up, until it closes, and decodes them.
///
/// The service empties its list once read, so every call returns only what
/// is new, and nothing it sent is thrown away: if the stream breaks off (a
/// reset, a truncated tuple), the call throws ``FeedbackIncomplete`` with
/// every complete, valid tuple before the problem. A complete tuple whose
/// token cannot be a device token (a length other than 32 bytes, up to
/// 65,535) is skipped with a warning naming it, and the tuples after it are
/// kept: its length field still frames the stream.
public struct FeedbackClient: FeedbackSource {
    public var host: String
    public var port: Int
    public var serverName: String?
    public var timeout: Duration
    /// Where skipped tuples are reported (at warning).
    public var logger = Logger(label: "herald.feedback")
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

    /// What one fetch read: the tuples kept, and a line for each one skipped.
    public struct Fetch: Sendable {
        public var entries: [FeedbackEntry]
        public var skipped: [String]
    }

    public func fetchFeedback() async throws -> [FeedbackEntry] {
        try await fetch().entries
    }

    /// ``fetchFeedback()``, and the tuples it skipped (each also logged at warning).
    public func fetch() async throws -> Fetch {
        let loop = group.next()
        let done = loop.makePromise(of: FeedbackReadHandler.Result.self)
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
        let (bytes, streamError) = try await done.futureResult.get()
        // Nothing came before the error (a refused certificate…): nothing can be lost; report it as it is.
        if bytes.isEmpty, let streamError { throw streamError }
        let result = try Self.decode(bytes, streamError: streamError, from: where_)
        for line in result.skipped { logger.warning("\(line)") }
        return result
    }

    /// The tuples in `bytes` and those skipped; throws ``FeedbackIncomplete`` (with the good ones)
    /// when the stream breaks off.
    static func decode(_ bytes: [UInt8], streamError: (any Error)?, from service: String) throws(FeedbackIncomplete) -> Fetch {
        var decoder = FeedbackDecoder()
        var entries: [FeedbackEntry] = []
        var skipped: [String] = []
        var problem: String?
        do {
            try decoder.read(bytes) { entry in
                guard entry.token.count == DeviceToken.standardLength else {
                    skipped.append(
                        "tuple \(entries.count + skipped.count + 1) from the feedback service \(service) (timestamp \(entry.timestamp)) "
                            + "has a token of \(entry.token.count) bytes (device tokens are \(DeviceToken.standardLength)): skipped, the tuples after it kept")
                    return true
                }
                entries.append(entry)
                return true
            }
            if streamError == nil { try decoder.finish() }
        } catch {
            problem = "the feedback service \(service) sent a broken stream: \(error)"
        }
        if problem == nil, let streamError {
            problem = "the connection to the feedback service \(service) failed: \(streamError)"
        }
        if let problem { throw FeedbackIncomplete(entries: entries, reason: problem) }
        return Fetch(entries: entries, skipped: skipped)
    }
}

/// Collects everything the feedback service writes until it closes.
/// Every error ends the read with what came before it: the bytes, and the error.
final class FeedbackReadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias Result = (bytes: [UInt8], error: (any Error)?)
    let done: EventLoopPromise<Result>
    var bytes: [UInt8] = []
    var error: (any Error)?

    init(done: EventLoopPromise<Result>) { self.done = done }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard error == nil else { return }
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
        if bytes.count > 64 << 20 {
            error = TLSError(.protocolError, "the feedback service sent more than 64 MiB")
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.error == nil { self.error = error }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        done.succeed((bytes, error))
        context.fireChannelInactive()
    }
}
