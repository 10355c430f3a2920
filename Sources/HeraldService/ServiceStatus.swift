import DequeModule
import Foundation
import HeraldCore
import HeraldJSON
import ServiceLifecycle
import Synchronization

/// The service's totals every `interval`, the last `capacity` of them (10 minutes
/// at 5 s): what the operator's page draws its rates from, so that a page opened
/// now shows the minutes before it. Runs as a service of the group; a graceful
/// shutdown ends it.
final class StatusHistory: Service, Sendable {
    struct Sample: Sendable {
        /// UNIX milliseconds.
        let at: Int64
        let outcomes: [Outcome.Kind: Int]
        let requests: Int
        let queueDepth: Int
    }

    /// A count read from another task (the requests taken).
    final class Count: Sendable {
        let atomic = Atomic<Int>(0)
        func add(_ n: Int) { atomic.add(n, ordering: .relaxed) }
        var value: Int { atomic.load(ordering: .relaxed) }
    }

    let interval: Duration
    let capacity: Int
    let samples = Mutex(Deque<Sample>())
    let take: @Sendable () async -> Sample

    init(interval: Duration = .seconds(5), capacity: Int = 120, take: @escaping @Sendable () async -> Sample) {
        self.interval = interval
        self.capacity = capacity
        self.take = take
    }

    func record() async {
        let sample = await take()
        samples.withLock { s in
            s.append(sample)
            if s.count > capacity { s.removeFirst() }
        }
    }

    /// Samples until a graceful shutdown (or cancellation), then returns: a service that
    /// threw there would end the group with an error instead of the summary.
    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    await self.record()
                    try await Task.sleep(for: self.interval)
                }
            }
        } catch is CancellationError {
        }
    }

    var all: [Sample] { samples.withLock { Array($0) } }

}

extension HeraldService {
    /// `GET /v1/status`: what the operator's page (`GET /`) shows, as JSON (openapi.yaml, `Status`).
    func statusDocument() async -> [UInt8] {
        let summary = outcomes.summary
        let depth = await intake.depth()
        var transport: [(String, Int)] = []
        for (name, value) in await (pipeline.transport as? any TransportReporting)?.counters ?? [] { transport.append((name, value)) }
        var health = JSONLine()
        if !running.load(ordering: .relaxed) || intakeClosed {
            health.add("ready", false)
            health.add("reason", "the pipeline is not running (starting or shutting down)")
        } else if let reporting = pipeline.transport as? any TransportHealthReporting, case .unavailable(let why) = reporting.health {
            health.add("ready", false)
            health.add("reason", why)
        } else {
            health.add("ready", true)
        }

        var doc = JSONLine()
        doc.add("time", Int(Duration.sinceEpochMilliseconds))
        doc.add("startedAt", Int(startedAt))
        doc.add("health", health)
        doc.add("requests", requestsTaken.value)
        doc.add("queueDepth", depth)
        if let since = await intake.oldestWaiting() { doc.add("oldestWaitingSince", Int(since)) }
        doc.add("outcomes", Self.kinds(summary.counts))
        doc.add("deadTokens", summary.deadTokens)
        doc.add("reasons", summary.reasons.prefix(20).map { r in
            var o = JSONLine()
            o.add("outcome", r.outcome.rawValue)
            o.add("reason", r.reason)
            o.add("count", r.count)
            return o
        })
        doc.add("apps", configuration.apps.map { app in
            var o = JSONLine()
            o.add("name", app)
            o.add("outcomes", Self.kinds(summary.apps[app] ?? [:]))
            return o
        })
        var counters = JSONLine()
        for (name, value) in transport { counters.add(name, value) }
        doc.add("transport", counters)
        doc.add("recentFailures", summary.recentFailures.map { f in
            var o = JSONLine()
            if let id = intake.notificationID(ofSequence: f.sequence) { o.add("id", id) }
            o.add("outcome", f.outcome.rawValue)
            o.add("reason", f.reason)
            if let token = f.token { o.add("token", token) }
            if let app = f.app { o.add("app", app) }
            o.add("at", Int(f.at))
            return o
        })
        var history = JSONLine()
        history.add("intervalSeconds", Int(statusHistory.interval.components.seconds))
        history.add("samples", statusHistory.all.map { s in
            var o = JSONLine()
            o.add("at", Int(s.at))
            o.add("requests", s.requests)
            o.add("queueDepth", s.queueDepth)
            o.add("outcomes", Self.kinds(s.outcomes))
            return o
        })
        doc.add("history", history)
        return doc.bytes
    }

    /// Every outcome kind with its count (0 where none).
    static func kinds(_ counts: [Outcome.Kind: Int]) -> JSONLine {
        var o = JSONLine()
        for k in Outcome.Kind.allCases { o.add(k.rawValue, counts[k] ?? 0) }
        return o
    }

    /// The operator's page (`Sources/HeraldService/operator.html`, a resource of this module).
    public static let operatorPage: [UInt8]? = Bundle.module.url(forResource: "operator", withExtension: "html")
        .flatMap { try? Data(contentsOf: $0) }.map { Array($0) }
}
