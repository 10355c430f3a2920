import Synchronization

/// When to sign a new provider token. APNs refuses a token older than an hour
/// (`ExpiredProviderToken`) and one re-signed within 20 minutes of the last
/// (`TooManyProviderTokenUpdates`), so a token is signed once and shared by
/// every connection until `refreshAfter`.
public struct ProviderTokenPolicy: Sendable, Hashable {
    /// Age at which the next request gets a new token: 20 to 59 minutes.
    public var refreshAfter: Duration = .seconds(40 * 60)
    /// After `TooManyProviderTokenUpdates`: how long to sign nothing.
    public var holdAfterTooManyUpdates: Duration = .seconds(20 * 60)

    public init() {}

    /// The range `refreshAfter` must fall in.
    public static let refreshRange: ClosedRange<Duration> = .seconds(20 * 60) ... .seconds(59 * 60)
}

/// The one provider token of a team: which token a request carries, when to
/// sign the next, and what to do when APNs calls a token expired or refuses a
/// new one. Events in (a request needs a token, an answer about a token),
/// decisions out; the caller supplies the time (UNIX seconds), so the rules are
/// tested without a clock. Share one per team across every connection.
public struct ProviderTokens: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let key: ProviderTokenKey
    public let policy: ProviderTokenPolicy
    /// The token now in use and when it was issued.
    public private(set) var current: (token: String, issuedAt: Int64)?
    /// How many tokens have been signed.
    public private(set) var signed = 0
    /// Signing is held until then (after `TooManyProviderTokenUpdates`).
    public private(set) var heldUntil: Int64?
    /// The current token was signed because APNs called the one before it expired.
    var currentAnswersExpiry = false

    public init(key: ProviderTokenKey, policy: ProviderTokenPolicy = ProviderTokenPolicy()) {
        self.key = key
        self.policy = policy
    }

    /// The token for a request sent at `now`: the current one, or a new one
    /// when there is none or it has reached `refreshAfter` (unless signing is held).
    public mutating func token(now: Int64) throws(ProviderTokenError) -> String {
        if let current, now - current.issuedAt < Int64(policy.refreshAfter.components.seconds) || isHeld(now) {
            return current.token
        }
        return try sign(now: now, answeringExpiry: false)
    }

    /// What to do with a request APNs answered `ExpiredProviderToken` for,
    /// sent with `token`: resend it (with a token signed now, once per token),
    /// resend it once signing may resume, or fail it (a token signed just now
    /// called expired: the clock is wrong, and signing again would not help).
    public mutating func expired(_ token: String, now: Int64) throws(ProviderTokenError) -> ExpiredAction {
        guard let current, current.token == token else { return .resend }  // already replaced
        if currentAnswersExpiry {
            return .fail("APNs calls a provider token signed at \(current.issuedAt) expired at \(now): check this machine's clock")
        }
        if let heldUntil, now < heldUntil { return .resendAt(heldUntil) }
        _ = try sign(now: now, answeringExpiry: true)
        return .resend
    }

    /// APNs answered `TooManyProviderTokenUpdates`: sign nothing for a while.
    public mutating func tooManyUpdates(now: Int64) {
        heldUntil = now + Int64(policy.holdAfterTooManyUpdates.components.seconds)
    }

    /// Says when the token was issued; never shows it (a JWT is a credential).
    public var description: String {
        "provider tokens for \(key): \(signed) signed" + (current.map { ", current issued at \($0.issuedAt)" } ?? "")
    }
    public var debugDescription: String { description }

    func isHeld(_ now: Int64) -> Bool { heldUntil.map { now < $0 } ?? false }

    mutating func sign(now: Int64, answeringExpiry: Bool) throws(ProviderTokenError) -> String {
        let token = try key.sign(issuedAt: now)
        current = (token, now)
        currentAnswersExpiry = answeringExpiry
        signed += 1
        return token
    }

    /// What to do after `ExpiredProviderToken`.
    public enum ExpiredAction: Sendable, Equatable {
        case resend
        /// Signing is held until then (UNIX seconds).
        case resendAt(Int64)
        case fail(String)
    }
}

/// One ``ProviderTokens`` shared by several delivery machines: a transport whose
/// connections are spread over event loops runs a machine on each loop, and
/// every one of them must carry the same token (a second token signed for the
/// same team within 20 minutes is `TooManyProviderTokenUpdates`). The same
/// rules, behind a lock; `now` still comes from the caller.
public final class SharedProviderTokens: Sendable, CustomStringConvertible {
    let state: Mutex<ProviderTokens>

    public init(_ tokens: ProviderTokens) { state = Mutex(tokens) }

    /// ``ProviderTokens/token(now:)``.
    public func token(now: Int64) throws(ProviderTokenError) -> String {
        try state.withLock { (t: inout ProviderTokens) throws(ProviderTokenError) -> String in try t.token(now: now) }
    }

    /// ``ProviderTokens/expired(_:now:)``.
    public func expired(_ token: String, now: Int64) throws(ProviderTokenError) -> ProviderTokens.ExpiredAction {
        try state.withLock { (t: inout ProviderTokens) throws(ProviderTokenError) -> ProviderTokens.ExpiredAction in try t.expired(token, now: now) }
    }

    /// ``ProviderTokens/tooManyUpdates(now:)``.
    public func tooManyUpdates(now: Int64) { state.withLock { $0.tooManyUpdates(now: now) } }

    /// How many tokens have been signed, by every machine together.
    public var signed: Int { state.withLock { $0.signed } }

    public var description: String { state.withLock { $0.description } }
}

/// One ``SharedProviderTokens`` per signing key, for every transport that
/// signs with it: the `apps` section gives each app its own transport, and
/// the apps of one team share its JWT (APNs limits how often a team's token
/// may change, and counts every new one).
public final class ProviderTokenPool: Sendable {
    struct Entry {
        let rawKey: [UInt8]
        let tokens: SharedProviderTokens
    }
    let entries = Mutex<[String: Entry]>([:])

    public init() {}

    /// The tokens signed with `key`, shared with every earlier caller that gave the same key id
    /// and team; `nil` when that key id and team came before with another key (a configuration error).
    public func tokens(for key: ProviderTokenKey) -> SharedProviderTokens? {
        entries.withLock { entries in
            let name = "\(key.teamID)/\(key.keyID)"
            if let known = entries[name] { return known.rawKey == key.rawKey ? known.tokens : nil }
            let tokens = SharedProviderTokens(ProviderTokens(key: key))
            entries[name] = Entry(rawKey: key.rawKey, tokens: tokens)
            return tokens
        }
    }
}
