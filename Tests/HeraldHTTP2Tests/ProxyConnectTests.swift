import Foundation
import HeraldOpenSSL
import NIOCore
import NIOEmbedded
import Testing

@testable import HeraldHTTP2Transport

/// Records what reaches the handlers after the proxy handler.
final class Downstream: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    var active = 0
    var read: [UInt8] = []
    var errors: [any Error] = []
    func channelActive(context: ChannelHandlerContext) { active += 1 }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { read += unwrapInboundIn(data).readableBytesView }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
}

@Suite("HTTPS proxy CONNECT on an EmbeddedChannel")
struct ProxyConnectTests {
    func setup(_ proxy: HTTPProxy = HTTPProxy(host: "proxy.example", port: 3128)) throws -> (EmbeddedChannel, Downstream) {
        let down = Downstream()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([try ProxyConnectHandler(target: "api.push.apple.com", port: 443, proxy: proxy), down])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        return (channel, down)
    }

    @Test("CONNECT goes out first; the handlers after it see the connection only once the proxy says 200, then every byte after the answer")
    func tunnel() throws {
        let (channel, down) = try setup()
        let request = try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) }
        #expect(request == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n\r\n")
        #expect(down.active == 0)
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n"))
        #expect(down.active == 0)
        try channel.writeInbound(ByteBuffer(string: "Proxy-Agent: test\r\n\r\n\u{16}\u{03}"))
        #expect(down.active == 1 && down.read == [0x16, 0x03])
        try channel.writeInbound(ByteBuffer(bytes: [1, 2]))
        #expect(down.read == [0x16, 0x03, 1, 2])
        _ = try channel.finish()
    }

    @Test("credentials from the environment go in Proxy-Authorization; a 407 is permanent, a 502 is not")
    func refusals() throws {
        setenv("HERALD_TEST_PROXY_AUTH", "Basic dXNlcjpwYXNz", 1)
        let (channel, down) = try setup(HTTPProxy(host: "p", port: 1, authorization: .environment("HERALD_TEST_PROXY_AUTH")))
        let request = try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } ?? ""
        #expect(request.contains("Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"))
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"))
        #expect(down.active == 0 && (down.errors.first as? ProxyError)?.isPermanent == true)
        #expect("\(down.errors.first!)".contains("407"))

        let (other, down2) = try setup()
        _ = try other.readOutbound(as: ByteBuffer.self)
        try other.writeInbound(ByteBuffer(string: "HTTP/1.1 502 Bad Gateway\r\n\r\n"))
        #expect((down2.errors.first as? ProxyError)?.isPermanent == false)
    }

    @Test("a proxy that closes before answering, or answers with something that is not HTTP, is a clear error")
    func garbage() throws {
        let (channel, down) = try setup()
        try channel.writeInbound(ByteBuffer(string: "SSH-2.0-OpenSSH\r\n\r\n"))
        #expect("\(down.errors.first!)".contains("not an HTTP answer"))
        let (closing, down2) = try setup()
        try closing.close().wait()
        #expect("\(down2.errors.first!)".contains("closed the connection before answering"))
    }
}
