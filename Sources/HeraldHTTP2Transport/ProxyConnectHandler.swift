import HeraldOpenSSL
import NIOCore

/// Why an HTTPS proxy did not open the tunnel.
public struct ProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    /// The proxy refused us (407, 403): another try would end the same way.
    public let isPermanent: Bool
    public var description: String { message }
}

/// Opens a tunnel through an HTTPS proxy: on connect it sends
/// `CONNECT host:port HTTP/1.1`, holds the connection's activation from the
/// handlers after it (TLS must not start before the tunnel is up), reads the
/// proxy's answer, and on `2xx` steps aside: the handlers after it then see the
/// connection become active, and every byte after the answer.
final class ProxyConnectHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let target: String
    let proxy: HTTPProxy
    let credentials: String?
    var answer: [UInt8] = []
    var done = false

    /// The answer's head is a status line and a few headers; more is not a proxy speaking HTTP.
    static let maxHead = 16 << 10

    init(target host: String, port: Int, proxy: HTTPProxy) throws(TLSError) {
        target = hostAndPort(host, port)
        self.proxy = proxy
        credentials = try proxy.authorization?.read()
    }

    func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let credentials { request += "Proxy-Authorization: \(credentials)\r\n" }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else {
            context.fireChannelRead(data)
            return
        }
        answer += unwrapInboundIn(data).readableBytesView
        guard let end = Self.endOfHead(answer) else {
            if answer.count > Self.maxHead { fail(context, ProxyError(message: "proxy \(proxy): no HTTP answer to CONNECT", isPermanent: false)) }
            return
        }
        let statusLine = String(decoding: answer.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            fail(context, ProxyError(message: "proxy \(proxy): not an HTTP answer to CONNECT: \(statusLine.prefix(80))", isPermanent: false))
            return
        }
        guard (200..<300).contains(status) else {
            fail(context, ProxyError(
                message: "proxy \(proxy) refused CONNECT \(target): \(statusLine.prefix(120))",
                isPermanent: status == 407 || status == 403))
            return
        }
        done = true
        let rest = answer[end...]
        answer = []
        context.fireChannelActive()
        if !rest.isEmpty { context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: rest))) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { context.fireErrorCaught(ProxyError(message: "proxy \(proxy) closed the connection before answering CONNECT", isPermanent: false)) }
        context.fireChannelInactive()
    }

    func fail(_ context: ChannelHandlerContext, _ error: ProxyError) {
        done = true
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// The index after the blank line ending the answer's head, if it has arrived.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 { return i + 1 }
        return nil
    }
}
