import HeraldBinary
import HeraldCore
import NIOCore
import NIOPosix
import Synchronization

/// The binary interface's transport: persistent TLS connections to the APNs
/// gateway (or the simulator), with resend after errors.
///
/// **What happens to each notification.** It is written, in a batch of
/// frames, on one of `connections` persistent connections, with a
/// per-connection identifier patched into its frame. The connection keeps it
/// until it is known accepted:
/// - an error response naming a later notification, or status 10 naming it or
///   a later one, proves the gateway took it → `accepted`;
/// - an error response naming it → `rejected(status)`; every notification
///   written after it was discarded by the gateway and is written again, in
///   order, on a fresh connection;
/// - status 10 (shutdown): everything after the named identifier is resent;
/// - `acceptAfter` passes after its bytes went to the network with no error
///   for it or an earlier one → `accepted` (the binary interface never says
///   "accepted"; this is the only meaning the word can have here);
/// - the connection closes with no error response → it is resent
///   (**at least once**: the gateway may have taken it before the close, so a
///   device may see it twice; each such close halves what may be in flight,
///   and a streak of `maxSilentCloses` with nothing confirmed fails the one
///   notification left in flight);
/// - connection attempts keep failing (with exponential backoff and jitter),
///   or TLS refuses the gateway or our certificate → `failed`, naming why.
///
/// **Shutdown.** ``finish(outcomes:)`` writes what is queued, then writes a
/// probe the gateway is certain to reject (an all-zero token with no payload);
/// its error response proves every notification before it was processed.
/// Whatever is still unconfirmed after `drainTimeout` fails.
///
/// No thread of Swift's cooperative pool blocks: the connections live on
/// SwiftNIO event loops and OpenSSL works on memory buffers.
public final class GatewayTransport: Transport {
    public let configuration: GatewayConfiguration
    public let statistics = GatewayStatistics()
    let tls: TLSContext
    let links: [GatewayLink]
    let gate: FlowGate

    /// Reads the TLS files (certificate, key, CA) now, so problems show before anything is sent.
    public init(configuration: GatewayConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(TLSError) {
        guard configuration.tls.role == .client else { throw TLSError(.configuration, "the gateway transport needs a client TLS configuration") }
        guard configuration.connections >= 1 else { throw TLSError(.configuration, "connections must be at least 1") }
        self.configuration = configuration
        self.tls = try TLSContext(configuration.tls)
        self.gate = FlowGate(limit: configuration.maxQueued)
        var links: [GatewayLink] = []
        for i in 0..<configuration.connections {
            links.append(GatewayLink(index: i, loop: group.next(), configuration: configuration, tls: tls, gate: gate, statistics: statistics))
        }
        self.links = links
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var items: [GatewayItem] = []
        items.reserveCapacity(batch.count)
        var unframed: [OutcomeRecord] = []
        for e in batch {
            guard let frame = e.frame else {
                unframed.append(e.record(.failed("gateway: the notification was not framed (no frame stage)")))
                continue
            }
            items.append(GatewayItem(sequence: e.sequence, line: e.line, id: e.request.id, token: e.request.token,
                                     frame: frame.bytes, identifierOffset: frame.identifierOffset))
        }
        outcomes.record(unframed)
        guard !items.isEmpty else { return }
        await gate.acquire(items.count)
        var best = links[0]
        var bestLoad = Int.max
        for link in links {
            let load = link.queuedCount.load(ordering: .relaxed)
            if load < bestLoad { best = link; bestLoad = load }
        }
        best.enqueue(items, ledger: outcomes)
    }

    public func finish(outcomes: OutcomeLedger) async {
        let timeout = configuration.drainTimeout
        let drains = links.map { $0.drain(timeout: timeout) }
        for d in drains { try? await d.get() }
    }
}
