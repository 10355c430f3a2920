import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import HeraldService

/// The service's HTTP/1 handlers on an `EmbeddedChannel` laid out as
/// Hummingbird lays a connection out (encoder, decoder, then what it adds),
/// with the loop's clock moved by hand.
@Suite("HTTP/1 conformance on EmbeddedChannel: the header deadline")
struct HTTP1ConformanceTests {
    func channel(headerTimeout: TimeAmount = .seconds(1)) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
        try channel.pipeline.syncOperations.addHandler(HTTP1ConformanceInstaller(headerTimeout: headerTimeout))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    func send(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeInbound(channel.allocator.buffer(string: text))
    }

    /// Everything written to the socket so far, as text.
    func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let b) = data { text += String(buffer: b) }
        }
        return text
    }

    @Test("a header trickled past the deadline of its first byte: 408 with an error text, then the close, though bytes kept coming")
    func trickled() throws {
        let channel = try channel()
        try send(channel, "GET /healthz HTTP/1.1\r\nHo")
        for _ in 0..<4 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
            try send(channel, "s")
        }
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(250))
        let out = try written(channel)
        #expect(out.hasPrefix("HTTP/1.1 408 Request Timeout\r\n") && out.contains(#"{"error":"the request header was not complete"#), "\(out)")
        #expect(!channel.isActive)
    }

    @Test("a header completed in time: the deadline is cancelled, nothing is written, the request goes on; the next request's deadline starts at its own first byte, not while the connection idles")
    func inTime() throws {
        let channel = try channel()
        try send(channel, "GET /healthz HTTP/1.1\r\nHost: a\r\n")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
        try send(channel, "\r\n")
        guard case .head(let head)? = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no head passed on")
            return
        }
        #expect(head.uri == "/healthz")
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(try written(channel).isEmpty && channel.isActive)
        // Answered (the 408 is only written with no earlier answer still owed).
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-length": "0"])))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        #expect(try written(channel).hasPrefix("HTTP/1.1 200 OK"))
        // The second request starts 30 s later; its header takes 1.2 s.
        try send(channel, "GET /readyz HTTP/1.1\r\n")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        try send(channel, "Host: a\r\n")
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        #expect(try written(channel).contains("408") && !channel.isActive)
    }

    @Test("Expect: 100-continue gets its 100 at once, before any body; another expectation gets 417 and the close")
    func expect() throws {
        let channel = try channel()
        try send(channel, "POST /v1/notifications HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        #expect(try written(channel) == "HTTP/1.1 100 Continue\r\n\r\n")
        let other = try self.channel()
        try send(other, "GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n")
        #expect(try written(other).hasPrefix("HTTP/1.1 417 Expectation Failed\r\n") && !other.isActive)
    }
}
