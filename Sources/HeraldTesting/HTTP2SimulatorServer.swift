import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldSimulator
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The HTTP/2 simulator served as APNs serves its provider API: TLS with ALPN
/// `h2` (and a client certificate when the TLS configuration asks for one),
/// HTTP/2 with `SETTINGS_MAX_CONCURRENT_STREAMS` as the simulator decides (one
/// stream until a valid provider token arrives, then more, announced in a new
/// SETTINGS frame), each request answered by ``HTTP2Simulator`` with APNs'
/// status, `apns-id` and JSON reason; its faults as a server shows them:
/// GOAWAY (`{"reason":"Shutdown"}`, later streams left unprocessed, the
/// connection closed soon after), reset streams, lost answers, and answers
/// held back by `answerDelay`.
///
/// ```swift
/// let server = try await HTTP2SimulatorServer.start(simulator: HTTP2Simulator(), tls: serverTLS)
/// ```
public final class HTTP2SimulatorServer: Sendable {
    public let simulator: HTTP2Simulator
    public let host: String
    public let port: Int
    let channel: any Channel
    let record: Record

    /// What the connections report, shared by the server and its connections' handlers.
    final class Record: Sendable {
        let connections = Atomic<Int>(0)
        let errors = Mutex<[String]>([])
        func note(_ error: String) { errors.withLock { if $0.count < 1000 { $0.append(error) } } }
    }

    init(simulator: HTTP2Simulator, host: String, channel: any Channel, record: Record) {
        self.simulator = simulator
        self.host = host
        self.port = channel.localAddress?.port ?? 0
        self.channel = channel
        self.record = record
    }

    /// Connections accepted so far.
    public var connections: Int { record.connections.load(ordering: .relaxed) }
    /// Errors seen on connections (TLS, HTTP/2 protocol), oldest first (at most 1000).
    public var connectionErrors: [String] { record.errors.withLock { $0 } }

    /// Starts serving on `host` (loopback by default); port 0 picks a free port.
    /// `tls` is a server configuration; ALPN `h2` is added and required.
    public static func start(
        simulator: HTTP2Simulator, tls: TLSConfiguration, host: String = "127.0.0.1", port: Int = 0,
        answerDelay: Duration? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HTTP2SimulatorServer {
        guard tls.role == .server else { throw TLSError(.configuration, "the simulator needs a server TLS configuration") }
        var configuration = tls
        configuration.applicationProtocols = ["h2"]
        configuration.requireApplicationProtocol = true
        let context = try TLSContext(configuration)
        let record = Record()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = record.connections.add(1, ordering: .relaxed).newValue
                    let settings: HTTP2Settings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: simulator.maxStreams(on: connection)),
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    ]
                    var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
                    connectionConfiguration.initialSettings = settings
                    // Providers cancel streams they gave up on; that is not an attack.
                    try channel.pipeline.syncOperations.addHandlers([
                        try OpenSSLHandler(context: context),
                        NIOHTTP2Handler(mode: .server, connectionConfiguration: connectionConfiguration, streamConfiguration: .toleratingResets),
                        HTTP2SimulatorSession(simulator: simulator, connection: connection, answerDelay: answerDelay, noteError: record.note),
                    ])
                }
            }
            .bind(host: host, port: port).get()
        return HTTP2SimulatorServer(simulator: simulator, host: host, channel: channel, record: record)
    }

    /// Stops listening (open connections finish on their own).
    public func stop() async {
        try? await channel.close()
    }
}

/// One provider connection to the HTTP/2 simulator: gathers each stream's
/// headers and body, asks the simulator, writes its answer.
final class HTTP2SimulatorSession: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Incoming {
        var method = ""
        var path = ""
        var authorization: String?
        var headers: [APNsRequest.Header] = []
        var body: [UInt8] = []
    }

    let simulator: HTTP2Simulator
    let connection: Int
    let answerDelay: Duration?
    let noteError: @Sendable (String) -> Void
    var incoming: [HTTP2StreamID: Incoming] = [:]
    var announced: Int
    var goingAway = false
    /// The highest stream the provider has opened: a GOAWAY names it, so that
    /// every stream the connection knows of is answered or refused, none dropped half-read.
    var lastOpened = HTTP2StreamID.rootStream
    let window = ConnectionWindow()

    init(simulator: HTTP2Simulator, connection: Int, answerDelay: Duration?, noteError: @escaping @Sendable (String) -> Void) {
        self.simulator = simulator
        self.connection = connection
        self.answerDelay = answerDelay
        self.noteError = noteError
        announced = simulator.maxStreams(on: connection)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let h):
            lastOpened = max(lastOpened, frame.streamID)
            var r = incoming[frame.streamID] ?? Incoming()
            for (name, value, _) in h.headers {
                switch name {
                case ":method": r.method = value
                case ":path": r.path = value
                case "authorization": r.authorization = value
                case _ where name.hasPrefix(":"): break
                default: r.headers.append(.init(name, value))
                }
            }
            if h.endStream { handle(frame.streamID, r, context: context) } else { incoming[frame.streamID] = r }
        case .data(let d):
            guard var r = incoming[frame.streamID] else { return }
            if case .byteBuffer(let b) = d.data { r.body += b.readableBytesView }
            if d.endStream { handle(frame.streamID, r, context: context) } else { incoming[frame.streamID] = r }
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent { incoming[closed.streamID] = nil }
        if let update = window.update(after: event) { context.write(wrapOutboundOut(update), promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream error (frames for a stream after it was reset) ends that stream only. After our
        // GOAWAY, swift-nio-http2 reports the streams the provider opened before it saw the GOAWAY
        // (refused, as they should be) and then fails its own reply to them: the connection is
        // closing anyway, on its timer, once the provider has read every answer.
        if error is NIOHTTP2Errors.StreamError || goingAway { return }
        noteError("connection \(connection): \(error)")
        context.close(promise: nil)
    }

    func handle(_ id: HTTP2StreamID, _ r: Incoming, context: ChannelHandlerContext) {
        incoming[id] = nil
        let now = Duration.sinceEpoch
        let request = APNsRequest(method: r.method, path: r.path, headers: r.headers, body: r.body)
        // Pushes to devices echo `apns-id`; broadcasts and channel management, `apns-request-id`.
        let idHeader = request.path.hasPrefix("/3/") ? "apns-id" : "apns-request-id"
        switch simulator.handle(request, authorization: r.authorization, connection: connection, now: now) {
        case .answer(let response):
            if let answerDelay {
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: TimeAmount(answerDelay)) {
                    let (session, context) = bound.value
                    session.write(response, on: id, idHeader: idHeader, context: context)
                    context.flush()
                }
            } else {
                write(response, on: id, idHeader: idHeader, context: context)
            }
        case .reset:
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.internalError))), promise: nil)
        case .refused:
            if !goingAway {
                goingAway = true
                var reason = context.channel.allocator.buffer(capacity: 24)
                reason.writeString("{\"reason\":\"Shutdown\"}")
                context.write(wrapOutboundOut(HTTP2Frame(
                    streamID: .rootStream, payload: .goAway(lastStreamID: lastOpened, errorCode: .noError, opaqueData: reason))), promise: nil)
                // APNs closes a connection it sent GOAWAY on; the provider usually leaves first.
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .seconds(2)) { bound.value.close(promise: nil) }
            }
            // Not processed, and said so: the provider may send it again at no risk.
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.refusedStream))), promise: nil)
            context.flush()
        case .silence:
            break
        }
        let limit = simulator.maxStreams(on: connection)
        if limit != announced && !goingAway {
            announced = limit
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))), promise: nil)
        }
    }

    func write(_ response: APNsResponse, on id: HTTP2StreamID, idHeader: String, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(response.status))
        if let apnsID = response.apnsID { headers.add(name: idHeader, value: apnsID) }
        if let unique = response.uniqueID { headers.add(name: "apns-unique-id", value: unique) }
        if let channel = response.channelID { headers.add(name: "apns-channel-id", value: channel) }
        let body = response.body
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body.isEmpty)))), promise: nil)
        guard !body.isEmpty else { return }
        let buffer = context.channel.allocator.buffer(bytes: body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))), promise: nil)
    }
}
