import DequeModule
import HeraldCore
import Metrics
import Synchronization

/// Keeps the most recent outcomes by id (the pipeline's sequence number) for
/// `GET /v1/notifications/{id}`, and counts every outcome in the service's
/// metrics. Memory is bounded: past `capacity`, the oldest outcomes are
/// forgotten (their id then answers 404 `expired`).
public final class OutcomeIndex: OutcomeObserver {
    struct State {
        /// By id, in 256 tables by the id's low byte: one dictionary of up to `capacity` (a million
        /// by default) records doubled in one step under this lock, 100-125 ms at 196,608 records,
        /// and outcomes reached nobody meanwhile (docs/benchmarks.md, "Stop 68").
        var records = SpreadTable<UInt64, OutcomeRecord>()
        var order = Deque<UInt64>()
        /// Every id decided: an id decided and no longer in `records` was forgotten. (Ids are
        /// decided out of order: a fast-lane request numbered after a queued campaign is decided
        /// before it, and forgetting it says nothing of the campaign's ids still pending.)
        var decided = DecidedIDs()
        var counts: [Outcome.Kind: Int] = [:]
        /// For the operator's page (`GET /v1/status`): outcomes by app and by reason, the
        /// latest failures, and the answers that said a token is dead.
        var appCounts: [String: [Outcome.Kind: Int]] = [:]
        var reasonCounts: [ReasonKey: Int] = [:]
        var recentFailures = Deque<RecentFailure>()
        var deadTokens = 0
    }

    struct ReasonKey: Hashable {
        var outcome: Outcome.Kind
        var reason: String
    }

    /// A request that ended rejected, failed or dropped, as the operator's page lists it:
    /// the bounded reason label (never the message, which names lines and tokens) and
    /// the token redacted.
    public struct RecentFailure: Sendable {
        public let sequence: UInt64
        public let outcome: Outcome.Kind
        public let reason: String
        public let token: String?
        public let app: String?
        /// UNIX milliseconds when it was recorded.
        public let at: Int64
    }

    /// What the operator's page shows of the outcomes so far.
    public struct Summary: Sendable {
        public var counts: [Outcome.Kind: Int]
        public var apps: [String: [Outcome.Kind: Int]]
        /// By count, most first.
        public var reasons: [(outcome: Outcome.Kind, reason: String, count: Int)]
        /// Newest first.
        public var recentFailures: [RecentFailure]
        public var deadTokens: Int
    }

    /// Failures kept for the operator's page.
    static let recentFailureCount = 20
    let state = Mutex(State())
    public let capacity: Int
    let counters: [Outcome.Kind: Counter]
    let metrics: any MetricsFactory
    /// `herald_outcome_reasons_total{outcome, reason}` by (kind, reason): ``watchedReasons`` made at
    /// start, the others as they appear.
    let reasonCounters = Mutex<[ReasonKey: Counter]>([:])
    /// `herald_app_outcomes_total{app, outcome}` for the configured apps, each kind from the start.
    let appCounters: [String: [Outcome.Kind: Counter]]

    /// `apps`: the configuration's app names (only those become labels).
    public init(capacity: Int, metrics: any MetricsFactory, apps: [String] = []) {
        self.capacity = capacity
        var c: [Outcome.Kind: Counter] = [:]
        for k in Outcome.Kind.allCases {
            c[k] = Counter(label: "herald_outcomes_total", dimensions: [("outcome", k.rawValue)], factory: metrics)
        }
        counters = c
        var a: [String: [Outcome.Kind: Counter]] = [:]
        for app in apps {
            for k in Outcome.Kind.allCases {
                a[app, default: [:]][k] = Counter(label: "herald_app_outcomes_total", dimensions: [("app", app), ("outcome", k.rawValue)], factory: metrics)
            }
        }
        appCounters = a
        self.metrics = metrics
        // The reasons an operator watches first are on the first scrape, at 0, so the family is
        // there before anything fails (a dashboard's rate() needs a series); the rest from their first.
        reasonCounters.withLock { cache in
            for key in Self.watchedReasons {
                cache[key] = Counter(label: "herald_outcome_reasons_total", dimensions: [("outcome", key.outcome.rawValue), ("reason", key.reason)], factory: metrics)
            }
        }
    }

    /// `herald_outcome_reasons_total`'s series made at start: dead tokens (HTTP/2 and the binary
    /// interface), bad input, and an unreachable APNs.
    static let watchedReasons: [ReasonKey] = [
        ReasonKey(outcome: .rejected, reason: "410 Unregistered"),
        ReasonKey(outcome: .rejected, reason: "400 BadDeviceToken"),
        ReasonKey(outcome: .rejected, reason: "8 invalid token"),
        ReasonKey(outcome: .dropped, reason: OutcomeReason.Code.invalidRequest.name),
        ReasonKey(outcome: .dropped, reason: OutcomeReason.Code.payloadTooLarge.name),
        ReasonKey(outcome: .failed, reason: OutcomeReason.Code.gatewayUnreachable.name),
    ]

    /// A bounded label for why a request ended: the status and Apple's reason
    /// for `rejected`, the reason's code for `dropped` and `failed` (never its
    /// message, which names lines and tokens); `nil` for the others.
    static func reasonLabel(_ o: Outcome) -> String? {
        switch o {
        case .rejected(let s):
            // APNs' reasons are short words; anything else a server sends is "other", so labels stay few.
            let word = s.reason.map { r in r.utf8.count <= 40 && r.utf8.allSatisfy { $0 < 0x80 && (Character(UnicodeScalar($0)).isLetter || Character(UnicodeScalar($0)).isNumber) } ? r : "other" }
            return "\(s.rawValue) \(word ?? s.description)"
        case .dropped(let r), .failed(let r), .cancelled(let r): return r.code.name
        case .accepted, .suppressed: return nil
        }
    }

    public func observe(_ records: [OutcomeRecord]) {
        var kinds: [Outcome.Kind: Int] = [:]
        for r in records { kinds[r.outcome.kind, default: 0] += 1 }
        // Counted before the records can be read by id: a client that saw its notification
        // decided (GET) and then scrapes /metrics finds it counted.
        for (k, n) in kinds { counters[k]?.increment(by: n) }
        if !appCounters.isEmpty {
            var byApp: [String: [Outcome.Kind: Int]] = [:]
            for r in records { if let app = r.app, appCounters[app] != nil { byApp[app, default: [:]][r.outcome.kind, default: 0] += 1 } }
            for (app, kinds) in byApp { for (k, n) in kinds { appCounters[app]?[k]?.increment(by: n) } }
        }
        // Each record's reason label, made once: for the page's counts and failures and for the counters.
        let labels = records.map { Self.reasonLabel($0.outcome) }
        var reasons: [ReasonKey: Int] = [:]
        for (r, label) in zip(records, labels) {
            if let label { reasons[ReasonKey(outcome: r.outcome.kind, reason: label), default: 0] += 1 }
        }
        let now = Duration.sinceEpochMilliseconds
        state.withLock { s in
            for r in records {
                s.records[r.sequence] = r
                s.order.append(r.sequence)
                s.decided.insert(r.sequence)
            }
            while s.order.count > capacity {
                let old = s.order.removeFirst()
                s.records[old] = nil
            }
            for (k, n) in kinds { s.counts[k, default: 0] += n }
            for (key, n) in reasons { s.reasonCounts[key, default: 0] += n }
            for (r, label) in zip(records, labels) {
                if let app = r.app { s.appCounts[app, default: [:]][r.outcome.kind, default: 0] += 1 }
                if case .rejected(let status) = r.outcome, status.meansDeadToken { s.deadTokens += 1 }
                guard let label, r.outcome.kind == .rejected || r.outcome.kind == .failed || r.outcome.kind == .dropped else { continue }
                s.recentFailures.append(
                    RecentFailure(sequence: r.sequence, outcome: r.outcome.kind, reason: label, token: r.token?.redacted, app: r.app, at: now))
                if s.recentFailures.count > Self.recentFailureCount { s.recentFailures.removeFirst() }
            }
        }
        guard !reasons.isEmpty else { return }
        let made = reasonCounters.withLock { cache in
            reasons.map { key, n in
                if let c = cache[key] { return (c, n) }
                let c = Counter(label: "herald_outcome_reasons_total", dimensions: [("outcome", key.outcome.rawValue), ("reason", key.reason)], factory: metrics)
                cache[key] = c
                return (c, n)
            }
        }
        for (c, n) in made { c.increment(by: n) }
    }

    /// What is known of `id`.
    public enum Lookup: Sendable {
        case decided(OutcomeRecord)
        case pending
        case forgotten
        case unknown
    }

    public func lookup(_ id: UInt64, issued: UInt64) -> Lookup {
        state.withLock { s in
            if let r = s.records[id] { return .decided(r) }
            if id >= issued { return .unknown }
            return s.decided.contains(id) ? .forgotten : .pending
        }
    }

    /// Outcomes recorded, by kind.
    public var counts: [Outcome.Kind: Int] { state.withLock { $0.counts } }

    /// Outcomes by kind, app and reason, the latest failures and the dead tokens learned.
    public var summary: Summary {
        state.withLock { s in
            Summary(
                counts: s.counts, apps: s.appCounts,
                reasons: s.reasonCounts.map { ($0.key.outcome, $0.key.reason, $0.value) }
                    .sorted { ($0.count, $1.outcome.rawValue, $1.reason) > ($1.count, $0.outcome.rawValue, $0.reason) },
                recentFailures: s.recentFailures.reversed(), deadTokens: s.deadTokens)
        }
    }
}

/// The ids decided so far, in memory proportional to the span between the
/// oldest id still undecided and the newest decided: every id below `low` is
/// decided; above it, a bitmap.
struct DecidedIDs {
    /// Every id below is decided.
    private(set) var low: UInt64 = 0
    /// Bit k of `words[i]`: id `base + 64 i + k` is decided; `base` is `low` rounded down to 64.
    private var words = Deque<UInt64>()
    private var base: UInt64 = 0

    mutating func insert(_ id: UInt64) {
        guard id >= low else { return }
        let w = Int(clamping: (id - base) >> 6)
        if w >= words.count { words.append(contentsOf: repeatElement(0, count: w - words.count + 1)) }
        words[w] |= 1 << (id & 63)
        // Past the ids now all decided, whole words at a time where they are full.
        while let first = words.first {
            let bit = low & 63
            if bit == 0 && first == .max {
                words.removeFirst()
                base += 64
                low = base
                continue
            }
            guard first & (1 << bit) != 0 else { return }
            low += 1
            if low & 63 == 0 {
                words.removeFirst()
                base = low
            }
        }
    }

    func contains(_ id: UInt64) -> Bool {
        if id < low { return true }
        let w = Int(clamping: (id - base) >> 6)
        return w < words.count && words[w] & (1 << (id & 63)) != 0
    }
}

/// swift-metrics' types, named apart from swift-prometheus' own `Counter` and `Gauge`.
typealias MetricsCounter = Counter
typealias MetricsGauge = Gauge
