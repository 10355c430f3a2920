import Foundation
import HeraldCore

/// Where and how `herald serve` posts outcomes to the caller (the
/// configuration's `outcomes.webhook`): dead tokens and failures by default,
/// so the caller can clean its database without polling.
public struct WebhookConfiguration: Sendable {
    /// `http://` or `https://` (verified against the system's roots, or `caFile`).
    public var url: String
    /// The outcome kinds posted (`rejected` and `failed` by default).
    public var kinds: Set<Outcome.Kind> = [.rejected, .failed]
    /// Most outcomes in one POST.
    public var batchSize = 500
    /// How long an outcome may wait for its batch to fill.
    public var flushInterval: Duration = .milliseconds(500)
    /// Outcomes waiting to be posted before new ones are counted as overflow (and not posted).
    public var maxQueued = 100_000
    /// Attempts per batch (the first included) before it is given up.
    public var attempts = 8
    /// Per POST, connecting included.
    public var timeout: Duration = .seconds(10)
    /// How long, once the pipeline has drained, the webhook may keep posting what is left.
    public var drainTimeout: Duration = .seconds(15)
    /// Sent as `Authorization: Bearer …`; never logged.
    public var bearerToken: String?
    /// A PEM file of extra trust roots (a private CA).
    public var caFile: String?

    public init(url: String) { self.url = url }

    /// Reads `outcomes.webhook`: `url` (required), `kinds`, `batch`,
    /// `flushMilliseconds`, `maxQueued`, `attempts`, `timeoutSeconds`,
    /// `drainSeconds`, `tokenFile` or `tokenEnv`, `caFile`.
    public static func load(_ node: ConfigNode) throws(ConfigError) -> WebhookConfiguration {
        guard let url = try node.string("url") else { throw node.error("url", "required: where to POST outcomes (http:// or https://)") }
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            parsed.host?.isEmpty == false
        else { throw node.error("url", "must be an http:// or https:// URL with a host, got \"\(url)\"") }
        var c = WebhookConfiguration(url: url)
        if let names = try node.strings("kinds") {
            var kinds: Set<Outcome.Kind> = []
            for name in names {
                guard let k = Outcome.Kind(rawValue: name) else {
                    throw node.error("kinds", "unknown outcome \"\(name)\"; known: \(Outcome.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                kinds.insert(k)
            }
            guard !kinds.isEmpty else { throw node.error("kinds", "must name at least one outcome") }
            c.kinds = kinds
        }
        c.batchSize = try node.int("batch", in: 1...100_000) ?? c.batchSize
        if let ms = try node.int("flushMilliseconds", in: 0...600_000) { c.flushInterval = .milliseconds(ms) }
        c.maxQueued = try node.int("maxQueued", in: 1...100_000_000) ?? c.maxQueued
        c.attempts = try node.int("attempts", in: 1...100) ?? c.attempts
        if let s = try node.int("timeoutSeconds", in: 1...600) { c.timeout = .seconds(s) }
        if let s = try node.int("drainSeconds", in: 0...3600) { c.drainTimeout = .seconds(s) }
        c.caFile = try node.path("caFile")
        switch try node.secret(fileKey: "tokenFile", environmentKey: "tokenEnv", limit: 1 << 16) {
        case (let text, .file)?:
            c.bearerToken = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) }
            if c.bearerToken?.isEmpty ?? true { throw node.error("tokenFile", "\(try node.path("tokenFile") ?? "the file") holds no token") }
        case (let text, .environment)?:
            guard !text.isEmpty else { throw node.error("tokenEnv", "the environment variable \(try node.string("tokenEnv") ?? "") is not set") }
            c.bearerToken = text
        case nil: break
        }
        return c
    }
}

/// What to do after one POST of a batch: the webhook's retry rule, without I/O.
public enum WebhookVerdict: Sendable, Hashable {
    /// The receiver took the batch.
    case delivered
    /// Try again after this long.
    case retry(after: Duration)
    /// Stop: the receiver refuses the batch, or it failed every attempt.
    case giveUp(String)

    /// `status` is `nil` when no answer came (connection refused or reset, a
    /// timeout); `attempt` counts from 1. 2xx delivers; 408, 429, 5xx and no
    /// answer are retried with exponential backoff from 0.5 s to 30 s (or
    /// after `Retry-After`, at most 5 minutes); any other status gives up at once.
    public static func after(status: Int?, retryAfterSeconds: Int?, attempt: Int, attempts: Int) -> WebhookVerdict {
        if let status, (200..<300).contains(status) { return .delivered }
        let what = status.map { "HTTP \($0)" } ?? "no answer"
        if let status, !(status == 408 || status == 429 || status >= 500) {
            return .giveUp("the receiver refused it (\(what))")
        }
        guard attempt < attempts else { return .giveUp("\(attempts) attempts, the last: \(what)") }
        if let s = retryAfterSeconds, s >= 0 { return .retry(after: .seconds(min(s, 300))) }
        let backoff = min(0.5 * Double(1 << min(attempt - 1, 10)), 30)
        return .retry(after: .milliseconds(Int(backoff * 1000)))
    }
}
