import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import HeraldSimulator
import NIOCore
import NIOPosix
import Synchronization

/// The APNs simulator served over TLS, as the real gateway and feedback
/// service are: a gateway port that reads notification frames and answers
/// with error responses, and a feedback port that writes the feedback tuples
/// and closes. Both require a client certificate signed by the configured CA
/// (as APNs requires the provider certificate).
///
/// ```swift
/// let server = try await SimulatorServer.start(simulator: APNsSimulator(), tls: serverContext)
/// print(server.gatewayPort, server.feedbackPort)
/// ```
public final class SimulatorServer: Sendable {
    public let simulator: APNsSimulator
    public let gatewayPort: Int
    public let feedbackPort: Int
    public let host: String
    let channels: [any Channel]
    let errors = Mutex<[TLSError]>([])
    let handshakes = Atomic<Int>(0)

    init(simulator: APNsSimulator, host: String, gatewayChannel: any Channel, feedbackChannel: any Channel) {
        self.simulator = simulator
        self.host = host
        self.gatewayPort = gatewayChannel.localAddress?.port ?? 0
        self.feedbackPort = feedbackChannel.localAddress?.port ?? 0
        self.channels = [gatewayChannel, feedbackChannel]
    }

    /// TLS errors seen on client connections (refused certificates…), oldest first (at most 1000).
    public var connectionErrors: [TLSError] { errors.withLock { $0 } }
    /// TLS handshakes completed, gateway and feedback.
    public var handshakeCount: Int { handshakes.load(ordering: .relaxed) }

    /// Starts serving on `host` (loopback by default); port 0 picks free ports.
    public static func start(
        simulator: APNsSimulator, tls: TLSContext, host: String = "127.0.0.1", gatewayPort: Int = 0, feedbackPort: Int = 0,
        topic: String = "default", receiveBuffer: Int? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> SimulatorServer {
        guard tls.configuration.role == .server else { throw TLSError(.configuration, "the simulator needs a server TLS configuration") }
        let box = ServerBox()
        func bootstrap(_ makeHandler: @escaping @Sendable (any Channel) -> any ChannelHandler) -> ServerBootstrap {
            var b = ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 256)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            if let receiveBuffer {
                // Set on the listening socket so accepted sockets inherit it before the handshake.
                b = b.serverChannelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
            }
            return b
        }
        func serve(_ makeHandler: @escaping @Sendable (any Channel) -> any ChannelHandler) -> ServerBootstrap {
            bootstrap(makeHandler)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers([try OpenSSLHandler(context: tls), makeHandler(channel)])
                    }
                }
        }
        let gateway = try await serve { channel in
            // The connection's faults are drawn now: a slow handshake holds the ClientHello unread for a while.
            let connection = simulator.openConnection(topic: topic)
            if connection.isRefused { channel.close(promise: nil) }
            if let delay = connection.handshakeDelay {
                _ = channel.setOption(.autoRead, value: false)
                channel.eventLoop.scheduleTask(in: TimeAmount(delay)) { _ = channel.setOption(.autoRead, value: true) }
            }
            return GatewaySessionHandler(connection: connection, box: box)
        }.bind(host: host, port: gatewayPort).get()
        let feedback: any Channel
        do {
            feedback = try await serve { _ in FeedbackSessionHandler(simulator: simulator, box: box) }.bind(host: host, port: feedbackPort).get()
        } catch {
            try? await gateway.close()
            throw error
        }
        let server = SimulatorServer(simulator: simulator, host: host, gatewayChannel: gateway, feedbackChannel: feedback)
        box.server.withLock { $0 = server }
        return server
    }

    /// Stops listening (open connections finish on their own).
    public func stop() async {
        for c in channels { try? await c.close() }
    }

    func noteError(_ e: TLSError) {
        errors.withLock { if $0.count < 1000 { $0.append(e) } }
    }
}

/// Lets handlers report to the server object created after binding.
final class ServerBox: Sendable {
    let server = Mutex<SimulatorServer?>(nil)
    func noteError(_ error: any Error) {
        guard let e = error as? TLSError else { return }
        server.withLock { $0 }?.noteError(e)
    }
    func noteHandshake() {
        server.withLock { $0 }?.handshakes.add(1, ordering: .relaxed)
    }
}

/// One provider connection to the simulated gateway: decrypted bytes go to
/// the simulator's ``GatewayConnection``; its answer comes back; reads pause
/// under the read-delay fault (TCP backpressure reaches the provider) and stop
/// for good under the stall fault. As Apple's gateway does, an error response
/// is followed by an immediate close, with whatever the provider wrote after
/// it left unread (so the kernel resets the connection).
final class GatewaySessionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let box: ServerBox
    let connection: GatewayConnection
    var ready = false
    var closed = false
    var pausedUntil: NIODeadline?
    var pendingRead = false
    var idleCheck: Scheduled<Void>?

    init(connection: GatewayConnection, box: ServerBox) {
        self.connection = connection
        self.box = box
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSEvent {
            box.noteHandshake()
            ready = true
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed, ready else { return }
        idleCheck?.cancel()
        idleCheck = nil
        let buffer = unwrapInboundIn(data)
        var delay: Duration?
        let reply = buffer.withUnsafeReadableBytes { raw -> GatewayReply in
            var rest = raw
            while true {
                let reply = connection.receive(rest)
                if let d = reply.readDelay { delay = d }
                // A partly read write: the rest is still in the stream; read it next.
                if reply.closed || !reply.response.isEmpty || reply.consumed >= rest.count || reply.consumed == 0 { return reply }
                rest = UnsafeRawBufferPointer(rebasing: rest[reply.consumed...])
            }
        }
        if let delay {
            pausedUntil = .now() + TimeAmount(delay)
        }
        answer(reply, context: context)
    }

    func answer(_ reply: GatewayReply, context: ChannelHandlerContext) {
        if !reply.response.isEmpty {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply.response)), promise: nil)
        }
        if reply.closed {
            closed = true
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        guard !closed, ready else { return }
        let connection = self.connection
        // The provider may be waiting for an answer the response-delay fault holds back.
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(in: .milliseconds(20)) {
            let (handler, context) = bound.value
            guard !handler.closed else { return }
            handler.answer(connection.flush(), context: context)
        }
    }

    /// Under the read-delay fault, holds the next read back.
    func read(context: ChannelHandlerContext) {
        // The stall fault: the handshake completed, and nothing is read ever again.
        if ready && connection.isStalled { return }
        guard let until = pausedUntil, until > .now() else {
            pausedUntil = nil
            context.read()
            return
        }
        guard !pendingRead else { return }
        pendingRead = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(deadline: until) {
            let (handler, context) = bound.value
            handler.pendingRead = false
            handler.pausedUntil = nil
            context.read()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        box.noteError(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        if !closed { _ = connection.endOfInput() }
        closed = true
        context.fireChannelInactive()
    }
}

/// One connection to the simulated feedback service: writes the pending
/// feedback tuples once the TLS session is up, then closes.
final class FeedbackSessionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let simulator: APNsSimulator
    let box: ServerBox

    init(simulator: APNsSimulator, box: ServerBox) {
        self.simulator = simulator
        self.box = box
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSEvent {
            box.noteHandshake()
            let tuples = simulator.takeFeedbackTuples()
            let promise = context.eventLoop.makePromise(of: Void.self)
            if tuples.isEmpty {
                promise.succeed(())
            } else {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: tuples)), promise: promise)
            }
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        box.noteError(error)
        context.close(promise: nil)
    }
}
