import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import NIOCore
import NIOPosix
import Synchronization

/// The binary interface's transport: persistent TLS connections to the APNs
/// gateway (or the simulator), each driven by a ``DeliveryMachine``, the
/// same delivery rules the in-memory simulator transport runs.
///
/// **What happens to each notification.** It is written, in a batch of
/// frames, on one of `connections` persistent connections, with a
/// per-connection identifier patched into its frame, and kept until the
/// gateway's answer settles it:
/// - an error response naming a later notification, status 10 naming it or a
///   later one, or the answer to a *probe* (a notification every gateway
///   rejects, written once a connection holds enough, has waited long enough,
///   or has nothing more to write) → `accepted`: the gateway took it;
/// - an error response naming it → `rejected(status)`; everything written
///   after it was discarded by the gateway and is written again, in order, on
///   a fresh connection;
/// - the connection ends with no answer (closed, reset, stalled past
///   ``DeliveryPolicy/answerTimeout``) → written again as a *suspect*, on
///   connections that carry half as many before their probe each time; only
///   these may reach a device twice, and they are counted
///   (``DeliveryStatistics/resentAfterSilentClose``); a notification alone in
///   flight on ``DeliveryPolicy/maxSilentCloses`` such closes → `failed`;
/// - the gateway stays unreachable for ``DeliveryPolicy/maxOutage`` (retried
///   with backoff all along), or TLS refuses the gateway or our certificate → `failed`, naming why.
///
/// **Shutdown.** ``finish(outcomes:)`` writes what is queued and has it
/// confirmed; whatever is still unconfirmed after `drainTimeout` fails.
///
/// No thread of Swift's cooperative pool blocks: the connections live on
/// SwiftNIO event loops and OpenSSL works on memory buffers.
public final class GatewayTransport: Transport {
    public let configuration: GatewayConfiguration
    let tls: TLSContext
    let drivers: [GatewayDriver]
    let gate: FlowGate

    /// Reads the TLS files (certificate, key, CA) now, so problems show before anything is sent.
    public init(configuration: GatewayConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(TLSError) {
        guard configuration.tls.role == .client else { throw TLSError(.configuration, "the gateway transport needs a client TLS configuration") }
        guard configuration.connections >= 1 else { throw TLSError(.configuration, "connections must be at least 1") }
        self.configuration = configuration
        self.tls = try TLSContext(configuration.tls, logger: configuration.logger)
        self.gate = FlowGate(limit: configuration.maxQueued)
        let tls = self.tls
        let gate = self.gate
        self.drivers = (0..<configuration.connections).map { i in
            GatewayDriver(index: i, loop: group.next(), configuration: configuration, tls: tls, gate: gate)
        }
    }

    /// What the connections did, summed.
    public var statistics: GatewayStatistics {
        var total = GatewayStatistics()
        for d in drivers { total.add(d.published.withLock { $0 }) }
        return total
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var items: [DeliveryItem] = []
        items.reserveCapacity(batch.count)
        let unframed = DeliveryItem.items(of: batch, unframed: "gateway: the notification was not framed (no frame stage)") { items.append($0) }
        outcomes.record(unframed)
        guard !items.isEmpty else { return }
        await gate.acquire(items.count)
        let driver = drivers.min { $0.queuedCount.load(ordering: .relaxed) < $1.queuedCount.load(ordering: .relaxed) }!
        driver.enqueue(items, ledger: outcomes)
    }

    public func finish(outcomes: OutcomeLedger) async {
        let timeout = configuration.drainTimeout
        let drains = drivers.map { $0.drain(timeout: timeout) }
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

/// What the gateway transport did: the delivery machines' counters and the TLS sessions'.
@dynamicMemberLookup
public struct GatewayStatistics: Sendable, Hashable {
    public var delivery = DeliveryStatistics()
    /// This connection slot's outage: since when its connection attempts have failed in a row (machine time), and the last error.
    public var outageSince: Duration?
    public var lastError: String?
    /// The TLS version of the latest handshake (e.g. "TLSv1.3").
    public var protocolVersion: String?
    /// Handshakes that resumed an earlier TLS session.
    public var resumedHandshakes = 0

    public init() {}

    public subscript<T>(dynamicMember path: KeyPath<DeliveryStatistics, T>) -> T { delivery[keyPath: path] }

    mutating func add(_ o: GatewayStatistics) {
        delivery.add(o.delivery)
        protocolVersion = o.protocolVersion ?? protocolVersion
        resumedHandshakes += o.resumedHandshakes
    }
}

extension GatewayTransport: TransportReporting {
    public var counters: [(name: String, value: Int)] { statistics.delivery.counters }
}

extension GatewayTransport: TransportHealthReporting {
    /// Unavailable while every connection slot has failed to connect, in a
    /// row, for at least a second, whether or not notifications wait (after
    /// giving up on a gateway it never reached nothing does, and the last
    /// error is still the news); the reason is the last error. A slot's outage
    /// ends only with a connection, so a transport that never had one is ready.
    public var health: TransportHealth {
        var reason: String?
        for d in drivers {
            let s = d.published.withLock { $0 }
            guard let since = s.outageSince, d.now - since >= .seconds(1) else { return .ready }
            reason = s.lastError
        }
        return drivers.isEmpty ? .ready : .unavailable(reason ?? "the gateway \(configuration.host):\(configuration.port) cannot be reached")
    }
}
