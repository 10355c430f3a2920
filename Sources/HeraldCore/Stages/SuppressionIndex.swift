/// Where a token event came from: kept with each registration and
/// unregistration in the token store, shown by `herald tokens`.
public struct TokenEventSource: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }

    /// A tuple from the binary interface's feedback service.
    public static let feedback: TokenEventSource = "feedback"
    /// The binary interface's status 8 (invalid token).
    public static let invalidToken: TokenEventSource = "status-8"
    /// An HTTP/2 410 (`Unregistered`, `ExpiredToken`), at APNs' timestamp.
    public static let gone: TokenEventSource = "http-410"
    /// The app registered (told by the embedder or `herald tokens register`).
    public static let registration: TokenEventSource = "registration"
    /// Read from an export (`herald tokens import`).
    public static let imported: TokenEventSource = "import"
}

/// What the suppression stage asks on every request, answered from memory:
/// an open-addressing table of 24-byte slots, one per (token, topic) the store
/// must know to decide. A token is identified by a 64-bit fingerprint (a keyed
/// hash, fresh each process), so a slot does not hold the token: the chance
/// that another token shares a stored token's fingerprint is about n / 2⁶⁴
/// per look-up (10⁻¹² with ten million stored).
///
/// A request to `token` for topic `T` is suppressed when the newest
/// unregistration among (`token`, `T`) and (`token`, any topic) is not older
/// than the newest registration among them. A request with no topic (the
/// binary interface, whose certificate names the app) weighs every topic of the token.
///
/// Not synchronized: stores hold it under a lock.
public struct SuppressionIndex: Sendable {
    @usableFromInline struct Slot: Sendable {
        /// 0: empty.
        @usableFromInline var fingerprint: UInt64 = 0
        /// 0: any topic.
        @usableFromInline var topic: UInt32 = 0
        /// UNIX seconds; 0: none.
        @usableFromInline var registered: UInt32 = 0
        @usableFromInline var dead: UInt32 = 0
    }

    @usableFromInline var slots: [Slot]
    @usableFromInline var mask: Int
    @usableFromInline let seed: UInt64
    /// Topic ids: 0 is "any topic"; the others are interned here.
    @usableFromInline var topics: [String: UInt32] = [:]
    public private(set) var topicNames: [String] = [""]
    /// Slots in use.
    public private(set) var count = 0

    public init(expectedEntries: Int = 0, seed: UInt64 = UInt64.random(in: 1...UInt64.max)) {
        var size = 16
        while size * 7 / 10 < expectedEntries { size <<= 1 }
        slots = Array(repeating: Slot(), count: size)
        mask = size - 1
        self.seed = seed
    }

    /// Bytes the table holds (slots and topic names).
    public var memoryBytes: Int { slots.count * MemoryLayout<Slot>.stride + topicNames.reduce(0) { $0 + $1.utf8.count + 48 } }

    /// The id of `topic` (`nil` or empty: any topic, 0), interned if new.
    public mutating func topicID(_ topic: String?) -> UInt32 {
        guard let topic, !topic.isEmpty else { return 0 }
        if let id = topics[topic] { return id }
        let id = UInt32(topicNames.count)
        topics[topic] = id
        lastTopic = nil
        topicNames.append(topic)
        return id
    }

    @inlinable static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The token's fingerprint: never 0 (the empty slot).
    @inlinable func fingerprint(_ token: DeviceToken) -> UInt64 {
        var h = Self.mix(seed ^ UInt64(token.count))
        if let overflow = token.overflow {
            var word: UInt64 = 0
            for (i, b) in overflow.enumerated() {
                word = word << 8 | UInt64(b)
                if i & 7 == 7 {
                    h = Self.mix(h ^ word)
                    word = 0
                }
            }
            h = Self.mix(h ^ word)
        } else {
            h = Self.mix(h ^ token.w0)
            h = Self.mix(h ^ token.w1)
            h = Self.mix(h ^ token.w2)
            h = Self.mix(h ^ token.w3)
        }
        return h == 0 ? 1 : h
    }

    /// Whether any topic of `token` has a slot.
    public func contains(_ token: DeviceToken) -> Bool {
        let fp = fingerprint(token)
        var i = Int(truncatingIfNeeded: fp) & mask
        while slots[i].fingerprint != 0 {
            if slots[i].fingerprint == fp { return true }
            i = (i + 1) & mask
        }
        return false
    }

    /// Merges what is known of (`token`, `topic`): each time kept at its newest.
    public mutating func update(_ token: DeviceToken, topic: String?, registered: UInt32?, dead: UInt32?) {
        let t = topicID(topic)
        let fp = fingerprint(token)
        var i = Int(truncatingIfNeeded: fp) & mask
        while slots[i].fingerprint != 0 {
            if slots[i].fingerprint == fp && slots[i].topic == t {
                if let registered { slots[i].registered = max(slots[i].registered, registered) }
                if let dead { slots[i].dead = max(slots[i].dead, dead) }
                return
            }
            i = (i + 1) & mask
        }
        slots[i] = Slot(fingerprint: fp, topic: t, registered: registered ?? 0, dead: dead ?? 0)
        count += 1
        if count * 10 > slots.count * 7 { grow() }
    }

    /// Forgets (`token`, `topic`), or every topic of `token` when `topic` is `nil`.
    /// The slot stays (open addressing), emptied of times: it decides nothing.
    public mutating func forget(_ token: DeviceToken, topic: String?) {
        let t = topic.map { topics[$0] ?? UInt32.max }
        let fp = fingerprint(token)
        var i = Int(truncatingIfNeeded: fp) & mask
        while slots[i].fingerprint != 0 {
            if slots[i].fingerprint == fp && (t == nil || slots[i].topic == t) {
                slots[i].registered = 0
                slots[i].dead = 0
            }
            i = (i + 1) & mask
        }
    }

    mutating func grow() {
        let old = slots
        slots = Array(repeating: Slot(), count: old.count * 2)
        mask = slots.count - 1
        for s in old where s.fingerprint != 0 {
            var i = Int(truncatingIfNeeded: s.fingerprint) & mask
            while slots[i].fingerprint != 0 { i = (i + 1) & mask }
            slots[i] = s
        }
    }

    /// The id `topic` was given, `UInt32.max` when it has none (only "any topic"
    /// slots can match it), `nil` for no topic. Requests mostly share one topic:
    /// the last answer is kept, and comparing strings costs less than hashing one.
    @inlinable mutating func lookUpTopic(_ topic: String?) -> UInt32? {
        guard let topic, !topic.isEmpty else { return nil }
        if let last = lastTopic, last.topic == topic { return last.id }
        let id = topics[topic] ?? UInt32.max
        lastTopic = (topic, id)
        return id
    }

    @usableFromInline var lastTopic: (topic: String, id: UInt32)?

    /// Whether a request to `token` for `topic` must not be sent.
    @inlinable public mutating func isSuppressed(_ token: DeviceToken, topic: String?) -> Bool {
        let t = lookUpTopic(topic)
        let fp = fingerprint(token)
        var i = Int(truncatingIfNeeded: fp) & mask
        var registered: UInt32 = 0, dead: UInt32 = 0
        while slots[i].fingerprint != 0 {
            let s = slots[i]
            if s.fingerprint == fp && (t == nil || s.topic == 0 || s.topic == t) {
                registered = max(registered, s.registered)
                dead = max(dead, s.dead)
            }
            i = (i + 1) & mask
        }
        return dead != 0 && registered <= dead
    }

    /// (token, topic) pairs that suppress requests for their topic.
    public var suppressedCount: Int { slots.count { $0.dead != 0 && $0.registered <= $0.dead } }
}
