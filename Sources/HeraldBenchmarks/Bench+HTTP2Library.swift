import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldOpenSSL
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import NIOPosix

/// What swift-nio-http2 alone costs the client end of a connection, per
/// request: the transport's `NIOHTTP2Handler`, configured as the transport
/// configures it, writes each request's header block (built as the transport
/// builds it) and body, and reads a `:status 200` answer for it. No TLS, no
/// socket, no delivery machine: the answers were recorded beforehand from a
/// server-mode `NIOHTTP2Handler`, round by round, and are replayed.
///
/// The rate is what one event loop could reach if everything but the HTTP/2
/// library were free, which bounds the transport on one connection.
enum HTTP2LibraryAlone {
    /// The server end, for the recording: answers every request once its stream ends, and gives
    /// the connection's flow-control window back every 32 KiB (the handler does not on its own).
    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame
        var consumed = 0
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            let ended: Bool
            switch frame.payload {
            case .headers(let h): ended = h.endStream
            case .data(let d):
                ended = d.endStream
                consumed += d.data.readableBytes
                if consumed >= 32 << 10 {
                    context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: consumed))), promise: nil)
                    consumed = 0
                }
            default: ended = false
            }
            guard ended else { return }
            let answer = HTTP2Frame(streamID: frame.streamID, payload: .headers(.init(headers: [":status": "200"], endStream: true)))
            context.writeAndFlush(wrapOutboundOut(answer), promise: nil)
        }
    }

    /// The client end: counts answers.
    final class Counter: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        var answers = 0
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .headers(let h) = unwrapInboundIn(data).payload, h.endStream { answers += 1 }
        }
    }

    static func client(initialWindowSize: Int) throws -> (EmbeddedChannel, Counter) {
        let channel = EmbeddedChannel()
        let counter = Counter()
        try channel.pipeline.syncOperations.addHandlers([
            NIOHTTP2Handler(mode: .client, connectionConfiguration: .apnsClient(initialWindowSize: initialWindowSize),
                            streamConfiguration: .toleratingResets),
            counter,
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return (channel, counter)
    }

    /// Everything `channel` has written, in one buffer.
    static func drain(_ channel: EmbeddedChannel) throws -> ByteBuffer {
        var all = ByteBuffer()
        while var b = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&b) }
        return all
    }

    /// `request` on stream `id` as the transport sends it: HEADERS (its header block built by the
    /// transport's code), then DATA ending the stream.
    static func frames(_ request: APNsRequest, id: HTTP2StreamID, authority: String, allocator: ByteBufferAllocator) -> (HTTP2Frame, HTTP2Frame) {
        let headers = HPACKHeaders(request: request, authority: authority)
        let body = allocator.buffer(bytes: request.body)
        return (HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: false))),
                HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true))))
    }

    /// Writes `requests[range]` as the transport does and flushes.
    static func write(_ requests: ArraySlice<APNsRequest>, to channel: EmbeddedChannel, streams: inout Int32, authority: String) {
        for request in requests {
            let (headers, data) = frames(request, id: HTTP2StreamID(streams), authority: authority, allocator: channel.allocator)
            streams += 2
            channel.write(headers, promise: nil)
            channel.write(data, promise: nil)
        }
        channel.flush()
    }

    /// A server's answers to `requests`, recorded once, to replay against fresh clients.
    struct Recording {
        let requests: [APNsRequest]
        let round: Int
        let authority: String
        let initialWindowSize: Int
        /// The server's bytes after the client's set-up, then after each round of requests.
        let setUp: ByteBuffer
        let rounds: [ByteBuffer]
    }

    /// Requests per second through the client's `NIOHTTP2Handler` alone, `round` streams at a time.
    static func rate(_ requests: [APNsRequest], round: Int = 100, authority: String, initialWindowSize: Int) throws -> Double {
        try replay(record(requests, round: round, authority: authority, initialWindowSize: initialWindowSize))
    }

    /// Records a server-mode `NIOHTTP2Handler`'s answers to `requests`, written `round` at a time.
    static func record(_ requests: [APNsRequest], round: Int = 100, authority: String, initialWindowSize: Int) throws -> Recording {
        // Record: the server's bytes after the client's set-up, then after each round of requests.
        let (recorder, _) = try client(initialWindowSize: initialWindowSize)
        let server = EmbeddedChannel()
        try server.pipeline.syncOperations.addHandlers([
            NIOHTTP2Handler(mode: .server, connectionConfiguration: .init(), streamConfiguration: .toleratingResets), Responder(),
        ])
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        func exchange() throws -> ByteBuffer {
            var answered = ByteBuffer()
            while true {
                let up = try drain(recorder)
                if up.readableBytes > 0 { try server.writeInbound(up) }
                var down = try drain(server)
                if down.readableBytes == 0 && up.readableBytes == 0 { return answered }
                if down.readableBytes > 0 {
                    answered.writeImmutableBuffer(down)
                    try recorder.writeInbound(down)
                    down.clear()
                }
            }
        }
        var streams: Int32 = 1
        let setUp = try exchange()
        var rounds: [ByteBuffer] = []
        var start = 0
        while start < requests.count {
            write(requests[start..<min(start + round, requests.count)], to: recorder, streams: &streams, authority: authority)
            rounds.append(try exchange())
            start += round
        }
        _ = try? recorder.finish()
        _ = try? server.finish()
        return Recording(requests: requests, round: round, authority: authority, initialWindowSize: initialWindowSize, setUp: setUp, rounds: rounds)
    }

    /// The recorded requests on a fresh client, fed the recorded answers; timed.
    static func replay(_ recording: Recording) throws -> Double {
        let requests = recording.requests, round = recording.round, authority = recording.authority
        let (channel, counter) = try client(initialWindowSize: recording.initialWindowSize)
        _ = try drain(channel)
        try channel.writeInbound(recording.setUp)
        _ = try drain(channel)
        var streams: Int32 = 1
        let clock = ContinuousClock()
        let began = clock.now
        var start = 0
        for answers in recording.rounds {
            write(requests[start..<min(start + round, requests.count)], to: channel, streams: &streams, authority: authority)
            _ = try drain(channel)
            try channel.writeInbound(answers)
            start += round
        }
        let seconds = (clock.now - began).inSeconds
        _ = try? channel.finish()
        guard counter.answers == requests.count else {
            throw BenchError("http2 library alone: \(counter.answers) of \(requests.count) requests answered in the replay")
        }
        return Double(requests.count) / seconds
    }
}

/// swift-nio-http2 on a real connection with nothing of Herald's delivery: the
/// transport's TLS handler and `NIOHTTP2Handler` (configured as the transport
/// configures them) and a handler that keeps `streams` requests open, writing
/// the next request (header block built as the transport builds it) as each
/// answer comes and flushing once a read. No delivery machine, driver, ledger
/// or outcome: what any client on this library pays for TLS and the socket,
/// which the in-memory measure (``HTTP2LibraryAlone``) leaves out.
enum HTTP2LibraryOverTLS {
    final class Client: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame
        let requests: [APNsRequest]
        let authority: String
        let streams: Int
        let done: EventLoopPromise<Double>
        var next = 0
        var answered = 0
        var nextStreamID: Int32 = 1
        var began = ContinuousClock().now
        var started = false
        var finished = false
        var wrote = false

        init(requests: [APNsRequest], authority: String, streams: Int, done: EventLoopPromise<Double>) {
            self.requests = requests
            self.authority = authority
            self.streams = streams
            self.done = done
        }

        func finish(_ result: Result<Double, any Error>) {
            guard !finished else { return }
            finished = true
            done.completeWith(result)
        }

        func write(_ context: ChannelHandlerContext) {
            let (headers, data) = HTTP2LibraryAlone.frames(
                requests[next], id: HTTP2StreamID(nextStreamID), authority: authority, allocator: context.channel.allocator)
            next += 1
            nextStreamID += 2
            context.write(wrapOutboundOut(headers), promise: nil)
            context.write(wrapOutboundOut(data), promise: nil)
            wrote = true
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data).payload {
            case .settings(.settings(let settings)) where !started:
                // The server's first SETTINGS: the connection is ready.
                started = true
                let limit = settings.last { $0.parameter == .maxConcurrentStreams }.map(\.value) ?? streams
                for _ in 0..<min(streams, limit, requests.count) { write(context) }
            case .headers(let h) where h.endStream:
                answered += 1
                if next < requests.count { write(context) }
                if answered == requests.count {
                    finish(.success(Double(requests.count) / (ContinuousClock().now - began).inSeconds))
                }
            case .goAway:
                finish(.failure(BenchError("http2 library over TLS: GOAWAY after \(answered) answers")))
            default:
                break
            }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            if wrote { wrote = false; context.flush() }
            context.fireChannelReadComplete()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            finish(.failure(error))
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            finish(.failure(BenchError("http2 library over TLS: the connection closed after \(answered) of \(requests.count) answers")))
        }
    }

    /// Requests per second on one connection to `host:port`, `streams` at a time, from the connect
    /// (as the transport's rate counts its connect too) to the last answer.
    static func rate(_ requests: [APNsRequest], host: String, port: Int, tls: TLSConfiguration, serverName: String,
                     streams: Int, initialWindowSize: Int) async throws -> Double {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        tls.requireApplicationProtocol = true
        let context = try TLSContext(tls)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let done = loop.makePromise(of: Double.self)
        let channel = try await ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        OpenSSLHandler(context: context, serverName: serverName),
                        NIOHTTP2Handler(mode: .client, connectionConfiguration: .apnsClient(initialWindowSize: initialWindowSize),
                                        streamConfiguration: .toleratingResets),
                        Client(requests: requests, authority: serverName, streams: streams, done: done),
                    ])
                }
            }
            .connect(host: host, port: port).get()
        defer { channel.close(promise: nil) }
        return try await done.futureResult.get()
    }
}
