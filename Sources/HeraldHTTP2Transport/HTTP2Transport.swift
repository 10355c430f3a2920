import HeraldCore
import HeraldHTTP2
import HeraldOpenSSL
import NIOCore
import NIOPosix

/// APNs' HTTP/2 provider API as a transport: persistent HTTP/2 connections over
/// TLS (OpenSSL, ALPN `h2`), driven by the ``HTTP2DeliveryMachine``, the same
/// delivery rules the in-memory HTTP/2 simulator transport runs.
///
/// **What happens to each notification.** It becomes a request
/// (``APNsRequestBuilder``: what APNs would refuse ends `dropped` here, with
/// the reason), goes out on a stream of one of `connections` connections
/// (never more streams than the connection's `SETTINGS_MAX_CONCURRENT_STREAMS`),
/// and APNs' answer decides it: `accepted`; `rejected` with the status and
/// reason (410s carry the time since which the token is dead, for the token
/// store); 429, 500, 503 and `Shutdown` sent again later; a refused credential
/// ends the run with one reason. A GOAWAY's unprocessed streams go out on
/// another connection; a stream left unanswered past the request timeout, or
/// on a connection that died, is sent again and counted as a possible duplicate.
///
/// Token authentication signs one JWT for every connection and re-signs it
/// every 40 minutes, never per request.
///
/// No thread of Swift's cooperative pool blocks: the connections live on one
/// SwiftNIO event loop and OpenSSL works on memory buffers.
public final class HTTP2Transport: Transport, TransportHealthReporting, TransportReporting, WireDescribing {
    public var wire: TransportWire { .http2 }

    public let configuration: HTTP2TransportConfiguration
    let builder: APNsRequestBuilder
    let driver: HTTP2Driver
    let gate: FlowGate

    /// Reads the TLS files now, so problems show before anything is sent.
    public init(configuration: HTTP2TransportConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(TLSError) {
        guard configuration.tls.role == .client else { throw TLSError(.configuration, "the HTTP/2 transport needs a client TLS configuration") }
        guard configuration.delivery.connections >= 1 else { throw TLSError(.configuration, "connections must be at least 1") }
        var tlsConfiguration = configuration.tls
        tlsConfiguration.applicationProtocols = ["h2"]
        tlsConfiguration.requireApplicationProtocol = true
        var configuration = configuration
        configuration.tls = tlsConfiguration
        self.configuration = configuration
        builder = APNsRequestBuilder(defaultTopic: configuration.defaultTopic)
        gate = FlowGate(limit: configuration.maxQueued)
        driver = HTTP2Driver(loop: group.next(), configuration: configuration, tls: try TLSContext(tlsConfiguration, logger: configuration.logger), gate: gate)
    }

    /// What the connections did.
    public var statistics: HTTP2TransportStatistics { driver.published.withLock { $0 } }

    public var counters: [(name: String, value: Int)] {
        let s = statistics
        return [("handshakes", s.handshakes)] + s.delivery.counters + [("provider_tokens_signed", s.tokensSigned)]
    }

    /// Unavailable after a refused credential, or while notifications wait and
    /// no connection has been ready for a second. (With nothing to send no
    /// connection is tried, so an old outage says nothing about now.)
    public var health: TransportHealth {
        let s = statistics
        if let failure = s.failure { return .unavailable(failure) }
        // While attempts fail, whether or not anything waits (after giving up on an endpoint never
        // reached nothing does): the last error is the news. With no outage and no work it is ready.
        if let since = s.outageSince, gate.held > 0 || s.lastError != nil, driver.now - since >= .seconds(1) {
            return .unavailable("no connection to \(driver.configuration.endpoint) has been ready for \(Int((driver.now - since).inSeconds)) s"
                + (s.lastError.map { ": \($0)" } ?? ""))
        }
        return .ready
    }

    /// Times from opening a stream to its answer: (p50, p90, p99, max) in milliseconds.
    public func latencyPercentiles() async -> (p50: Double, p90: Double, p99: Double, max: Double) {
        let h = (try? await driver.loop.submit { self.driver.latency }.get()) ?? LatencyHistogram()
        return (h.percentileMilliseconds(0.5), h.percentileMilliseconds(0.9), h.percentileMilliseconds(0.99), Double(h.maxNanoseconds) / 1_000_000)
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let (items, dropped) = builder.items(for: batch)
        if !dropped.isEmpty { outcomes.record(dropped) }
        guard !items.isEmpty else { return }
        await gate.acquire(items.count)
        driver.enqueue(items, ledger: outcomes)
    }

    public func finish(outcomes: OutcomeLedger) async {
        try? await driver.drain(timeout: configuration.drainTimeout).get()
    }

    /// A second signal: everything held fails now, and so does anything handed over later.
    public func abandon(_ reason: String) {
        gate.open()
        driver.abandon(reason)
    }

    /// A signal: `send` stops waiting for room, and the drain deadline starts now.
    public func shutdownRequested() {
        gate.open()
        _ = driver.stop(timeout: configuration.drainTimeout)
    }
}
