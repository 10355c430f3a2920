import HeraldBinary
import HeraldCore
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A notification on its way through one gateway connection.
struct GatewayItem: Sendable {
    var sequence: UInt64
    var line: Int?
    var id: UInt32?
    var token: DeviceToken
    var frame: [UInt8]
    var identifierOffset: Int?
    /// The drain probe: a notification the gateway is certain to reject.
    var isProbe = false

    func record(_ outcome: Outcome) -> OutcomeRecord {
        OutcomeRecord(sequence: sequence, line: line, id: id, token: token, outcome: outcome)
    }

    /// Enhanced format (command 1), identifier patched in later, an all-zero
    /// 32-byte token and no payload: status 4 (missing payload) on any gateway.
    static func probe() -> GatewayItem {
        var bytes: [UInt8] = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32]
        bytes += [UInt8](repeating: 0, count: 32)
        bytes += [0, 0]
        return GatewayItem(sequence: .max, line: nil, id: nil, token: DeviceToken(bytes: [UInt8](repeating: 0, count: 32)),
                           frame: bytes, identifierOffset: 1, isProbe: true)
    }
}

/// Limits how many notifications wait to be written, over all connections:
/// `send` waits here while the connections are behind.
final class FlowGate: Sendable {
    struct State {
        var count = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    let state = Mutex(State())
    let limit: Int
    init(limit: Int) { self.limit = max(1, limit) }

    /// Waits until fewer than `limit` are queued, then counts `n` more.
    func acquire(_ n: Int) async {
        while true {
            let admitted = state.withLock { s -> Bool in
                guard s.count < limit else { return false }
                s.count += n
                return true
            }
            if admitted { return }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.count < limit { return true }
                    s.waiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        }
    }

    func add(_ n: Int) { state.withLock { $0.count += n } }

    func remove(_ n: Int) {
        guard n > 0 else { return }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.count -= n
            guard s.count < limit, !s.waiters.isEmpty else { return [] }
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    var count: Int { state.withLock { $0.count } }
}

/// Counters of what the gateway transport did, for tests, logs and benchmarks.
public final class GatewayStatistics: Sendable {
    let _connections = Atomic<Int>(0)
    let _handshakes = Atomic<Int>(0)
    let _resumed = Atomic<Int>(0)
    let _protocol = Mutex<String?>(nil)
    let _errorResponses = Atomic<Int>(0)
    let _shutdowns = Atomic<Int>(0)
    let _silentCloses = Atomic<Int>(0)
    let _resent = Atomic<Int>(0)
    let _resentAfterClose = Atomic<Int>(0)
    let _unmatched = Atomic<Int>(0)
    let _probes = Atomic<Int>(0)
    let _acceptedByTime = Atomic<Int>(0)
    let _acceptedByResponse = Atomic<Int>(0)
    let _connectFailures = Atomic<Int>(0)
    let _writes = Atomic<Int>(0)

    /// TCP connections opened.
    public var connections: Int { _connections.load(ordering: .relaxed) }
    /// TLS handshakes completed.
    public var handshakes: Int { _handshakes.load(ordering: .relaxed) }
    /// The TLS version of the latest handshake (e.g. "TLSv1.3").
    public var protocolVersion: String? { _protocol.withLock { $0 } }
    /// Handshakes that resumed an earlier TLS session.
    public var resumedHandshakes: Int { _resumed.load(ordering: .relaxed) }
    /// Error responses received (including status 10 and the drain probes' answers).
    public var errorResponses: Int { _errorResponses.load(ordering: .relaxed) }
    /// Status 10 (shutdown) responses.
    public var shutdowns: Int { _shutdowns.load(ordering: .relaxed) }
    /// Connections that closed with notifications in flight and no error response.
    public var silentCloses: Int { _silentCloses.load(ordering: .relaxed) }
    /// Notifications written again on a fresh connection.
    public var resent: Int { _resent.load(ordering: .relaxed) }
    /// Of those, written again because a connection closed with no error
    /// response: the only ones that may reach a device twice.
    public var resentAfterSilentClose: Int { _resentAfterClose.load(ordering: .relaxed) }
    /// Error responses naming an identifier no longer in flight.
    public var unmatchedResponses: Int { _unmatched.load(ordering: .relaxed) }
    /// Drain probes written.
    public var probes: Int { _probes.load(ordering: .relaxed) }
    /// Notifications accepted because `acceptAfter` passed with no error.
    public var acceptedByTime: Int { _acceptedByTime.load(ordering: .relaxed) }
    /// Notifications accepted because a later error response, status 10 or probe confirmed them.
    public var acceptedByResponse: Int { _acceptedByResponse.load(ordering: .relaxed) }
    /// Connection attempts that failed (TCP or TLS).
    public var connectFailures: Int { _connectFailures.load(ordering: .relaxed) }
    /// Writes (each carrying many frames).
    public var writes: Int { _writes.load(ordering: .relaxed) }

    public init() {}
}

/// One persistent connection to the gateway, and everything written on it
/// that the gateway has not yet confirmed.
///
/// All mutable state is confined to `loop`: every method below runs there.
final class GatewayLink: @unchecked Sendable {
    enum Phase {
        case idle
        case waitingToReconnect
        case connecting
        case ready
        /// A problem retrying cannot fix (certificate refused, unknown CA): everything fails at once.
        case failed(TLSError)
    }

    struct WriteMark {
        var seq: Int
        var last: UInt32
        var done: NIODeadline?
    }

    let index: Int
    let loop: any EventLoop
    let configuration: GatewayConfiguration
    let tls: TLSContext
    let gate: FlowGate
    let statistics: GatewayStatistics
    /// Notifications this link holds and has not written yet (read from any thread to balance load).
    let queuedCount = Atomic<Int>(0)
    let ledgerBox = Mutex<OutcomeLedger?>(nil)

    // Loop-confined state.
    var ledger: OutcomeLedger?
    var queue = CircularBuffer<GatewayItem>(initialCapacity: 1024)
    var window = InFlightWindow<GatewayItem>()
    var marks = CircularBuffer<WriteMark>()
    var nextMarkSeq = 0
    var channel: (any Channel)?
    var generation = 0
    var phase = Phase.idle
    var consecutiveFailures = 0
    var lastError: String?
    var permanentError: TLSError?
    var progressed = false
    /// Something written on the current connection was confirmed (by time or by a probe).
    var confirmedOnConnection = false
    /// Consecutive silent closes with notifications in flight and nothing confirmed in between.
    var silentStreak = 0
    var connectedAt = NIODeadline.now()
    var draining = false
    var drainPromise: EventLoopPromise<Void>?
    var drainTimer: Scheduled<Void>?
    var probeOutstanding = false
    var acceptTask: RepeatedTask?
    var pumping = false
    /// The current limit of notifications in flight (adaptive, see ``GatewayConfiguration/minUnconfirmed``).
    var cap: Int
    var pumpAgain = false
    var random = SystemRandomNumberGenerator()
    var resolvedAddress: (SocketAddress, NIODeadline)?

    init(index: Int, loop: any EventLoop, configuration: GatewayConfiguration, tls: TLSContext, gate: FlowGate,
         statistics: GatewayStatistics) {
        self.index = index
        self.loop = loop
        self.configuration = configuration
        self.tls = tls
        self.gate = gate
        self.statistics = statistics
        self.cap = max(1, configuration.maxUnconfirmed)
    }

    var endpoint: String { "\(configuration.host):\(configuration.port)" }

    /// `HERALD_GATEWAY_TRACE=1` traces connection events on standard error (no tokens, no payloads).
    static let debug = getenv("HERALD_GATEWAY_TRACE") != nil
    func trace(_ s: @autoclosure () -> String) {
        guard Self.debug else { return }
        writeToStandardError("herald gateway trace: [link \(index) gen \(generation) \(NIODeadline.now().uptimeNanoseconds / 1_000_000)ms] \(s()) q=\(queue.count) w=\(window.count)\n")
    }

    // MARK: - From the transport (any thread)

    /// Hands notifications to this link. The caller has counted them in the gate.
    func enqueue(_ items: [GatewayItem], ledger: OutcomeLedger) {
        queuedCount.add(items.count, ordering: .relaxed)
        loop.execute {
            self.ledger = ledger
            for item in items { self.queue.append(item) }
            if case .failed(let error) = self.phase {
                self.failQueue("\(error)")
                return
            }
            self.startTimerIfNeeded()
            self.ensureConnected()
            self.pump()
        }
    }

    /// Flushes, confirms everything written with a drain probe, and closes.
    /// After `timeout`, whatever is unconfirmed fails.
    func drain(timeout: Duration) -> EventLoopFuture<Void> {
        loop.flatSubmit {
            let promise = self.loop.makePromise(of: Void.self)
            self.draining = true
            self.drainPromise = promise
            self.drainTimer = self.loop.scheduleTask(in: TimeAmount(timeout)) {
                self.drainTimedOut(timeout)
            }
            if case .idle = self.phase, !self.queue.isEmpty { self.ensureConnected() }
            self.pump()
            self.checkDrainComplete()
            return promise.futureResult
        }
    }

    // MARK: - Connecting

    func ensureConnected() {
        guard case .idle = phase, !queue.isEmpty || (draining && !window.isEmpty) else { return }
        if consecutiveFailures > 0 {
            scheduleReconnect()
        } else {
            connect()
        }
    }

    func connect() {
        trace("connect")
        phase = .connecting
        generation += 1
        let gen = generation
        progressed = false
        confirmedOnConnection = false
        permanentError = nil
        statistics._connections.add(1, ordering: .relaxed)
        let tls = self.tls
        let serverName = configuration.serverName ?? configuration.host
        var bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: ChannelOptions.Types.WriteBufferWaterMark(
                low: min(configuration.writeBufferLow, configuration.writeBufferHigh), high: configuration.writeBufferHigh))
        if let size = configuration.socketSendBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_sndbuf), value: SocketOptionValue(size))
        }
        bootstrap = bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        try OpenSSLHandler(context: tls, serverName: serverName),
                        GatewayChannelHandler(link: self, generation: gen),
                    ])
                }
            }
        // Reconnections (one per error response) reuse the address resolved
        // for the last good connection for a minute: no resolver round trip each time.
        let connecting: EventLoopFuture<any Channel>
        if let (address, until) = resolvedAddress, NIODeadline.now() < until {
            connecting = bootstrap.connect(to: address)
        } else {
            connecting = bootstrap.connect(host: configuration.host, port: configuration.port)
        }
        connecting.whenComplete { result in
                switch result {
                case .success(let channel):
                    if gen == self.generation {
                        self.channel = channel
                        if self.resolvedAddress == nil, let address = channel.remoteAddress {
                            self.resolvedAddress = (address, .now() + .seconds(60))
                        }
                    } else {
                        channel.close(promise: nil)
                    }
                case .failure(let error):
                    guard gen == self.generation else { return }
                    self.resolvedAddress = nil
                    self.lastError = "cannot connect to \(self.endpoint): \(error)"
                    self.connectionFailed()
                }
            }
    }

    /// The TLS handshake finished on connection `gen`.
    func handshakeCompleted(generation gen: Int, channel: any Channel, protocolVersion: String, resumed: Bool) {
        guard gen == generation else { return }
        statistics._protocol.withLock { $0 = protocolVersion }
        statistics._handshakes.add(1, ordering: .relaxed)
        if resumed { statistics._resumed.add(1, ordering: .relaxed) }
        trace("handshake")
        self.channel = channel
        phase = .ready
        connectedAt = .now()
        pump()
    }

    /// The connection reported an error (TLS or otherwise); it is closing.
    func channelError(generation gen: Int, _ error: any Error) {
        guard gen == generation else { return }
        lastError = "\(error)"
        if let tlsError = error as? TLSError, Self.isPermanent(tlsError.code) {
            permanentError = tlsError
        }
    }

    static func isPermanent(_ code: TLSError.Code) -> Bool {
        [.unknownCA, .hostNameMismatch, .expiredCertificate, .missingPeerCertificate, .handshakeRefused].contains(code)
    }

    func connectionFailed() {
        statistics._connectFailures.add(1, ordering: .relaxed)
        channel = nil
        consecutiveFailures += 1
        phase = .idle
        if let permanentError {
            fail(with: permanentError)
            return
        }
        if consecutiveFailures >= configuration.maxConnectAttempts {
            let why = lastError ?? "unknown error"
            failQueue("gave up after \(consecutiveFailures) attempts to reach the gateway \(endpoint): \(why)")
            // Later notifications get one more attempt each, after the longest backoff.
            consecutiveFailures = configuration.maxConnectAttempts - 1
            checkDrainComplete()
            return
        }
        scheduleReconnect()
    }

    func scheduleReconnect() {
        guard !queue.isEmpty || !window.isEmpty else {
            phase = .idle
            checkDrainComplete()
            return
        }
        let delay = configuration.backoff.delay(afterFailures: consecutiveFailures, using: &random)
        phase = .waitingToReconnect
        if delay == .zero {
            connect()
            return
        }
        loop.scheduleTask(in: TimeAmount(delay)) {
            if case .waitingToReconnect = self.phase { self.connect() }
        }
    }

    /// A permanent TLS problem: everything this link holds fails with it, and so will later notifications.
    func fail(with error: TLSError) {
        phase = .failed(error)
        let written = window.connectionLost().filter { !$0.isProbe }
        marks.removeAll()
        probeOutstanding = false
        record(written.map { $0.record(.failed("\(error)")) })
        failQueue("\(error)")
        checkDrainComplete()
    }

    // MARK: - Writing

    /// Writes queued notifications while the connection takes them.
    ///
    /// Not re-entrant: a write can make the channel report writability or an
    /// error synchronously, which asks for another pump; that one runs after.
    func pump() {
        guard !pumping else {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            pumpOnce()
        } while pumpAgain
    }

    func pumpOnce() {
        // After a probe the connection is closing: nothing more goes on it.
        guard case .ready = phase, let channel, !probeOutstanding else { return }
        let gen = generation
        let limit = cap
        let writeBytes = configuration.writeBytes
        func stillCurrent() -> Bool {
            guard gen == generation, case .ready = phase else { return false }
            return true
        }
        while !queue.isEmpty && window.count < limit && channel.isWritable {
            var buffer = channel.allocator.buffer(capacity: writeBytes + 512)
            var n = 0
            while let item = queue.first, n == 0 || buffer.readableBytes + item.frame.count <= writeBytes, window.count < limit {
                queue.removeFirst()
                let identifier = window.append(item)
                let start = buffer.writerIndex
                buffer.writeBytes(item.frame)
                if let offset = item.identifierOffset { buffer.setInteger(identifier, at: start + offset) }
                n += 1
            }
            queuedCount.add(-n, ordering: .relaxed)
            gate.remove(n)
            startTimerIfNeeded()
            trace("write \(n)")
            write(buffer, last: window.nextIdentifier &- 1, on: channel)
            // The write may have closed the connection or delivered an error response.
            guard stillCurrent() else { return }
        }
        let full = !queue.isEmpty && window.count >= limit
        if (full || (draining && queue.isEmpty)) && !window.isEmpty && channel.isWritable {
            var probe = GatewayItem.probe()
            let identifier = window.append(probe)
            probe.frame.withUnsafeMutableBytes { $0.storeBytes(of: identifier.bigEndian, toByteOffset: 1, as: UInt32.self) }
            probeOutstanding = true
            statistics._probes.add(1, ordering: .relaxed)
            trace("probe \(identifier)")
            // No write mark: the probe is confirmed only by the gateway's answer.
            channel.writeAndFlush(ByteBuffer(bytes: probe.frame), promise: nil)
        }
    }

    func write(_ buffer: ByteBuffer, last: UInt32, on channel: any Channel) {
        let seq = nextMarkSeq
        nextMarkSeq += 1
        marks.append(WriteMark(seq: seq, last: last, done: nil))
        let gen = generation
        let promise = loop.makePromise(of: Void.self)
        promise.futureResult.whenSuccess { self.writeCompleted(seq: seq, generation: gen) }
        statistics._writes.add(1, ordering: .relaxed)
        channel.writeAndFlush(buffer, promise: promise)
    }

    func writeCompleted(seq: Int, generation gen: Int) {
        guard gen == generation, let first = marks.first else { return }
        let k = seq - first.seq
        guard k >= 0 && k < marks.count else { return }
        marks[marks.index(marks.startIndex, offsetBy: k)].done = .now()
        progressed = true
    }

    func writabilityChanged(generation gen: Int) {
        guard gen == generation else { return }
        pump()
    }

    // MARK: - Confirmation

    func startTimerIfNeeded() {
        guard acceptTask == nil else { return }
        let tick = max(TimeAmount(configuration.acceptAfter).nanoseconds / 4, 5_000_000)
        acceptTask = loop.scheduleRepeatedTask(initialDelay: .nanoseconds(tick), delay: .nanoseconds(tick)) { _ in
            self.acceptByTime()
        }
    }

    /// Accepts what was written long enough ago with no error since.
    func acceptByTime() {
        let cutoff = NIODeadline.now() - TimeAmount(configuration.acceptAfter)
        var accepted: [GatewayItem] = []
        while let m = marks.first, let done = m.done, done <= cutoff {
            accepted += window.accept(through: m.last)
            marks.removeFirst()
        }
        if !accepted.isEmpty {
            statistics._acceptedByTime.add(accepted.count, ordering: .relaxed)
            confirmedOnConnection = true
            silentStreak = 0
            cap = min(configuration.maxUnconfirmed, cap * 2)
            record(accepted.map { $0.record(.accepted) })
            pump()
        }
        checkDrainComplete()
        if case .idle = phase, queue.isEmpty, window.isEmpty, !draining {
            acceptTask?.cancel()
            acceptTask = nil
        }
    }

    /// The gateway's error response on connection `gen`.
    func errorResponse(generation gen: Int, _ response: ErrorResponse) {
        guard gen == generation else { return }
        statistics._errorResponses.add(1, ordering: .relaxed)
        trace("error response \(response)")
        if response.status == .shutdown { statistics._shutdowns.add(1, ordering: .relaxed) }
        let r = window.resolve(response)
        marks.removeAll()
        var records: [OutcomeRecord] = []
        let accepted = r.accepted.filter { !$0.isProbe }
        statistics._acceptedByResponse.add(accepted.count, ordering: .relaxed)
        records.reserveCapacity(accepted.count + 1)
        for item in accepted { records.append(item.record(.accepted)) }
        if let (item, status) = r.rejected, !item.isProbe {
            records.append(item.record(.rejected(status)))
        }
        if let (item, _) = r.rejected, item.isProbe {
            // Confirmed with no error: write more before asking again.
            cap = min(configuration.maxUnconfirmed, cap * 2)
        } else if r.resend.count > configuration.minUnconfirmed / 2 {
            // Written past a failure and wasted: write less ahead of the gateway.
            // (never raising it: a silent close may have taken it lower still)
            cap = max(min(cap, configuration.minUnconfirmed), cap / 2)
        }
        if !r.identifierMatched {
            statistics._unmatched.add(1, ordering: .relaxed)
            TLSLog.warning("the gateway \(endpoint) answered \(response) for a notification no longer in flight; "
                + "resending the \(r.resend.count) in flight (at least once)")
        }
        record(records)
        probeOutstanding = false
        // With an unknown identifier nothing is known about what was in flight: it may arrive twice.
        requeueFront(r.resend.filter { !$0.isProbe }, afterSilentClose: !r.identifierMatched)
        silentStreak = 0
        // The gateway closes after an error response; we do not wait for it.
        consecutiveFailures = 0
        closeCurrent()
        phase = .idle
        ensureConnected()
        checkDrainComplete()
    }

    /// The connection `gen` closed.
    ///
    /// With notifications in flight and no error response, nothing is known
    /// about them: they are all written again (at least once). Consecutive
    /// such closes with nothing confirmed in between form a streak; each one
    /// halves what may be in flight, so the streak narrows down to a single
    /// notification (a poison one, as the simple format makes: the gateway
    /// closes silently on its errors). Past `maxSilentCloses` the one in
    /// flight fails; past `maxSilentCloses + maxConnectAttempts` (a gateway
    /// that closes every connection) everything waiting fails. From the second
    /// close of a streak on, reconnection waits with backoff.
    func closed(generation gen: Int) {
        trace("closed (gen \(gen))")
        guard gen == generation else { return }
        let wasReady: Bool
        if case .ready = phase { wasReady = true } else { wasReady = false }
        channel = nil
        generation += 1
        let lost = window.connectionLost()
        marks.removeAll()
        probeOutstanding = false
        var real = lost.filter { !$0.isProbe }
        if let permanentError {
            // TLS refused us after the handshake (TLS 1.3 reports a refused client certificate late):
            // what was written was not processed, and retrying cannot help.
            record(real.map { $0.record(.failed("\(permanentError)")) })
            phase = .idle
            fail(with: permanentError)
            return
        }
        if !real.isEmpty {
            statistics._silentCloses.add(1, ordering: .relaxed)
            silentStreak = confirmedOnConnection ? 1 : silentStreak + 1
            // Less in flight on the next connection: a flaky link exposes fewer
            // notifications per close, and probes confirm them sooner.
            cap = max(1, min(cap, real.count) / 2)
            if silentStreak > configuration.maxSilentCloses && real.count == 1 {
                let reason = "the gateway \(endpoint) closed the connection \(silentStreak) times in a row with no answer, "
                    + "the last time with only this notification in flight"
                record(real.map { $0.record(.failed(reason)) })
                real.removeAll()
            }
            requeueFront(real, afterSilentClose: true)
            if silentStreak > configuration.maxSilentCloses + configuration.maxConnectAttempts {
                failQueue("the gateway \(endpoint) closed \(silentStreak) connections in a row with no answer")
                silentStreak = configuration.maxSilentCloses
            }
        }
        if !wasReady {
            connectionFailed()
            return
        }
        let lived = NIODeadline.now() - connectedAt
        if progressed || lived > .seconds(1) {
            consecutiveFailures = 0
        } else {
            consecutiveFailures += 1
        }
        phase = .idle
        if consecutiveFailures >= configuration.maxConnectAttempts {
            connectionFailed()
            return
        }
        if !queue.isEmpty {
            if silentStreak > 1 {
                let delay = configuration.backoff.delay(afterFailures: silentStreak - 1, using: &random)
                phase = .waitingToReconnect
                loop.scheduleTask(in: TimeAmount(delay)) {
                    if case .waitingToReconnect = self.phase { self.connect() }
                }
            } else {
                scheduleReconnect()
            }
        }
        checkDrainComplete()
    }

    /// Puts notifications back at the head of the queue, in order.
    /// - Parameter afterSilentClose: the connection closed with no error response (these may arrive twice).
    func requeueFront(_ items: [GatewayItem], afterSilentClose: Bool) {
        guard !items.isEmpty else { return }
        for item in items.reversed() { queue.prepend(item) }
        let back = items.count
        statistics._resent.add(back, ordering: .relaxed)
        if afterSilentClose { statistics._resentAfterClose.add(back, ordering: .relaxed) }
        queuedCount.add(back, ordering: .relaxed)
        gate.add(back)
    }

    func failQueue(_ reason: String) {
        guard !queue.isEmpty else { return }
        var records: [OutcomeRecord] = []
        records.reserveCapacity(queue.count)
        while let item = queue.popFirst() {
            if !item.isProbe { records.append(item.record(.failed(reason))) }
        }
        let n = records.count
        queuedCount.add(-n, ordering: .relaxed)
        gate.remove(n)
        record(records)
    }

    func closeCurrent() {
        generation += 1
        if let channel { channel.close(promise: nil) }
        channel = nil
    }

    func record(_ records: [OutcomeRecord]) {
        guard !records.isEmpty else { return }
        ledger?.record(records)
    }

    // MARK: - Draining

    func checkDrainComplete() {
        guard draining, let promise = drainPromise else { return }
        let done = queue.isEmpty && window.isEmpty
        guard done else {
            if case .idle = phase { ensureConnected() }
            return
        }
        finishDrain(promise)
    }

    func drainTimedOut(_ timeout: Duration) {
        guard let promise = drainPromise else { return }
        let reason = "not confirmed by the gateway \(endpoint) within the shutdown deadline (\(timeout))"
        let written = window.connectionLost().filter { !$0.isProbe }
        marks.removeAll()
        record(written.map { $0.record(.failed(reason)) })
        failQueue(reason)
        finishDrain(promise)
    }

    func finishDrain(_ promise: EventLoopPromise<Void>) {
        drainPromise = nil
        drainTimer?.cancel()
        drainTimer = nil
        acceptTask?.cancel()
        acceptTask = nil
        closeCurrent()
        if case .failed = phase {} else { phase = .idle }
        promise.succeed(())
    }
}

/// The provider's end of a gateway connection, after the TLS handler: reads
/// error responses and passes events to the link.
final class GatewayChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let link: GatewayLink
    let generation: Int
    var decoder = ErrorResponseDecoder()
    var answered = false

    init(link: GatewayLink, generation: Int) {
        self.link = link
        self.generation = generation
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let version, _, _, let resumed) = event as? TLSEvent {
            link.handshakeCompleted(generation: generation, channel: context.channel, protocolVersion: version, resumed: resumed)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        let buffer = unwrapInboundIn(data)
        var response: ErrorResponse?
        do {
            _ = try buffer.withUnsafeReadableBytes { raw in
                try decoder.read(raw) { r in
                    response = r
                    return false
                }
            }
        } catch {
            answered = true
            link.channelError(generation: generation, TLSError(.protocolError, "the gateway sent something other than an error response: \(error)"))
            context.close(promise: nil)
            return
        }
        if let response {
            answered = true
            link.errorResponse(generation: generation, response)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { link.writabilityChanged(generation: generation) }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        link.channelError(generation: generation, error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        link.closed(generation: generation)
        context.fireChannelInactive()
    }
}
