import Crypto
import DequeModule
import HeraldCore
import HeraldJSON
import Synchronization

/// `POST /v1/notifications`'s `Idempotency-Key` header, read: the key (1 to
/// 255 visible ASCII characters, bare as most clients send it; in double
/// quotes, as the IETF draft writes it, the key is what is inside) and the
/// body's SHA-256, which a retry must match.
extension IdempotencyKey {
    /// `nil` without the header; throws (the 400's text) for a key that is not one.
    init?(header: String?, body: [UInt8]) throws(IdempotencyKeyError) {
        guard var value = header else { return nil }
        guard (1...255).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw IdempotencyKeyError()
        }
        if value.utf8.count >= 3, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
        self.init(key: value, fingerprint: SHA256.hash(data: body).withUnsafeBytes { Hex.string($0) })
    }
}

struct IdempotencyKeyError: Error {
    let description = "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID, say)"
}

/// The keys `herald serve` remembers without the PostgreSQL queue: each
/// key's body fingerprint and the ids its batch got, for `window` (24 h by
/// default), at most `capacity` keys (the oldest are forgotten first, even
/// within the window: memory stays bounded). Kept for this process's life
/// only; with the queue the keys live in its database
/// (`PostgresQueue.enqueueReturningIDs(_:idempotencyKey:fingerprint:window:)`).
/// No clock of its own: callers pass the time.
final class IdempotencyKeys: Sendable {
    enum Lookup: Sendable, Hashable {
        /// Not known (or past the window): reserved for this caller, who must `finish` or `release` it.
        case new
        /// Used with this body: the ids its batch got.
        case replay(Range<UInt64>)
        /// Used with another body.
        case conflict
        /// Used with this body by a request not yet answered.
        case inProgress
    }

    struct Entry {
        var fingerprint: String
        var ids: Range<UInt64>?
        var created: ContinuousClock.Instant
    }

    struct State {
        var entries: [String: Entry] = [:]
        /// Keys in the order they were made (with when, to tell a reused key's old place from its new one).
        var order = Deque<(key: String, created: ContinuousClock.Instant)>()
        var evicted = 0
    }

    let window: Duration
    let capacity: Int
    let state = Mutex(State())

    init(window: Duration, capacity: Int) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Looks `key` up at `now`; reserves it when new.
    func begin(_ key: IdempotencyKey, now: ContinuousClock.Instant) -> Lookup {
        state.withLock { s in
            forgetExpired(&s, now: now)
            if let e = s.entries[key.key] {
                guard e.fingerprint == key.fingerprint else { return .conflict }
                return e.ids.map { .replay($0) } ?? .inProgress
            }
            s.entries[key.key] = Entry(fingerprint: key.fingerprint, ids: nil, created: now)
            s.order.append((key.key, now))
            while s.entries.count > capacity, let oldest = s.order.popFirst() {
                if s.entries[oldest.key]?.created == oldest.created {
                    s.entries[oldest.key] = nil
                    s.evicted += 1
                }
            }
            return .new
        }
    }

    /// The reserved key's batch was taken with these ids.
    func finish(_ key: IdempotencyKey, ids: Range<UInt64>) {
        state.withLock { s in
            if s.entries[key.key]?.fingerprint == key.fingerprint { s.entries[key.key]?.ids = ids }
        }
    }

    /// The reserved key's batch was refused (429, 503…): a retry is a new attempt.
    func release(_ key: IdempotencyKey) {
        state.withLock { s in
            if let e = s.entries[key.key], e.ids == nil, e.fingerprint == key.fingerprint { s.entries[key.key] = nil }
        }
    }

    /// Keys remembered now, and keys forgotten within their window to stay under `capacity`.
    var counts: (kept: Int, evicted: Int) { state.withLock { ($0.entries.count, $0.evicted) } }

    private func forgetExpired(_ s: inout State, now: ContinuousClock.Instant) {
        while let first = s.order.first, now - first.created >= window {
            s.order.removeFirst()
            if s.entries[first.key]?.created == first.created { s.entries[first.key] = nil }
        }
    }
}
