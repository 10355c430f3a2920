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
/// **Many cores.** The connections are spread over the event loop group's
/// loops: one ``HTTP2Driver`` (and delivery machine) a loop, up to one a
/// connection, each with its share of the connections; every batch goes to the
/// driver holding fewest notifications. The drivers share one provider token.
/// With ``HTTP2TransportConfiguration/fastLaneConnection``, one more driver of one connection
/// takes the fast lane's notifications, as many as its streams hold at once (the rest go with the
/// bulk lane's), and the others the bulk lane's.
///
/// No thread of Swift's cooperative pool blocks: the connections live on
/// SwiftNIO event loops and OpenSSL works on memory buffers.
public final class HTTP2Transport: Transport, TransportHealthReporting, TransportReporting, WireDescribing, LaneWindowing {
    public var wire: TransportWire { .http2 }

    public let configuration: HTTP2TransportConfiguration
    let builder: APNsRequestBuilder
    /// One a loop, each driving its share of the connections (with a fast-lane connection, the
    /// last is its driver).
    let drivers: [HTTP2Driver]
    /// The driver of the fast lane's own connection, if configured (the last of ``drivers``).
    let fastDriver: HTTP2Driver?
    /// The drivers of the bulk lane (every driver, without a fast-lane connection).
    let bulkDrivers: ArraySlice<HTTP2Driver>
    let gate: FlowGate
    let tokens: SharedProviderTokens?
    /// For the bodies of requests prepared on the sending task (``PreparedRequest``).
    let allocator = ByteBufferAllocator()

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
        let gate = FlowGate(limit: configuration.maxQueued)
        self.gate = gate
        let tls = try TLSContext(tlsConfiguration, logger: configuration.logger)
        let tokens = configuration.sharedTokens ?? configuration.providerToken.map { SharedProviderTokens(ProviderTokens(key: $0)) }
        self.tokens = tokens
        // As many drivers as loops, at most one a connection; connections dealt out evenly.
        let total = configuration.delivery.connections
        let count = min(total, Array(group.makeIterator()).count)
        var drivers = (0..<count).map { i in
            var shard = configuration
            shard.delivery.connections = total / count + (i < total % count ? 1 : 0)
            return HTTP2Driver(index: i, loop: group.next(), configuration: shard, tls: tls, gate: gate, tokens: tokens)
        }
        bulkDrivers = drivers[...]
        if configuration.fastLaneConnection {
            // The group's next loop: one the bulk lane's drivers do not use, while the group has more loops than they.
            var own = configuration
            own.delivery.connections = 1
            let fast = HTTP2Driver(index: count, loop: group.next(), configuration: own, tls: tls, gate: gate, tokens: tokens)
            drivers.append(fast)
            fastDriver = fast
        } else {
            fastDriver = nil
        }
        self.drivers = drivers
    }

    /// What the connections did, every driver's summed.
    /// Half of `maxQueued` (8,192 by default): the bulk lane never fills the transport's window, so a
    /// fast-lane batch never waits there for its room; well above what a connection's streams hold.
    public var bulkWindow: Int { max(1, configuration.maxQueued / 2) }

    public var statistics: HTTP2TransportStatistics {
        var total = HTTP2TransportStatistics()
        var outages: [Duration] = []
        var asked = 0
        for d in drivers {
            let s = d.published.withLock { $0 }
            total.add(s)
            if let since = s.outageSince { outages.append(since) }
            if s.delivery.connections > 0 { asked += 1 }
        }
        total.tokensSigned = tokens?.signed ?? 0
        // No connection has been ready since the latest of the drivers' outages began, if every driver
        // that has tried to connect has one (a fast-lane connection nothing was sent on says nothing).
        total.outageSince = !outages.isEmpty && outages.count >= asked ? outages.max() : nil
        return total
    }

    public var counters: [(name: String, value: Int)] {
        let s = statistics
        return [("handshakes", s.handshakes)] + s.delivery.counters + [("provider_tokens_signed", s.tokensSigned)]
    }

    /// Unavailable after a refused credential, or while notifications wait and
    /// no connection has been ready for a second. (With nothing to send no
    /// connection is tried, so an old outage says nothing about now.)
    /// With several drivers: unavailable once every one of them is (its own
    /// outage, as above), for as long as the shortest of their outages.
    public var health: TransportHealth {
        var shortest: (seconds: Int, error: String?)?
        for d in drivers {
            let s = d.published.withLock { $0 }
            if let failure = s.failure { return .unavailable(failure) }
            // A driver never asked to connect (a fast-lane connection nothing was sent on) says nothing.
            if s.delivery.connections == 0 && s.outageSince == nil { continue }
            // While attempts fail, whether or not anything waits (after giving up on an endpoint never
            // reached nothing does): the last error is the news. With no outage and no work it is ready.
            guard let since = s.outageSince, gate.held > 0 || s.lastError != nil, d.now - since >= .seconds(1) else { return .ready }
            let seconds = Int((d.now - since).inSeconds)
            if shortest == nil || seconds < shortest!.seconds { shortest = (seconds, s.lastError ?? shortest?.error) }
        }
        guard let shortest else { return .ready }
        return .unavailable("no connection to \(configuration.endpoint) has been ready for \(shortest.seconds) s"
            + (shortest.error.map { ": \($0)" } ?? ""))
    }

    /// Times from opening a stream to its answer: (p50, p90, p99, max) in milliseconds.
    public func latencyPercentiles() async -> (p50: Double, p90: Double, p99: Double, max: Double) {
        var h = LatencyHistogram()
        for d in drivers {
            if let part = try? await d.loop.submit({ d.machine.latency }).get() { h.add(part) }
        }
        return (h.percentileMilliseconds(0.5), h.percentileMilliseconds(0.9), h.percentileMilliseconds(0.99), Double(h.maxNanoseconds) / 1_000_000)
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var (items, dropped) = builder.items(for: batch)
        if !dropped.isEmpty { outcomes.record(dropped) }
        guard !items.isEmpty else { return }
        // The header blocks and bodies built here, on the sending task: the event loop that opens
        // the streams is what limits a connection (issue 29), and this is work it need not do.
        let authority = configuration.serverName ?? configuration.host
        for i in items.indices { items[i].prepared = PreparedRequest(items[i].request, authority: authority, allocator: allocator) }
        await gate.acquire(items.count)
        guard let fastDriver else { return enqueue(items, on: bulkDrivers, outcomes: outcomes) }
        let fastCount = items.count { $0.lane == .fast }
        guard fastCount > 0 else { return enqueue(items, on: bulkDrivers, outcomes: outcomes) }
        // The fast-lane connection takes what its streams hold at once, and no more: past that the
        // fast lane spills onto the bulk lane's connections (where it still goes before the bulk
        // lane), so a campaign sent with no priority (the fast lane's) is not held to one connection.
        // While its latest connection attempt failed, it takes nothing more than what it holds (once
        // that has ended, the next notification tries it again).
        let held = fastDriver.queuedCount.load(ordering: .relaxed)
        let failing = fastDriver.published.withLock { $0.lastError != nil }
        let room = failing && held > 0 ? 0 : fastDriver.streamLimit.load(ordering: .relaxed) - held
        // A batch is usually of one lane, and a fast-lane one fits: split only when it does not.
        if fastCount == items.count && fastCount <= room { return fastDriver.enqueue(items, ledger: outcomes) }
        var fast: [HTTP2Item] = [], rest: [HTTP2Item] = []
        let fastTaken = min(fastCount, max(room, 0))
        fast.reserveCapacity(fastTaken)
        rest.reserveCapacity(items.count - fastTaken)
        for item in items {
            if item.lane == .fast && fast.count < room { fast.append(item) } else { rest.append(item) }
        }
        if !fast.isEmpty { fastDriver.enqueue(fast, ledger: outcomes) }
        if !rest.isEmpty { enqueue(rest, on: bulkDrivers, outcomes: outcomes) }
    }

    /// Hands `items` to the one of `candidates` holding fewest notifications.
    func enqueue(_ items: consuming [HTTP2Item], on candidates: ArraySlice<HTTP2Driver>, outcomes: OutcomeLedger) {
        let driver = candidates.min { $0.queuedCount.load(ordering: .relaxed) < $1.queuedCount.load(ordering: .relaxed) }!
        driver.enqueue(items, ledger: outcomes)
    }

    public func finish(outcomes: OutcomeLedger) async {
        let drains = drivers.map { $0.drain(timeout: configuration.drainTimeout) }
        for d in drains { try? await d.get() }
    }

    /// A second signal: everything held fails now, and so does anything handed over later.
    public func abandon(_ reason: String) {
        gate.open()
        for d in drivers { d.abandon(reason) }
    }

    /// A signal: `send` stops waiting for room, and the drain deadline starts now.
    public func shutdownRequested() {
        gate.open()
        for d in drivers { _ = d.stop(timeout: configuration.drainTimeout) }
    }
}
