import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import NIOCore
import NIOEmbedded
import Testing

/// A client and a server OpenSSLHandler on two embedded channels, bytes carried between them by hand.
struct EmbeddedTLSPair {
    let client = EmbeddedChannel()
    let server = EmbeddedChannel()

    init() throws {
        let certs = sharedCertificates
        let serverTLS = try TLSContext(.server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: nil))
        let clientTLS = try TLSContext(.client(identity: nil, trust: .caFile(certs.caCertificate)))
        try server.pipeline.syncOperations.addHandler(try OpenSSLHandler(context: serverTLS))
        try client.pipeline.syncOperations.addHandler(try OpenSSLHandler(context: clientTLS, serverName: "localhost"))
    }

    /// Everything `channel` wrote to the network since the last call.
    static func written(_ channel: EmbeddedChannel) throws -> ByteBuffer {
        var all = ByteBuffer()
        while var b = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&b) }
        return all
    }

    /// Carries bytes both ways until neither side has anything to say.
    func settle() throws {
        for _ in 0..<20 {
            let toServer = try Self.written(client), toClient = try Self.written(server)
            if toServer.readableBytes == 0 && toClient.readableBytes == 0 { return }
            if toServer.readableBytes > 0 { try server.writeInbound(toServer) }
            if toClient.readableBytes > 0 { try client.writeInbound(toClient) }
        }
    }

    func connect() throws {
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
        try settle()
        // Both handshake events fired; nothing was read yet.
        while try server.readInbound(as: ByteBuffer.self) != nil {}
    }

    /// TLS records in `ciphertext`: (content type, length) of each, in order.
    static func records(_ ciphertext: ByteBuffer) -> [(type: UInt8, length: Int)] {
        var b = ciphertext, out: [(UInt8, Int)] = []
        while b.readableBytes >= 5, let type = b.readInteger(as: UInt8.self), b.readInteger(as: UInt16.self) != nil, let length = b.readInteger(as: UInt16.self) {
            out.append((type, Int(length)))
            b.moveReaderIndex(forwardBy: min(Int(length), b.readableBytes))
        }
        return out
    }
}

@Suite("TLS on OpenSSL: small writes gathered into records")
struct TLSCoalescingTests {
    @Test("two hundred small writes and one flush: one TLS record, not two hundred; a write over 16 KiB goes apart; the server reads every byte in order; every promise succeeds")
    func gathered() throws {
        let pair = try EmbeddedTLSPair()
        try pair.connect()
        var expected: [UInt8] = []
        var promises: [EventLoopFuture<Void>] = []
        func write(_ bytes: [UInt8]) {
            expected += bytes
            let p = pair.client.eventLoop.makePromise(of: Void.self)
            promises.append(p.futureResult)
            pair.client.write(ByteBuffer(bytes: bytes), promise: p)
        }
        for i in 0..<200 { write(Array(repeating: UInt8(i), count: 30)) }  // 6,000 bytes
        write((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })  // over the limit: records of its own
        for i in 0..<10 { write(Array(repeating: UInt8(200 + i), count: 50)) }
        pair.client.flush()
        let ciphertext = try EmbeddedTLSPair.written(pair.client)
        let data = EmbeddedTLSPair.records(ciphertext).filter { $0.type == 23 }
        // 6,000 gathered; 20,000 as OpenSSL cuts it (16,384 + 3,616); the last 500 gathered: 4 records (each with its tag and type byte).
        #expect(data.count == 4, "\(data)")
        try pair.server.writeInbound(ciphertext)
        var got: [UInt8] = []
        while var b = try pair.server.readInbound(as: ByteBuffer.self) { got += b.readBytes(length: b.readableBytes) ?? [] }
        #expect(got == expected)
        pair.client.embeddedEventLoop.run()
        for f in promises { #expect(throws: Never.self) { try f.wait() } }
    }

    @Test("writes that add up to more than 16 KiB: gathered up to it, then a new record; nothing lost or reordered")
    func overTheLimit() throws {
        let pair = try EmbeddedTLSPair()
        try pair.connect()
        var expected: [UInt8] = []
        for i in 0..<100 {
            let bytes = (0..<500).map { UInt8(truncatingIfNeeded: $0 &+ i) }
            expected += bytes
            pair.client.write(ByteBuffer(bytes: bytes), promise: nil)
        }
        pair.client.flush()
        let ciphertext = try EmbeddedTLSPair.written(pair.client)
        // 50,000 bytes in writes of 500: 32 a record (16,000), so 4 records (16,000 x 3 + 2,000).
        #expect(EmbeddedTLSPair.records(ciphertext).filter { $0.type == 23 }.count == 4)
        try pair.server.writeInbound(ciphertext)
        var got: [UInt8] = []
        while var b = try pair.server.readInbound(as: ByteBuffer.self) { got += b.readBytes(length: b.readableBytes) ?? [] }
        #expect(got == expected)
    }
}
