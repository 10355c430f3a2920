import HeraldCore
import HeraldHTTP2
import HeraldOpenSSL
import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The ``HTTP2DeliveryMachine`` driven on one SwiftNIO event loop. The machine
/// decides everything; this shell opens connections (TCP, an optional proxy
/// tunnel, TLS with ALPN `h2`, HTTP/2), opens the streams it asks for, passes
/// every answer, reset, SETTINGS, GOAWAY, PING acknowledgement and close back,
/// and keeps one timer.
///
/// `@unchecked Sendable`: every mutable stored property is confined to `loop`.
/// Entry points from elsewhere (``enqueue(_:ledger:)``, ``drain(timeout:)``,
/// ``abandon(_:)``) hop onto `loop` first; the connections' handlers and the
/// timer run there already. `published` is the only state read elsewhere.
final class HTTP2Driver: @unchecked Sendable {
    /// Which of the transport's drivers (one an event loop) this is.
    let index: Int
    let loop: any EventLoop
    let configuration: HTTP2TransportConfiguration
    let tls: TLSContext
    let gate: FlowGate
    let published = Mutex(HTTP2TransportStatistics())
    /// Notifications handed over and not yet recorded: the transport gives the next batch to the driver holding fewest.
    let queuedCount = Atomic<Int>(0)
    /// The streams this driver's connections may hold at once: the configured cap, until a server's
    /// SETTINGS say fewer (the latest server's limit, for each connection). The transport fills a
    /// fast-lane connection to this and no further.
    let streamLimit: Atomic<Int>
    /// Wall-clock time minus the monotonic clock, fixed at start: the machine's
    /// `now` is time since 1970 (provider tokens carry it) that never runs backwards.
    let epoch: Duration

    // Loop-confined.
    var machine: HTTP2DeliveryMachine
    var ledger: OutcomeLedger?
    /// Connections whose channel exists, by the machine's number.
    var connections: [Int: HTTP2ConnectionHandler] = [:]
    /// Why a connection is closing, kept until it has closed.
    var closeErrors: [Int: any Error] = [:]
    /// Connections written to since the last flush.
    var unflushed: [HTTP2ConnectionHandler] = []
    var timer: Scheduled<Void>?
    var timerDeadline: Duration?
    var drainPromise: EventLoopPromise<Void>?
    var stepping = false
    var stepAgain = false
    var stepScheduled = false
    var tlsStatistics = HTTP2TransportStatistics()

    init(index: Int = 0, loop: any EventLoop, configuration: HTTP2TransportConfiguration, tls: TLSContext, gate: FlowGate,
         tokens: SharedProviderTokens?) {
        self.index = index
        self.loop = loop
        self.configuration = configuration
        self.tls = tls
        self.gate = gate
        epoch = .sinceEpoch - .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds))
        streamLimit = Atomic(configuration.maxStreamsPerConnection * configuration.delivery.connections)
        machine = HTTP2DeliveryMachine(
            policy: configuration.delivery, sharedTokens: tokens, seed: UInt64.random(in: 0...UInt64.max))
        machine.keepsSpent = true
    }

    var now: Duration { epoch + .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }

    /// Connection events go to the configuration's logger at `trace` (never a
    /// token, a JWT or a payload); `HERALD_HTTP2_TRACE=1` logs them whatever the logger's level.
    static let tracing = getenv("HERALD_HTTP2_TRACE") != nil
    /// Whether ``trace(_:)`` logs anything: decided once (it is asked at every answer).
    lazy var traces = Self.tracing || configuration.logger.logLevel <= .trace
    func trace(_ s: @autoclosure () -> String) {
        guard traces else { return }
        var logger = configuration.logger
        if Self.tracing { logger.logLevel = .trace }
        logger.trace("\(s())", metadata: [
            "endpoint": "\(configuration.endpoint)", "loop": "\(index)", "uptime_us": "\(NIODeadline.now().uptimeNanoseconds / 1000)",
        ])
    }

    // MARK: - From the transport (any thread)

    /// Hands requests over; the caller has counted them in the gate.
    func enqueue(_ items: consuming [HTTP2Item], ledger: OutcomeLedger) {
        queuedCount.add(items.count, ordering: .relaxed)
        // Moved to the loop, not captured: the machine then moves each item into its queue.
        let handoff = Handoff(items)
        loop.execute {
            self.ledger = ledger
            self.machine.enqueue(handoff.take(), now: self.now)
            self.step()
        }
    }

    /// Has everything answered; what is unanswered after `timeout` fails.
    func drain(timeout: Duration) -> EventLoopFuture<Void> {
        loop.flatSubmit {
            if let pending = self.drainPromise { return pending.futureResult }
            let promise = self.loop.makePromise(of: Void.self)
            self.drainPromise = promise
            self.machine.drain(deadline: self.now + timeout)
            self.step()
            return promise.futureResult
        }
    }

    /// A signal: ``drain(timeout:)``, but what waits for a connection that cannot be made fails now
    /// (``HTTP2DeliveryMachine/stop(deadline:now:)``).
    func stop(timeout: Duration) -> EventLoopFuture<Void> {
        loop.flatSubmit {
            self.machine.stop(deadline: self.now + timeout, now: self.now)
            self.step()  // what stop failed is recorded now, even when a drain was already under way
            return self.drain(timeout: timeout)
        }
    }

    /// Gives up on everything at once.
    func abandon(_ reason: String) {
        loop.execute {
            self.machine.abandon(OutcomeReason(.shutdownDeadline, reason), now: self.now)
            self.step()
        }
    }

    // MARK: - The machine's turn

    /// Performs the machine's actions until it has nothing more to do now, then
    /// flushes every connection written to. Re-entrant calls run after.
    func step() {
        guard !stepping else {
            stepAgain = true
            return
        }
        stepping = true
        repeat {
            stepAgain = false
            for action in machine.takeActions() { perform(action) }
            for c in unflushed { c.flush() }
            unflushed.removeAll(keepingCapacity: true)
            let records = machine.takeOutcomes()
            if !records.isEmpty {
                ledger?.record(records)
                gate.remove(records.count)
                queuedCount.subtract(records.count, ordering: .relaxed)
            }
            _ = machine.takeDeadTokens()  // also in the outcome records (apnsUnregisteredAt), which feed the token store
            // A thousand at a time, and what is left once nothing is in flight (an idle service holds none).
            if machine.spentCount >= Self.spentBatch || (machine.spentCount > 0 && machine.isSettled) { freeElsewhere(machine.takeSpent()) }
        } while stepAgain
        stepping = false
        var s = tlsStatistics
        s.delivery = machine.statistics
        s.tokensSigned = machine.tokens?.signed ?? 0
        s.failure = machine.failure?.message
        s.outageSince = machine.outageSince
        s.lastError = machine.lastError
        published.withLock { $0 = s }
        for notice in machine.takeNotices() { configuration.logger.warning("\(notice)") }
        scheduleTimer()
        if machine.isSettled, let promise = drainPromise {
            drainPromise = nil
            timer?.cancel()
            timer = nil
            for c in connections.values { c.close() }
            promise.succeed(())
        }
    }

    /// Ended requests freed a batch at a time by a task of their own, not one by one on this loop.
    static let spentBatch = 1024

    func freeElsewhere(_ spent: consuming HTTP2DeliveryMachine.Spent) {
        let handoff = Handoff(spent)
        Task.detached { _ = handoff.take() }
    }

    /// Runs ``step()`` once the current read is over: the answers of one read
    /// are decided together, their outcomes recorded and new streams flushed at once.
    func requestStep() {
        guard !stepScheduled else { return }
        stepScheduled = true
        loop.execute {
            self.stepScheduled = false
            self.step()
        }
    }

    func scheduleTimer() {
        let next = machine.nextDeadline
        guard next != timerDeadline else { return }
        // A timer due sooner than needed stays: it finds nothing due and sets the next one.
        // (The earliest deadline moves at nearly every answer; rescheduling each time costs more.)
        if let current = timerDeadline, let next, current <= next { return }
        timer?.cancel()
        timerDeadline = next
        guard let next else {
            timer = nil
            return
        }
        let delay = max(.zero, next - now)
        timer = loop.scheduleTask(in: TimeAmount(delay)) {
            self.timerDeadline = nil
            self.timer = nil
            self.machine.timer(now: self.now)
            self.step()
        }
    }

    func perform(_ action: HTTP2DeliveryMachine.Action) {
        switch action {
        case .connect(let c):
            connect(c)
        case .send(let c, let stream, let authorization):
            if let handler = connections[c], handler.canOpen {
                // The request is read where the machine keeps it, only to build the frames: writing
                // (which may close the connection and so call back into the machine) comes after.
                var opening: HTTP2ConnectionHandler.Opening?
                guard machine.withRequest(ofStream: stream, { request, prepared in
                    opening = handler.opening(request, prepared: PreparedRequest.of(prepared), authorization: authorization)
                }) else {
                    return  // the machine ended the stream meanwhile
                }
                if let (headers, body) = opening.take(), handler.open(stream: stream, headers: headers, body: body) {
                    flushLater(handler)
                    return
                }
            }
            machine.streamFailed(stream, unprocessed: true, reason: "connection \(c) is gone", now: now)
        case .cancel(let c, let stream):
            guard let handler = connections[c] else { return }
            handler.cancel(stream: stream)
            flushLater(handler)
        case .ping(let c):
            connections[c]?.ping()
        case .close(let c):
            trace("close \(c)")
            connections[c]?.close()
        }
    }

    /// Flushes `handler`'s connection at the end of this step, once however many frames it got.
    func flushLater(_ handler: HTTP2ConnectionHandler) {
        guard !handler.queuedFlush else { return }
        handler.queuedFlush = true
        unflushed.append(handler)
    }

    // MARK: - Connections

    /// Opens connection `c`: TCP (a fresh DNS look-up), the proxy tunnel, TLS, HTTP/2; the handler reports back.
    func connect(_ c: Int) {
        trace("connect \(c)")
        let handler = HTTP2ConnectionHandler(driver: self, connection: c, authority: configuration.serverName ?? configuration.host)
        connections[c] = handler
        let tls = self.tls
        let configuration = self.configuration
        let serverName = configuration.serverName ?? configuration.host
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(configuration.delivery.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var handlers: [any ChannelHandler] = []
                    if let proxy = configuration.proxy {
                        handlers.append(try ProxyConnectHandler(target: configuration.host, port: configuration.port, proxy: proxy))
                    }
                    handlers.append(try OpenSSLHandler(context: tls, serverName: serverName))
                    handlers.append(handler.batcher)
                    let connection = NIOHTTP2Handler.ConnectionConfiguration.apnsClient(initialWindowSize: configuration.initialWindowSize)
                    // A server resets streams as an answer (nginx resets each stream whose body it did not
                    // read, with NO_ERROR): not an attack to cut the connection for.
                    handlers.append(NIOHTTP2Handler(
                        mode: .client, connectionConfiguration: connection, streamConfiguration: .toleratingResets))
                    handlers.append(handler)
                    try channel.pipeline.syncOperations.addHandlers(handlers)
                }
            }
        let (host, port) = configuration.proxy.map { ($0.host, $0.port) } ?? (configuration.host, configuration.port)
        bootstrap.connect(host: host, port: port).whenComplete { result in
            switch result {
            case .success(let channel):
                // The machine may have given up on it meanwhile (its connect timeout).
                if self.connections[c] !== handler { channel.close(promise: nil) }
            case .failure(let error):
                guard self.connections[c] === handler else { return }
                self.connections[c] = nil
                self.trace("cannot connect \(c): \(error)")
                let target = configuration.proxy.map { "the proxy \($0) (for \(configuration.endpoint))" } ?? configuration.endpoint
                self.machine.closed(c, reason: .transient("cannot connect to \(target): \(describeConnectError(error))"), now: self.now)
                self.step()
            }
        }
    }

    /// Connection `c`'s TLS session is up.
    func handshakeCompleted(_ c: Int, protocolVersion: String, resumed: Bool) {
        tlsStatistics.protocolVersion = protocolVersion
        tlsStatistics.handshakes += 1
        if resumed { tlsStatistics.resumedHandshakes += 1 }
        trace("handshake \(c)\(resumed ? " (resumed)" : "")")
    }

    /// The server's SETTINGS on `c`: the first makes the connection ready.
    func settings(_ c: Int, maxStreams: Int?, first: Bool) {
        let cap = configuration.maxStreamsPerConnection
        let limit = min(cap, maxStreams ?? cap)
        trace("settings \(c): max streams \(maxStreams.map(String.init) ?? "unlimited")")
        streamLimit.store(limit * configuration.delivery.connections, ordering: .relaxed)
        if first {
            machine.connected(c, maxStreams: limit, now: now)
        } else if maxStreams != nil {
            machine.settingsChanged(c, maxStreams: limit, now: now)
        }
        requestStep()
    }

    func answered(_ stream: Int, _ response: APNsResponse) {
        trace("answer \(stream): \(response.status) \(response.reason ?? "")")
        machine.answered(stream, response, now: now)
        requestStep()
    }

    func streamFailed(_ stream: Int, unprocessed: Bool, reason: String) {
        trace("stream \(stream) failed: \(reason)")
        machine.streamFailed(stream, unprocessed: unprocessed, reason: reason, now: now)
        requestStep()
    }

    func goAway(_ c: Int, reason: String?) {
        trace("GOAWAY on \(c): \(reason ?? "no reason")")
        machine.goAway(c, reason: reason, now: now)
        requestStep()
    }

    func pong(_ c: Int) {
        machine.pong(c, now: now)
        requestStep()
    }

    /// An error on connection `c` (it is closing); kept to explain the close.
    func failed(_ c: Int, _ error: any Error) {
        if closeErrors[c] == nil { closeErrors[c] = error }
    }

    /// Connection `c` ended.
    func closed(_ c: Int, handler: HTTP2ConnectionHandler) {
        guard connections[c] === handler else { return }
        connections[c] = nil
        // Sends the machine decided before the close (in this read, still waiting for the step)
        // were never written: performed now, they come back unprocessed, not as possible duplicates.
        for action in machine.takeActions() { perform(action) }
        let error = closeErrors.removeValue(forKey: c)
        trace("closed \(c)\(error.map { ": \($0)" } ?? "")")
        let reason: HTTP2DeliveryMachine.CloseReason
        if let tlsError = error as? TLSError, Self.isPermanent(tlsError.code) {
            reason = .permanent("\(configuration.endpoint): \(tlsError)")
        } else if let proxyError = error as? ProxyError, proxyError.isPermanent {
            reason = .permanent("\(proxyError)")
        } else {
            reason = .transient(error.map { "\($0)" })
        }
        machine.closed(c, reason: reason, now: now)
        step()
    }

    static func isPermanent(_ code: TLSError.Code) -> Bool {
        [.unknownCA, .hostNameMismatch, .expiredCertificate, .missingPeerCertificate, .handshakeRefused, .noApplicationProtocol].contains(code)
    }
}

/// What the HTTP/2 transport did: the delivery machine's counters and the TLS sessions'.
@dynamicMemberLookup
public struct HTTP2TransportStatistics: Sendable, Hashable {
    public var delivery = HTTP2Statistics()
    /// Why deliveries cannot go on (a refused credential), if so.
    public var failure: String?
    /// Since when no connection has been ready (the driver's clock), if so.
    public var outageSince: Duration?
    /// The latest failed connection attempt, in words.
    public var lastError: String?
    /// Provider tokens signed (one for a run shorter than the refresh interval).
    public var tokensSigned = 0
    /// TLS handshakes completed, and how many resumed an earlier session.
    public var handshakes = 0
    public var resumedHandshakes = 0
    /// The TLS version of the latest handshake (e.g. "TLSv1.3").
    public var protocolVersion: String?

    public init() {}

    public subscript<T>(dynamicMember path: KeyPath<HTTP2Statistics, T>) -> T { delivery[keyPath: path] }

    /// Adds another driver's figures (the transport's sum over its event loops); `tokensSigned`
    /// and `outageSince` are the transport's to set.
    mutating func add(_ o: HTTP2TransportStatistics) {
        delivery.add(o.delivery)
        failure = failure ?? o.failure
        lastError = o.lastError ?? lastError
        handshakes += o.handshakes
        resumedHandshakes += o.resumedHandshakes
        protocolVersion = o.protocolVersion ?? protocolVersion
    }
}
