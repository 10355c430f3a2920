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
/// Installed by ``HTTP1ConformanceInstaller``, which Hummingbird adds after its
/// codec; it puts this handler right after the HTTP/1 decoder and leaves.
final class HTTP1Conformance: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// For each request passed on and not yet answered, in order: close after its answer?
    var closeAfter: [Bool] = []
    /// Dropping the rest of a request answered here (its body and end).
    var discarding = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(var head):
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

/// Added by Hummingbird after its codec (`additionalChannelHandlers`): puts an
/// ``HTTP1Conformance`` right after the HTTP/1 decoder, below the codec, and removes itself.
final class HTTP1ConformanceInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            try? pipeline.addHandler(HTTP1Conformance(), position: .after(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
