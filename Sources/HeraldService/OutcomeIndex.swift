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
        var records: [UInt64: OutcomeRecord] = [:]
        var order = Deque<UInt64>()
        /// Ids below this may have been forgotten.
        var forgottenBelow: UInt64 = 0
        var counts: [Outcome.Kind: Int] = [:]
    }
    let state = Mutex(State())
    public let capacity: Int
    let counters: [Outcome.Kind: Counter]
    let metrics: any MetricsFactory
    /// `herald_outcome_reasons_total{outcome, reason}` by (kind, reason), made as reasons appear.
    let reasonCounters = Mutex<[String: Counter]>([:])
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
    }

    /// A bounded label for why a request ended: the status and Apple's reason
    /// for `rejected`, the reason's code for `dropped` and `failed` (never its
    /// message, which names lines and tokens); `nil` for the others.
    static func reasonLabel(_ o: Outcome) -> String? {
        switch o {
        case .rejected(let s):
            // APNs' reasons are short words; anything else a server sends is "other", so labels stay few.
            let word = s.reason.map { r in r.utf8.count <= 40 && r.utf8.allSatisfy { $0 < 0x80 && (Character(UnicodeScalar($0)).isLetter || Character(UnicodeScalar($0)).isNumber) } ? r : "other" }
            return "\(s.rawValue) \(word ?? s.description)"
        case .dropped(let r), .failed(let r): return r.code.name
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
        state.withLock { s in
            for r in records {
                s.records[r.sequence] = r
                s.order.append(r.sequence)
            }
            while s.order.count > capacity {
                let old = s.order.removeFirst()
                s.records[old] = nil
                s.forgottenBelow = max(s.forgottenBelow, old + 1)
            }
            for (k, n) in kinds { s.counts[k, default: 0] += n }
        }
        var reasons: [String: (Outcome.Kind, String, Int)] = [:]
        for r in records {
            guard let label = Self.reasonLabel(r.outcome) else { continue }
            let key = "\(r.outcome.kind.rawValue)|\(label)"
            reasons[key, default: (r.outcome.kind, label, 0)].2 += 1
        }
        guard !reasons.isEmpty else { return }
        let made = reasonCounters.withLock { cache in
            reasons.map { key, v in
                if let c = cache[key] { return (c, v.2) }
                let c = Counter(label: "herald_outcome_reasons_total", dimensions: [("outcome", v.0.rawValue), ("reason", v.1)], factory: metrics)
                cache[key] = c
                return (c, v.2)
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
            return id < s.forgottenBelow ? .forgotten : .pending
        }
    }

    /// Outcomes recorded, by kind.
    public var counts: [Outcome.Kind: Int] { state.withLock { $0.counts } }
}

/// swift-metrics' types, named apart from swift-prometheus' own `Counter` and `Gauge`.
typealias MetricsCounter = Counter
typealias MetricsGauge = Gauge
