import Foundation
import HeapModule
import HeraldCore
import HeraldHTTP2

/// The in-memory HTTP/2 transport: drives the ``HTTP2DeliveryMachine`` (the
/// rules the TLS transport will run) against an ``HTTP2Simulator``, in virtual
/// time. Requests are built with ``APNsRequestBuilder`` (what APNs would refuse
/// ends `dropped` here), streams are limited as the simulator announces, and
/// its faults (GOAWAY, 503, 429, 500, resets, lost answers) reach the machine
/// as a connection would deliver them. When nothing can happen before a
/// deadline (a backoff, a request timeout), the clock jumps to it.
///
/// Every envelope handed to ``send(_:outcomes:)`` is recorded before it returns.
public actor HTTP2SimulatorTransport: Transport, TransportReporting, WireDescribing {
    public nonisolated var wire: TransportWire { .http2 }

    enum Event {
        case connected(Int)
        case reply(stream: Int, HTTP2Simulator.Reply)
        case goAway(Int)
        case pong(Int)
    }

    struct Scheduled: Comparable {
        var at: Duration
        var order: Int
        var event: Event
        static func < (a: Self, b: Self) -> Bool { (a.at, a.order) < (b.at, b.order) }
        static func == (a: Self, b: Self) -> Bool { (a.at, a.order) == (b.at, b.order) }
    }

    public nonisolated let simulator: HTTP2Simulator
    let builder: APNsRequestBuilder
    var machine: HTTP2DeliveryMachine
    /// Virtual time since 1970; starts at the real time (provider tokens carry it).
    public private(set) var now: Duration
    var events = Heap<Scheduled>()
    var order = 0
    var connectionOf: [Int: Int] = [:]
    var cancelled: Set<Int> = []
    var closed: Set<Int> = []
    var announced: [Int: Int] = [:]
    var records: [OutcomeRecord] = []
    var dead: [(DeviceToken, Int64?)] = []
    /// Virtual time one answer takes.
    let latency = Duration.milliseconds(1)

    public init(
        simulator: HTTP2Simulator, tokens: ProviderTokens? = nil, policy: HTTP2DeliveryPolicy = HTTP2DeliveryPolicy(),
        defaultTopic: String? = nil
    ) {
        self.init(simulator: simulator, sharedTokens: tokens.map(SharedProviderTokens.init), policy: policy, defaultTopic: defaultTopic)
    }

    /// A transport whose provider token is shared with other transports of the same team (`apps`).
    public init(
        simulator: HTTP2Simulator, sharedTokens: SharedProviderTokens?, policy: HTTP2DeliveryPolicy = HTTP2DeliveryPolicy(),
        defaultTopic: String? = nil
    ) {
        self.simulator = simulator
        builder = APNsRequestBuilder(defaultTopic: defaultTopic ?? simulator.configuration.bundleID)
        machine = HTTP2DeliveryMachine(policy: policy, sharedTokens: sharedTokens, seed: simulator.configuration.faults.seed &+ 1)
        now = .seconds(Int64(Date().timeIntervalSince1970))
    }

    /// What the delivery machine did.
    public var statistics: HTTP2Statistics { machine.statistics }
    public var counters: [(name: String, value: Int)] { machine.statistics.counters }
    /// How many provider tokens were signed.
    public var tokensSigned: Int { machine.tokens?.signed ?? 0 }

    /// Tokens APNs answered 410 for, with the answer's timestamp, since the last call.
    public func takeDeadTokens() -> [(DeviceToken, Int64?)] { defer { dead.removeAll() }; return dead }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        let (items, dropped) = builder.items(for: batch)
        records += dropped
        machine.enqueue(items, now: now)
        run()
        await Task.yield()
        outcomes.record(records)
        records.removeAll(keepingCapacity: true)
    }

    public func finish(outcomes: OutcomeLedger) async {}

    /// Runs events and deadlines until the machine has nothing left.
    func run() {
        perform()
        while !(machine.isSettled && events.isEmpty) {
            let deadline = machine.nextDeadline
            if let next = events.min, deadline.map({ next.at <= $0 }) ?? true {
                let e = events.removeMin()
                now = max(now, e.at)
                deliver(e.event)
            } else if let deadline {
                now = max(now, deadline)
                machine.timer(now: now)
            } else {
                break
            }
            perform()
        }
    }

    func schedule(_ event: Event, after delay: Duration) {
        order += 1
        events.insert(Scheduled(at: now + delay, order: order, event: event))
    }

    func perform() {
        for action in machine.takeActions() {
            switch action {
            case .connect(let c): schedule(.connected(c), after: latency * 2)
            case .send(let c, let stream, let authorization):
                let now = now
                var answer: HTTP2Simulator.Reply?
                guard machine.withRequest(ofStream: stream, { request, _ in answer = simulator.handle(request, authorization: authorization, connection: c, now: now) }),
                      let reply = answer
                else { continue }
                connectionOf[stream] = c
                if simulator.isGoingAway(c) && announced[c] != -1 {
                    announced[c] = -1
                    schedule(.goAway(c), after: latency / 2)
                }
                schedule(.reply(stream: stream, reply), after: latency)
            case .cancel(_, let stream): cancelled.insert(stream)
            case .ping(let c): schedule(.pong(c), after: latency)
            case .close(let c): closed.insert(c)
            }
        }
        records += machine.takeOutcomes()
        dead += machine.takeDeadTokens()
    }

    func deliver(_ event: Event) {
        switch event {
        case .connected(let c):
            guard !closed.contains(c) else { return }
            announced[c] = simulator.maxStreams(on: c)
            machine.connected(c, maxStreams: announced[c]!, now: now)
        case .goAway(let c):
            guard !closed.contains(c) else { return }
            machine.goAway(c, reason: "Shutdown", now: now)
        case .pong(let c):
            machine.pong(c, now: now)
        case .reply(let stream, let reply):
            let c = connectionOf.removeValue(forKey: stream)!
            guard !cancelled.contains(stream), !closed.contains(c) else { return }
            switch reply {
            case .answer(let response): machine.answered(stream, response, now: now)
            case .reset: machine.streamFailed(stream, unprocessed: false, reason: "RST_STREAM", now: now)
            case .refused: machine.streamFailed(stream, unprocessed: true, reason: "GOAWAY: above the last stream id", now: now)
            case .silence: break
            }
            let limit = simulator.maxStreams(on: c)
            if announced[c] != -1, announced[c] != limit {
                announced[c] = limit
                machine.settingsChanged(c, maxStreams: limit, now: now)
            }
        }
    }
}
