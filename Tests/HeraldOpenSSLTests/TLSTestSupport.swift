import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import NIOCore
import NIOPosix
import Synchronization

/// Echoes what it reads (over TLS).
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

/// Records what the server side saw: handshakes and errors.
final class ServerEvents: Sendable {
    let errors = Mutex<[TLSError]>([])
    let completed = Mutex<[TLSEvent]>([])
    let handshakes = Atomic<Int>(0)
}

final class ServerObserver: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let events: ServerEvents
    init(_ events: ServerEvents) { self.events = events }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let e = event as? TLSEvent {
            events.handshakes.add(1, ordering: .relaxed)
            events.completed.withLock { $0.append(e) }
        }
        context.fireUserInboundEventTriggered(event)
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let e = error as? TLSError { events.errors.withLock { $0.append(e) } }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }
}

/// A TLS echo server on 127.0.0.1.
struct EchoServer {
    let channel: any Channel
    let events: ServerEvents
    var port: Int { channel.localAddress!.port! }

    static func start(_ context: TLSContext) async throws -> EchoServer {
        let events = ServerEvents()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        try OpenSSLHandler(context: context), ServerObserver(events), EchoHandler(),
                    ])
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return EchoServer(channel: channel, events: events)
    }

    func stop() async { try? await channel.close() }
}

/// What the client side of a test got: the echo, and its own handshake event.
struct Echoed {
    var bytes: [UInt8]
    var event: TLSEvent?
}

/// The client side of a test: completes with the echoed bytes or the first error.
final class ClientProbe: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let expected: Int
    var received: [UInt8] = []
    var event: TLSEvent?
    let result: EventLoopPromise<Echoed>
    let message: [UInt8]
    init(message: [UInt8], result: EventLoopPromise<Echoed>) {
        self.message = message
        self.expected = message.count
        self.result = result
    }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSEvent {
            self.event = event
            context.writeAndFlush(NIOAny(ByteBuffer(bytes: message)), promise: nil)
        }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var b = unwrapInboundIn(data)
        received += b.readBytes(length: b.readableBytes) ?? []
        if received.count >= expected { result.succeed(Echoed(bytes: received, event: event)); context.close(promise: nil) }
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        result.fail(error)
    }
    func channelInactive(context: ChannelHandlerContext) {
        struct Closed: Error {}
        result.fail(Closed())
    }
}

/// Connects with `context`, sends `message`, returns the echo (or throws the TLS error).
func echo(_ message: [UInt8], port: Int, context: TLSContext, serverName: String?, host: String = "127.0.0.1") async throws -> [UInt8] {
    try await exchange(message, port: port, context: context, serverName: serverName, host: host).bytes
}

/// Connects with `context`, sends `message`, returns the echo and the client's handshake event (or throws the TLS error).
func exchange(_ message: [UInt8], port: Int, context: TLSContext, serverName: String?, host: String = "127.0.0.1") async throws -> Echoed {
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let result = loop.makePromise(of: Echoed.self)
    _ = try await ClientBootstrap(group: loop)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([
                    try OpenSSLHandler(context: context, serverName: serverName), ClientProbe(message: message, result: result),
                ])
            }
        }
        .connect(host: host, port: port).get()
    return try await result.futureResult.get()
}
