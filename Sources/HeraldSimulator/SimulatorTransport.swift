import HeraldBinary
import HeraldCore

/// The in-memory transport: drives the binary interface's ``DeliveryMachine``
/// (the same rules as the TLS gateway transport) against an ``APNsSimulator``
/// gateway, in virtual time. `herald send`'s embedded default.
///
/// Frames go to a ``GatewayConnection`` as bytes and its answers come back as
/// bytes; the simulator's faults (silent closes, status 10, lost answers,
/// writes cut mid-frame, stalls, slow handshakes, partial writes, read
/// pauses, late answers) reach the machine exactly as a socket would deliver
/// them. Time is virtual: when nothing can happen until a deadline (a
/// backoff, a probe's answer timeout), the clock jumps to it, so thousands of
/// seeded fault mixes run in seconds.
///
/// Every envelope handed to ``send(_:outcomes:)`` is recorded before it returns.
public actor SimulatorTransport: Transport {
    /// How the transport delivers.
    public struct Options: Sendable, Hashable {
        /// The app the connections send for (store-and-forward is per app).
        public var topic = "default"
        /// The delivery rules (shared with the TLS gateway transport).
        public var delivery = DeliveryPolicy()
        public init(topic: String = "default", delivery: DeliveryPolicy = DeliveryPolicy()) {
            self.topic = topic
            self.delivery = delivery
        }
    }

    /// The simulated APNs behind the transport.
    public nonisolated let simulator: APNsSimulator
    public nonisolated let options: Options
    var machine: DeliveryMachine
    var connection: (number: Int, link: GatewayConnection)?
    /// Bytes written and not yet read by the gateway (a partial read, a stall).
    var pending: [UInt8] = []
    var pendingStart = 0
    var buffer = WriteBuffer(capacity: 1 << 16)
    var records: [OutcomeRecord] = []
    /// Virtual time since the transport started.
    public private(set) var now = Duration.zero

    public init(simulator: APNsSimulator, options: Options = Options()) {
        self.simulator = simulator
        self.options = options
        self.machine = DeliveryMachine(policy: options.delivery, endpoint: "the simulator", seed: simulator.configuration.faults.seed)
    }

    /// A transport over a fresh simulator with the given payload limit; the
    /// listed tokens are invalid (status 8).
    public init(payloadLimit: Int = 2048, invalidTokens: Set<DeviceToken> = []) {
        let simulator = APNsSimulator(configuration: SimulatorConfiguration(payloadLimit: payloadLimit))
        for t in invalidTokens { simulator.markInvalid(t) }
        self.init(simulator: simulator)
    }

    /// What the delivery machine did.
    public var statistics: DeliveryStatistics { machine.statistics }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        // The items built straight into the machine's queue.
        var out: [OutcomeRecord] = []
        machine.enqueue(now: now) { add in out = DeliveryItem.items(of: batch, unframed: Self.unframed, add) }
        // Moved when nothing came before them (appending copies every record).
        if out.isEmpty { out = settled() } else { out += settled() }
        // The work above is synchronous: let other tasks on the cooperative pool run between batches.
        await Task.yield()
        outcomes.record(out)
    }

    /// Why an envelope with no frame fails.
    static let unframed = "transport: the envelope has no frame"

    public func finish(outcomes: OutcomeLedger) async {
        outcomes.record(drained())
    }

    /// Delivers `items` and returns their records (``ShardedSimulatorTransport`` records its shards' together).
    func deliver(_ items: consuming [DeliveryItem]) -> [OutcomeRecord] {
        machine.enqueue(moving: items, now: now)
        return settled()
    }

    /// Runs until the machine has settled what it was given; the records since the last call.
    func settled() -> [OutcomeRecord] {
        run { $0.isSettled }
        var out: [OutcomeRecord] = []
        swap(&out, &records)
        return out
    }

    /// Drains the machine and returns what was left to record.
    func drained() -> [OutcomeRecord] {
        machine.drain(deadline: now + .seconds(3600), now: now)
        run { $0.isDrained }
        var out: [OutcomeRecord] = []
        swap(&out, &records)
        return out
    }

    /// Performs the machine's actions and writes until `done`, letting virtual time pass when nothing else can happen.
    func run(until done: (DeliveryMachine) -> Bool) {
        while true {
            perform(machine.takeActions())
            // Moved when nothing waits before them (appending copies every record).
            if records.isEmpty { records = machine.takeOutcomes() } else { records.append(contentsOf: machine.takeOutcomes()) }
            if done(machine) { return }
            if connection != nil && pendingStart < pending.count {
                if deliverPending() { continue }
            } else if connection != nil && machine.isReady {
                buffer.clear()
                _ = machine.pollWrite(into: &buffer, now: now)
                if buffer.count > 0 {
                    pending = buffer.bytes
                    pendingStart = 0
                    _ = deliverPending()
                    continue
                }
            }
            // The provider waits for an answer: one the gateway held back arrives now.
            if let (n, link) = connection {
                let reply = link.flush()
                if !reply.response.isEmpty || reply.closed {
                    handle(reply, on: n)
                    continue
                }
            }
            // Nothing to do until a deadline; a probe's deadline counts only if the gateway is reading.
            let blocked = pendingStart < pending.count
            let deadlines = [machine.nextDeadline, blocked ? nil : machine.nextWriteDeadline].compactMap { $0 }
            guard let next = deadlines.min() else {
                machine.abandon("the in-memory transport had nothing left to wait for (a bug: please report it)")
                continue
            }
            now = max(now, next)
            machine.timer(now: now)
        }
    }

    func perform(_ actions: [DeliveryMachine.Action]) {
        for action in actions {
            switch action {
            case .connect(let n):
                let link = simulator.openConnection(topic: options.topic)
                if link.isRefused {
                    now += .milliseconds(1)
                    machine.closed(n, reason: .transient("connection refused (the simulator's outage)"), now: now)
                    continue
                }
                if let delay = link.handshakeDelay { now += delay }
                connection = (n, link)
                pending = []
                pendingStart = 0
                machine.connected(n, now: now)
            case .close(let n):
                guard let (current, link) = connection, current == n else { continue }
                _ = link.endOfInput()
                connection = nil
            }
        }
    }

    /// Offers the unread bytes to the gateway; returns whether it read any.
    func deliverPending() -> Bool {
        guard let (n, link) = connection else { return false }
        let start = pendingStart
        let reply = pending.withUnsafeBytes { link.receive(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        pendingStart += reply.consumed
        if let delay = reply.readDelay { now += delay }
        handle(reply, on: n)
        return reply.consumed > 0 || reply.closed
    }

    func handle(_ reply: GatewayReply, on n: Int) {
        if !reply.response.isEmpty {
            reply.response.withUnsafeBytes { machine.read(n, $0, now: now) }
        }
        if reply.closed {
            if connection?.number == n { connection = nil }
            pending = []
            pendingStart = 0
            machine.closed(n, reason: .transient(nil), now: now)
        }
    }
}

extension SimulatorTransport: TransportReporting {
    public var counters: [(name: String, value: Int)] { statistics.counters }
}
