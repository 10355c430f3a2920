import HeraldBinary
import HeraldCore

/// The in-memory transport: writes frames to an ``APNsSimulator`` gateway
/// connection as bytes, reads its error responses, and ends every envelope in
/// exactly one outcome. `herald send`'s embedded default.
///
/// It behaves as a careful provider on the real binary interface does:
/// - Frames get per-connection identifiers (a wrapping sequence from 1,
///   patched in place through ``Frame/identifierOffset``) and are written
///   ``Options/framesPerWrite`` at a time into one reused buffer.
/// - Bookkeeping is an ``InFlightWindow``. On an error response the named
///   notification ends `rejected(status)`, the ones before it `accepted`, and
///   every one written after it is written again on a fresh connection. Status
///   10 (shutdown) names the last good notification: the ones after it are resent.
/// - A connection that closes with no error response leaves what was in
///   flight unknown: it is resent (at least once; the simulator may record
///   a duplicate, as APNs would deliver one), at most ``Options/maxAttempts``
///   times before it ends `failed`. Those notifications are resent one per
///   write, each followed by a wait for the gateway's answer, so a
///   notification that makes the gateway hang up (a bad one in the simple
///   format, which gets no error response) is isolated and does not take its
///   neighbours down with it.
/// - A notification is `accepted` at a quiet point: after
///   ``Options/writesPerCheck`` writes and at the end of each batch the
///   transport waits for the gateway's answer (``GatewayConnection/flush()``)
///   and, the connection still open, accepts the window.
/// - A partial write is finished; a read delay is waited out.
///
/// Envelopes without a frame end `failed`. The ledger balances: every envelope
/// handed to ``send(_:outcomes:)`` is recorded before it returns.
public actor SimulatorTransport: Transport {
    /// How the transport writes.
    public struct Options: Sendable, Hashable {
        /// The app the connections send for (store-and-forward is per app).
        public var topic = "default"
        /// Frames per write.
        public var framesPerWrite = 64
        /// Writes between quiet points (the transport also stops at the end of every batch).
        public var writesPerCheck = 4
        /// Times a notification may be caught in a connection lost without an
        /// error response before it ends `failed`.
        public var maxAttempts = 5
        public init(topic: String = "default", framesPerWrite: Int = 64, writesPerCheck: Int = 4, maxAttempts: Int = 5) {
            self.topic = topic
            self.framesPerWrite = max(1, framesPerWrite)
            self.writesPerCheck = max(1, writesPerCheck)
            self.maxAttempts = max(1, maxAttempts)
        }
    }

    /// What the transport saw.
    public struct Statistics: Sendable, Hashable {
        public var connections = 0
        public var writes = 0
        public var bytesWritten = 0
        public var errorResponses = 0
        /// Notifications written again (after an error, a shutdown or a lost connection).
        public var resent = 0
        /// Connections lost with no error response.
        public var lostConnections = 0
    }

    struct Pending: Sendable {
        var envelope: Envelope
        var attempts: Int
    }

    /// The simulated APNs behind the transport.
    public nonisolated let simulator: APNsSimulator
    public nonisolated let options: Options
    var connection: GatewayConnection?
    var window = InFlightWindow<Pending>()
    var responses = ErrorResponseDecoder()
    var queue: [Pending] = []
    var head = 0
    var buffer = WriteBuffer(capacity: 1 << 16)
    var records: [OutcomeRecord] = []
    /// How many notifications at the head of the queue to write one at a time (after an ambiguous loss).
    var careful = 0
    public private(set) var statistics = Statistics()

    public init(simulator: APNsSimulator, options: Options = Options()) {
        self.simulator = simulator
        self.options = options
    }

    /// A transport over a fresh simulator with the given payload limit; the
    /// listed tokens are invalid (status 8).
    public init(payloadLimit: Int = 2048, invalidTokens: Set<DeviceToken> = []) {
        let simulator = APNsSimulator(configuration: SimulatorConfiguration(payloadLimit: payloadLimit))
        for t in invalidTokens { simulator.markInvalid(t) }
        self.init(simulator: simulator)
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        for e in batch {
            if e.frame == nil {
                records.append(e.record(.failed("transport: the envelope has no frame")))
            } else {
                queue.append(Pending(envelope: e, attempts: 0))
            }
        }
        await drain()
        let done = records
        records.removeAll(keepingCapacity: true)
        outcomes.record(done)
    }

    public func finish(outcomes: OutcomeLedger) async {
        await drain()
        if let c = connection {
            handle(c.endOfInput())
            connection = nil
        }
        // Nothing can be in flight after drain; be safe rather than lose anything.
        for p in window.reset() { records.append(p.envelope.record(.failed("transport closed before APNs answered"))) }
        let done = records
        records.removeAll()
        outcomes.record(done)
    }

    /// Writes everything queued and waits for every written notification's fate.
    func drain() async {
        var writesSinceCheck = 0
        while head < queue.count || !window.isEmpty {
            guard head < queue.count else {
                check()
                writesSinceCheck = 0
                continue
            }
            let c = openIfNeeded()
            buffer.clear()
            let single = careful > 0
            let end = single ? head + 1 : min(head + options.framesPerWrite, queue.count)
            if single { careful -= 1 }
            for k in head..<end {
                let p = queue[k]
                let frame = p.envelope.frame!
                let start = buffer.count
                let id = window.append(p)
                buffer.append(frame.bytes)
                // The per-connection identifier, patched in the buffer (no copy of the frame).
                if let o = frame.identifierOffset { buffer.setUInt32(id, at: start + o) }
            }
            head = end
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            await write(to: c)
            writesSinceCheck += 1
            if single || writesSinceCheck >= options.writesPerCheck || head == queue.count {
                check()
                writesSinceCheck = 0
            }
        }
    }

    func openIfNeeded() -> GatewayConnection {
        if let c = connection { return c }
        let c = simulator.openConnection(topic: options.topic)
        connection = c
        responses = ErrorResponseDecoder()
        _ = window.reset()
        statistics.connections += 1
        return c
    }

    func write(to c: GatewayConnection) async {
        statistics.writes += 1
        var offset = 0
        while offset < buffer.count {
            let start = offset
            let reply = buffer.withUnsafeReadableBytes { c.receive(UnsafeRawBufferPointer(rebasing: $0[start...])) }
            offset += reply.consumed
            statistics.bytesWritten += reply.consumed
            handle(reply)
            if connection !== c { return }
            if let d = reply.readDelay { try? await Task.sleep(for: d) }
        }
    }

    /// A quiet point: the provider waits for an answer; with none and the
    /// connection open, everything written is accepted.
    func check() {
        guard let c = connection else {
            lose()
            return
        }
        handle(c.flush())
        if connection === c {
            for p in window.acceptAll() { records.append(p.envelope.record(.accepted)) }
        }
    }

    func handle(_ reply: GatewayReply) {
        if !reply.response.isEmpty {
            responses.feed(reply.response)
            do {
                while case .message(let r) = try responses.next() { resolve(r) }
            } catch {
                // Garbage from the gateway: nothing it said can be trusted.
                lose()
                return
            }
        }
        if reply.closed { lose() }
    }

    func resolve(_ response: ErrorResponse) {
        statistics.errorResponses += 1
        let r = window.resolve(response)
        for p in r.accepted { records.append(p.envelope.record(.accepted)) }
        if let (p, status) = r.rejected { records.append(p.envelope.record(.rejected(status))) }
        requeue(r.resend, ambiguous: !r.identifierMatched)
        // After an error response the gateway closes: stop writing to this connection.
        connection = nil
    }

    /// The connection is gone: what is still in flight is unknown, and resent.
    func lose() {
        if !window.isEmpty { statistics.lostConnections += 1 }
        requeue(window.connectionLost(), ambiguous: true)
        connection = nil
    }

    func requeue(_ items: [Pending], ambiguous: Bool) {
        guard !items.isEmpty else { return }
        var again: [Pending] = []
        again.reserveCapacity(items.count + queue.count - head)
        for var p in items {
            if ambiguous {
                p.attempts += 1
                if p.attempts >= options.maxAttempts {
                    records.append(p.envelope.record(.failed("connection lost \(p.attempts) times before APNs answered")))
                    continue
                }
            }
            again.append(p)
        }
        statistics.resent += again.count
        if ambiguous { careful += again.count }
        again.append(contentsOf: queue[head...])
        queue = again
        head = 0
    }
}
