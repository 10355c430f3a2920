import HeraldCore
import Synchronization

/// Custom stages Herald ships, selectable by name in configuration.
enum BuiltinStages {
    static func register(in r: HeraldRegistry) {
        r.registerStage("filter-topic") { node in
            guard let topics = try node.strings("topics"), !topics.isEmpty else {
                throw node.error("topics", "required: the topics to drop")
            }
            return TopicFilterStage(topics: Set(topics), reason: try node.string("reason"))
        }
        r.registerStage("rate-limit") { node in
            guard let rate = try node.int("perSecond", in: 1...100_000_000) else {
                throw node.error("perSecond", "required: requests per second")
            }
            return RateLimitStage(perSecond: rate)
        }
    }
}

/// Drops requests for the given topics (a paused app, a retired bundle id).
public struct TopicFilterStage: EnvelopeStage, ConcurrentStage {
    public let topics: Set<String>
    public let reason: String
    public init(topics: Set<String>, reason: String? = nil) {
        self.topics = topics
        self.reason = reason ?? "topic is filtered"
    }
    public func apply(_ envelope: inout Envelope) throws(StageFailure) {
        if let t = envelope.request.topic, topics.contains(t) { envelope.outcome = .dropped("\(reason): \(t)") }
    }
}

/// Limits throughput to a number of requests per second by waiting: a token
/// bucket refilled continuously, at most one second of burst.
public actor RateLimitStage: PipelineStage {
    public let perSecond: Int
    var available: Double
    var last: ContinuousClock.Instant
    let clock = ContinuousClock()

    public init(perSecond: Int) {
        self.perSecond = perSecond
        self.available = Double(perSecond)
        self.last = ContinuousClock.now
    }

    public func process(_ batch: inout [Envelope]) async throws {
        let now = clock.now
        let elapsed = now - last
        last = now
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        available = min(Double(perSecond), available + seconds * Double(perSecond))
        available -= Double(batch.count)
        if available < 0 {
            // Wait until the debt is paid. A graceful stop waits too (what entered drains at
            // the configured pace); a second signal cancels the stage's task, which ends the wait.
            try? await Task.sleep(for: .seconds(-available / Double(perSecond)))
        }
    }
}

/// The frame position with an HTTP/2 transport: nothing to do here. The
/// transport builds each request (``APNsRequestBuilder``) on its way to the
/// wire and ends what APNs would refuse as `dropped`; custom stages configured
/// after `frame` still run at this point.
struct HTTP2FramePosition: ConcurrentStage {
    func process(_ batch: inout [Envelope]) async throws {}
}
