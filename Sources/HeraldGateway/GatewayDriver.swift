import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import Logging
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One persistent gateway connection slot: a ``DeliveryMachine`` driven on a
/// SwiftNIO event loop. The machine decides everything; this shell opens and
/// closes connections, writes what the machine produces while the socket takes
/// it, passes every byte read and every close back, and keeps one timer.
///
/// `@unchecked Sendable`: every mutable stored property is confined to `loop`.
/// Each entry point from elsewhere (``enqueue(_:ledger:)``, ``drain(timeout:)``)
/// hops onto `loop` first; the channel handlers and timers already run there.
/// `queuedCount` and `published` are the only state read from other threads,
/// and they are an atomic and a mutex.
final class GatewayDriver: @unchecked Sendable {
    let loop: any EventLoop
    let configuration: GatewayConfiguration
    let tls: TLSContext
    let gate: FlowGate
    let endpoint: String
    /// Notifications this slot holds and has not written yet (read by the transport to balance load).
    let queuedCount = Atomic<Int>(0)
    /// Statistics for other threads.
    let published = Mutex(GatewayStatistics())

    // Loop-confined.
    var machine: DeliveryMachine
    var ledger: OutcomeLedger?
    var connection: (number: Int, channel: any Channel)?
    var tlsStatistics = GatewayStatistics()
    var closeErrors: [Int: any Error] = [:]
    var timer: Scheduled<Void>?
    var timerDeadline: Duration?
    var drainPromise: EventLoopPromise<Void>?
    var stepping = false
    var stepAgain = false
    var countedQueued = 0
    var resolvedAddress: (SocketAddress, NIODeadline)?
    /// Connections opened ahead of need, their TLS sessions up, so that after
    /// an error response the next connection is there at once.
    var spares: [Spare] = []

    struct Spare {
        var channel: (any Channel)?
        let handler: GatewayChannelHandler
        var ready = false
        var resumed = false
    }

    /// Which of the transport's connection slots this is (for traces).
    let index: Int

    init(index: Int, loop: any EventLoop, configuration: GatewayConfiguration, tls: TLSContext, gate: FlowGate) {
        self.index = index
        self.loop = loop
        self.configuration = configuration
        self.tls = tls
        self.gate = gate
        self.endpoint = "\(configuration.host):\(configuration.port)"
        self.machine = DeliveryMachine(policy: configuration.delivery, endpoint: endpoint, seed: UInt64.random(in: 0...UInt64.max))
    }

    /// Connection events go to the configuration's logger at `trace` (times,
    /// connection numbers, counts: never a token or a payload);
    /// `HERALD_GATEWAY_TRACE=1` logs them whatever the logger's level.
    static let tracing = getenv("HERALD_GATEWAY_TRACE") != nil
    func trace(_ s: @autoclosure () -> String) {
        var logger = configuration.logger
        if Self.tracing { logger.logLevel = .trace }
        guard logger.logLevel <= .trace else { return }
        logger.trace(
            "\(s())",
            metadata: [
                "slot": "\(index)", "endpoint": "\(endpoint)", "uptime_us": "\(NIODeadline.now().uptimeNanoseconds / 1000)",
                "queued": "\(machine.queuedCount)", "in_flight": "\(machine.inFlightCount)",
            ])
    }

    /// The event loop's monotonic clock as the machine's time.
    var now: Duration { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }

    // MARK: - From the transport (any thread)

    /// Hands notifications over; the caller has counted them in the gate.
    func enqueue(_ items: consuming [DeliveryItem], ledger: OutcomeLedger) {
        let count = items.count
        queuedCount.add(count, ordering: .relaxed)
        // Moved to the loop, not captured: the machine then moves each item into its queue.
        let handoff = Handoff(items)
        loop.execute {
            self.ledger = ledger
            self.countedQueued += count
            self.machine.enqueue(moving: handoff.take(), now: self.now)
            self.step()
        }
    }

    /// Writes what is queued, has everything confirmed, and closes; what is
    /// unconfirmed after `timeout` fails.
    func drain(timeout: Duration) -> EventLoopFuture<Void> {
        loop.flatSubmit {
            // A second call (the signal started the drain, then finish) keeps the first deadline.
            if let pending = self.drainPromise { return pending.futureResult }
            let promise = self.loop.makePromise(of: Void.self)
            self.drainPromise = promise
            self.machine.drain(deadline: self.now + timeout, now: self.now)
            self.step()
            return promise.futureResult
        }
    }

    /// A signal: ``drain(timeout:)``, but what waits for a gateway that cannot be reached fails now
    /// (``DeliveryMachine/stop(deadline:now:)``).
    func stop(timeout: Duration) -> EventLoopFuture<Void> {
        loop.flatSubmit {
            self.machine.stop(deadline: self.now + timeout, now: self.now)
            self.step()  // what stop failed is recorded now, even when a drain was already under way
            return self.drain(timeout: timeout)
        }
    }

    /// Gives up on everything at once (a second signal).
    func abandon(_ reason: String) {
        loop.execute {
            self.machine.abandon(reason)
            self.step()
        }
    }

    // MARK: - The machine's turn

    /// Performs the machine's actions and writes until it has nothing more to do now.
    /// Re-entrant calls (a write that reads an answer or closes) run after.
    func step() {
        guard !stepping else {
            stepAgain = true
            return
        }
        stepping = true
        repeat {
            stepAgain = false
            for action in machine.takeActions() { perform(action) }
            for notice in machine.takeNotices() { configuration.logger.warning("\(notice)") }
            writeWhileWritable()
            let records = machine.takeOutcomes()
            if !records.isEmpty { ledger?.record(records) }
        } while stepAgain
        stepping = false
        if machine.isDrained || (machine.queuedCount == 0 && !machine.isReady) {
            closeSpares()
        } else {
            openSpareIfUseful()
        }
        settleAccounts()
        scheduleTimer()
        if machine.isDrained, let promise = drainPromise {
            drainPromise = nil
            timer?.cancel()
            timer = nil
            promise.succeed(())
        }
    }

    func writeWhileWritable() {
        guard let (n, channel) = connection, machine.isReady else { return }
        while channel.isWritable {
            var sink = ByteBufferSink(buffer: channel.allocator.buffer(capacity: configuration.delivery.writeBytes + 512))
            _ = machine.pollWrite(into: &sink, now: now)
            guard sink.buffer.readableBytes > 0 else { return }
            trace("write \(sink.buffer.readableBytes) bytes on \(n)")
            channel.writeAndFlush(sink.buffer, promise: nil)
            // The write may have delivered an answer or closed the connection.
            guard connection?.number == n, machine.isReady else { return }
        }
    }

    /// Keeps the flow gate and the published statistics in step with the machine.
    func settleAccounts() {
        let queued = machine.queuedCount
        let delta = queued - countedQueued
        countedQueued = queued
        queuedCount.add(delta, ordering: .relaxed)
        if delta < 0 { gate.remove(-delta) } else if delta > 0 { gate.add(delta) }
        var s = tlsStatistics
        s.delivery = machine.statistics
        s.outageSince = machine.outageSince
        s.lastError = machine.lastError
        published.withLock { $0 = s }
    }

    func scheduleTimer() {
        let writable = connection?.channel.isWritable ?? false
        let next = [machine.nextDeadline, writable ? machine.nextWriteDeadline : nil].compactMap { $0 }.min()
        guard next != timerDeadline else { return }
        timer?.cancel()
        timerDeadline = next
        guard let next else {
            timer = nil
            return
        }
        timer = loop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, next.inNanoseconds)))) {
            self.timerDeadline = nil
            self.timer = nil
            self.machine.timer(now: self.now)
            self.step()
        }
    }

    func perform(_ action: DeliveryMachine.Action) {
        switch action {
        case .connect(let n):
            if let k = spares.firstIndex(where: { $0.ready && $0.channel?.isActive == true }) {
                let s = spares.remove(at: k)
                let channel = s.channel!
                trace("connect \(n) (the spare, ready)")
                s.handler.connection = n
                connection = (n, channel)
                if s.resumed { tlsStatistics.resumedHandshakes += 1 }
                machine.connected(n, now: now)
            } else {
                trace("connect \(n)")
                connect(n)
            }
        case .close(let n):
            trace("close \(n)")
            if let (current, channel) = connection, current == n {
                connection = nil
                channel.close(promise: nil)
            }
        }
    }
}

/// Frames appended to a SwiftNIO buffer.
struct ByteBufferSink: FrameSink {
    var buffer: ByteBuffer
    var count: Int { buffer.readableBytes }
    mutating func appendFrame(_ frame: [UInt8], identifier: UInt32, at identifierOffset: Int?) {
        let start = buffer.writerIndex
        buffer.writeBytes(frame)
        if let identifierOffset { buffer.setInteger(identifier, at: start + identifierOffset) }
    }
}
