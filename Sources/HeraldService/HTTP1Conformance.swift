import NIOCore
import NIOHTTP1

/// What RFC 9110 and 9112 ask of an HTTP/1.1 server that Hummingbird leaves
/// to the application, done on each connection below Hummingbird's
/// conversion to HTTP types (where the request's version is still known):
///
/// - `Expect: 100-continue` gets its `100 Continue` at once (curl sends the
///   header with every body over 1 KiB and otherwise waits a second before
///   sending the body); the header is then removed. Another expectation is
///   answered `417`.
/// - An HTTP/1.1 request without exactly one valid `Host` header is answered
///   `400` and the connection closed (RFC 9112, 3.2).
/// - An HTTP/1.0 request (or any with `Connection: close`) has its connection
///   closed once its answer is written, unless it asked for keep-alive.
///
/// - A request's header must be complete within the header deadline of its
///   first byte (``HeaderDeadline``).
///
/// Installed by ``HTTP1ConformanceInstaller``, which Hummingbird adds after its
/// codec; it puts this handler right after the HTTP/1 decoder and leaves.
final class HTTP1Conformance: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// For each request passed on and not yet answered, in order: close after its answer?
    var closeAfter: [Bool] = [] {
        didSet { deadline?.answersPending = closeAfter.count }
    }
    /// Dropping the rest of a request answered here (its body and end).
    var discarding = false
    /// The raw-byte side of the header deadline, below the decoder.
    let deadline: HeaderDeadline?

    init(deadline: HeaderDeadline? = nil) { self.deadline = deadline }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(var head):
            deadline?.headReceived()
            if let refusal = Self.refusal(head) {
                discarding = true
                answer(context, refusal.status, refusal.message)
                return
            }
            if head.version.major == 1, head.version.minor >= 1, let expect = head.headers.first(name: "expect") {
                head.headers.remove(name: "expect")
                var interim = HTTPResponseHead(version: head.version, status: .continue)
                interim.headers = [:]
                if expect.lowercased() == "100-continue" {
                    context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
                } else {
                    discarding = true
                    answer(context, .expectationFailed, "the only expectation this service meets is 100-continue, not \"\(expect)\"")
                    return
                }
            }
            closeAfter.append(!head.isKeepAlive)
            context.fireChannelRead(wrapInboundOut(.head(head)))
        case .body, .end:
            if case .end = part { deadline?.requestEnded() }
            if discarding {
                if case .end = part { discarding = false }
                return
            }
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data), !closeAfter.isEmpty, closeAfter.removeFirst() else {
            context.write(data, promise: promise)
            return
        }
        // The answer to a request that does not keep the connection: close once it is written.
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.cascade(to: promise)
        written.futureResult.whenComplete { _ in context.close(promise: nil) }
        context.writeAndFlush(data, promise: written)
    }

    /// A final answer written here, then the connection closed (what follows on it cannot be trusted).
    func answer(_ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ message: String) {
        let body = ByteBuffer(bytes: errorBody(message))
        var head = HTTPResponseHead(version: .http1_1, status: status)
        head.headers = ["content-type": "application/json", "content-length": String(body.readableBytes), "connection": "close"]
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    /// Why a request head is refused here, if it is.
    static func refusal(_ head: HTTPRequestHead) -> (status: HTTPResponseStatus, message: String)? {
        guard head.version.major == 1, head.version.minor >= 1 else { return nil }
        let hosts = head.headers["host"]
        guard hosts.count == 1 else {
            return (.badRequest, hosts.isEmpty ? "an HTTP/1.1 request needs a Host header" : "the request has \(hosts.count) Host headers; it may have one")
        }
        guard isValidHost(hosts[0]) else { return (.badRequest, "the Host header is not a host name or address with an optional port") }
        return nil
    }

    /// `uri-host [":" port]` (RFC 9110, 7.2): a registered name, an IPv4 address or a bracketed IPv6 literal.
    static func isValidHost(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        var hostEnd = bytes.count
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return false }
            let literal = bytes[1..<close]
            guard literal.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { return false }
            hostEnd = close + 1
            guard hostEnd == bytes.count || bytes[hostEnd] == UInt8(ascii: ":") else { return false }
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            hostEnd = colon
            guard hostEnd > 0 else { return false }
            let name = bytes[0..<hostEnd]
            guard name.allSatisfy(isNameByte) else { return false }
        } else {
            guard bytes.allSatisfy(isNameByte) else { return false }
        }
        if hostEnd < bytes.count {
            let port = bytes[(hostEnd + 1)...]
            guard port.count <= 5, port.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return false }
        }
        return true
    }

    /// Unreserved, sub-delims and percent signs: what a registered name may hold.
    static func isNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return Array("-._~%!$&'()*+,;=".utf8).contains(b)
        }
    }

    static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F"))
    }
}

/// The header deadline (RFC 9112, 9.5; slowloris): from the first byte of a
/// request, its header must be complete within `timeout`, however steadily
/// the bytes trickle (each byte resets the idle timeout, never this one).
/// When it passes the client gets `408` (or, with an earlier answer still
/// being written, just the close) and the connection is closed. Sits below
/// the HTTP/1 decoder, seeing raw bytes; ``HTTP1Conformance`` above it says
/// when a head is complete and when a request has ended.
final class HeaderDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let timeout: TimeAmount
    /// Between requests: the next byte starts a header, and the deadline.
    var awaitingHead = true
    var timer: Scheduled<Void>?
    /// Answers to earlier requests not yet written (set by ``HTTP1Conformance``).
    var answersPending = 0

    init(timeout: TimeAmount) { self.timeout = timeout }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if awaitingHead, timer == nil {
            timer = context.eventLoop.scheduleTask(in: timeout) { [self] in expired(context) }
        }
        context.fireChannelRead(data)
    }

    func headReceived() {
        awaitingHead = false
        timer?.cancel()
        timer = nil
    }

    func requestEnded() { awaitingHead = true }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func expired(_ context: ChannelHandlerContext) {
        timer = nil
        guard answersPending == 0 else {
            context.close(promise: nil)
            return
        }
        let seconds = Double(timeout.nanoseconds) / 1e9
        let body = errorBody("the request header was not complete within \(seconds.formatted()) s of its first byte (serve.headerTimeoutSeconds)")
        let head = "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: \(body.count)\r\nconnection: close\r\n\r\n"
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + body.count)
        buffer.writeString(head)
        buffer.writeBytes(body)
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in context.close(promise: nil) }
    }
}

/// Added by Hummingbird after its codec (`additionalChannelHandlers`): puts a
/// ``HeaderDeadline`` below the HTTP/1 encoder and decoder and an
/// ``HTTP1Conformance`` right after it, below the codec, and removes itself.
final class HTTP1ConformanceInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let headerTimeout: TimeAmount

    init(headerTimeout: TimeAmount) { self.headerTimeout = headerTimeout }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            let deadline = HeaderDeadline(timeout: headerTimeout)
            // Below the response encoder too: its 408 is bytes, written straight to the socket.
            if let encoder = try? pipeline.handler(type: HTTPResponseEncoder.self) {
                try? pipeline.addHandler(deadline, position: .before(encoder))
            } else {
                try? pipeline.addHandler(deadline, position: .before(decoder))
            }
            try? pipeline.addHandler(HTTP1Conformance(deadline: deadline), position: .after(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
