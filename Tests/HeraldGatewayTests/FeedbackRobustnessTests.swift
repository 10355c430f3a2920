import Foundation
import HeraldBinary
import HeraldCore
import HeraldGateway
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import NIOCore
import NIOPosix
import Testing

/// Writes `bytes` once the TLS session is up, then closes: a feedback service that misbehaves on purpose.
final class WriteAndClose: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSEvent {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The feedback client never loses tuples the service already sent, and never takes a non-token (issue 12, item 6).
@Suite("Feedback service: torn streams and tokens that are not tokens", .serialized)
struct FeedbackRobustnessTests {
    let certs = sharedCertificates

    func fetch(_ bytes: [UInt8]) async throws -> Result<[FeedbackEntry], FeedbackIncomplete> {
        let server = try await fakeGateway(certs) { WriteAndClose(bytes) }
        defer { Task { try? await server.close() } }
        let tls = try TLSContext(.client(identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey),
                                         trust: .caFile(certs.caCertificate)))
        let client = FeedbackClient(host: "127.0.0.1", port: server.localAddress!.port!, tls: tls, serverName: "localhost")
        do { return .success(try await client.fetchFeedback()) } catch let e as FeedbackIncomplete { return .failure(e) }
    }

    static func tuple(_ token: [UInt8], at time: UInt32) -> [UInt8] {
        [UInt8(time >> 24), UInt8((time >> 16) & 255), UInt8((time >> 8) & 255), UInt8(time & 255),
         UInt8(token.count >> 8), UInt8(token.count & 255)] + token
    }

    @Test("a stream torn after one complete tuple: the tuple is kept, the problem named")
    func torn() async throws {
        let good = [UInt8](repeating: 0x0A, count: 32)
        let bytes = Self.tuple(good, at: 1_700_000_000) + Array(Self.tuple(good, at: 5).prefix(20))
        guard case .failure(let e) = try await fetch(bytes) else { Issue.record("a torn stream was accepted"); return }
        #expect(e.entries.map(\.timestamp) == [1_700_000_000])
        #expect(e.description.contains("1 complete tuples"))
    }

    @Test("a 65,535-byte token (issue 34, item 7): that tuple skipped and named, the tuples before and after it kept")
    func hugeToken() async throws {
        let good = [UInt8](repeating: 0x0B, count: 32)
        let bytes = Self.tuple(good, at: 9) + Self.tuple([UInt8](repeating: 1, count: 65_535), at: 10) + Self.tuple(good, at: 11)
            + Self.tuple([UInt8](repeating: 2, count: 31), at: 12) + Self.tuple(good, at: 13)
        let server = try await fakeGateway(certs) { WriteAndClose(bytes) }
        defer { Task { try? await server.close() } }
        let tls = try TLSContext(.client(identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey),
                                         trust: .caFile(certs.caCertificate)))
        let client = FeedbackClient(host: "127.0.0.1", port: server.localAddress!.port!, tls: tls, serverName: "localhost")
        let fetched = try await client.fetch()
        #expect(fetched.entries.map(\.timestamp) == [9, 11, 13])
        #expect(fetched.skipped.count == 2)
        #expect(fetched.skipped.first?.contains("tuple 2") == true && fetched.skipped.first?.contains("65535 bytes") == true, "\(fetched.skipped)")
        #expect(fetched.skipped.last?.contains("tuple 4") == true && fetched.skipped.last?.contains("31 bytes") == true)
    }

    @Test("a clean stream: every tuple, no error")
    func clean() async throws {
        let bytes = (0..<3).flatMap { Self.tuple([UInt8](repeating: UInt8($0 + 1), count: 32), at: UInt32($0)) }
        guard case .success(let entries) = try await fetch(bytes) else { Issue.record("a clean stream failed"); return }
        #expect(entries.count == 3)
    }
}
