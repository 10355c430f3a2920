import NIOCore
import NIOHTTP2

/// Keeps a connection's inbound flow-control window open. Without a stream
/// multiplexer `NIOHTTP2Handler` leaves connection-level WINDOW_UPDATEs to the
/// handler after it: a peer that sent 64 KiB of DATA would otherwise wait for
/// ever. Streams need nothing: each carries one small body, far below its window.
package struct ConnectionWindow: Sendable {
    /// The window kept open (HTTP/2 starts every connection at 65,535).
    package let target: Int

    package init(target: Int = 1 << 20) { self.target = target }

    /// The WINDOW_UPDATE to send after `event`, if the connection's window fell below half.
    package func update(after event: Any) -> HTTP2Frame? {
        guard let e = event as? NIOHTTP2WindowUpdatedEvent else { return nil }
        return update(after: e)
    }

    /// The WINDOW_UPDATE to send after `e`, if the connection's window fell below half.
    package func update(after e: NIOHTTP2WindowUpdatedEvent) -> HTTP2Frame? {
        guard e.streamID == .rootStream, let size = e.inboundWindowSize, size <= target / 2 else { return nil }
        return HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: target - size))
    }
}

extension NIOHTTP2Handler.StreamConfiguration {
    /// Up to 10,000 stream resets and stream errors in 10 ms (swift-nio-http2's default is 200
    /// in 30 s). Its limit guards a server against rapid-reset floods; between APNs and a
    /// provider, resets are answers (a server's to an unread body, a provider's to a request it
    /// gave up on), and cutting the connection over them would lose what is in flight. The count
    /// is of frames as they are read, and one read can hold thousands: 10,000 in 100 ms was
    /// reached against nginx at 80,000 requests a second (`ExcessiveRSTFrames`, stop 68). The
    /// library keeps room for the count's timestamps (80 KB a connection).
    package static var toleratingResets: Self {
        var c = Self()
        c.streamResetFrameRateLimit.maximumCount = 10_000
        c.streamResetFrameRateLimit.windowLength = .milliseconds(10)
        c.streamErrorRateLimit.maximumCount = 10_000
        c.streamErrorRateLimit.windowLength = .milliseconds(10)
        return c
    }
}
