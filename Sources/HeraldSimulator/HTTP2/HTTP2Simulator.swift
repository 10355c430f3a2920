import Crypto
import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldJSON
import Synchronization

/// How the HTTP/2 simulator behaves: what it accepts, and the seeded faults it injects.
public struct HTTP2SimulatorConfiguration: Sendable, Hashable {
    /// The app's bundle identifier: topics must be it plus the push type's suffix (with
    /// ``teams``, one of theirs instead).
    public var bundleID = "com.example.app"
    /// Token authentication: the public key tokens must verify against (PEM), and
    /// the key and team ids they must name. `nil`: no `authorization` is needed
    /// (certificate authentication).
    public var tokenKeyPEM: String?
    public var keyID = ""
    public var teamID = ""
    /// More teams whose provider tokens are accepted, each for its own topics only. A request's topic is
    /// compared without its push type's suffix (`.voip`, `.complication`…). APNs answers
    /// 400 `TopicDisallowed` to a team's token on another team's topic.
    public var teams: [Team] = []

    public struct Team: Sendable, Hashable {
        public var keyID: String
        public var teamID: String
        /// The key's public half (PEM).
        public var publicKeyPEM: String
        /// The bundle identifiers the team's tokens may send to.
        public var topics: [String]
        public init(keyID: String, teamID: String, publicKeyPEM: String, topics: [String]) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
            self.topics = topics
        }
    }

    /// Whether requests must carry a provider token (else: a certificate-authenticated connection).
    public var usesTokens: Bool { tokenKeyPEM != nil || !teams.isEmpty }
    /// Streams a connection allows once a valid token has arrived (one before).
    public var maxConcurrentStreams = 1000
    /// Broadcast channels the app may have (APNs: 10,000 per app and environment).
    public var maxChannels = 10_000
    /// Seeded faults, each a probability per request.
    public var faults = Faults()
    /// Counts deliveries per `apns-id` (``HTTP2SimulatorCounters/deliveries``,
    /// what duplicates are measured by). A streaming run turns it off: the
    /// record grows by an entry per notification.
    public var recordsDeliveries = true
    /// Keeps every request it delivered, whole (``HTTP2Simulator/deliveredRequests``):
    /// what an app's tests assert on. Off by default (it grows with every notification).
    public var recordsRequests = false

    public struct Faults: Sendable, Hashable {
        public var seed: UInt64 = 0
        /// The connection is sent GOAWAY; this request and later ones on it are not processed.
        public var goAway = 0.0
        /// 503 `ServiceUnavailable`.
        public var unavailable = 0.0
        /// 429 `TooManyRequests`.
        public var tooManyRequests = 0.0
        /// 500 `InternalServerError`.
        public var internalError = 0.0
        /// The stream is reset after the notification was (or, half the time, was not) delivered.
        public var reset = 0.0
        /// Delivered, but the answer is lost: the request times out.
        public var lostAnswer = 0.0
        public init() {}
    }

    public init() {}
}

/// The HTTP/2 provider API, simulated: every request check and reason APNs
/// documents, provider tokens verified against a public key, one stream per
/// connection until a valid token arrives, a device registry whose dead tokens
/// answer 410 with their timestamp, and seeded faults. It answers one request
/// at a time (``handle(_:authorization:connection:now:)``); transports and
/// servers put connections and time around it.
public final class HTTP2Simulator: Sendable {
    public let configuration: HTTP2SimulatorConfiguration
    let state: Mutex<HTTP2SimulatorState>

    public init(configuration: HTTP2SimulatorConfiguration = HTTP2SimulatorConfiguration()) throws {
        self.configuration = configuration
        var keys: [HTTP2SimulatorState.TokenKey] = []
        if let pem = configuration.tokenKeyPEM {
            keys.append(.init(keyID: configuration.keyID, teamID: configuration.teamID, key: try P256.Signing.PublicKey(pemRepresentation: pem), topics: nil))
        }
        for t in configuration.teams {
            keys.append(.init(keyID: t.keyID, teamID: t.teamID, key: try P256.Signing.PublicKey(pemRepresentation: t.publicKeyPEM), topics: Set(t.topics)))
        }
        state = Mutex(HTTP2SimulatorState(configuration: configuration, keys: keys))
    }

    /// Revokes a signing key, as a team does in its developer account: every token it signed,
    /// already accepted or not, is answered 403 `InvalidProviderToken` from now on.
    public func revokeKey(_ keyID: String) { state.withLock { _ = $0.revoked.insert(keyID) } }

    /// Tokens APNs answers `BadDeviceToken` for.
    public func markInvalid(_ token: DeviceToken) { state.withLock { _ = $0.invalid.insert(token) } }
    /// Tokens whose app was removed at `timestamp` (milliseconds since 1970): 410 `Unregistered`.
    public func markUnregistered(_ token: DeviceToken, at timestamp: Int64) { state.withLock { $0.unregistered[token] = timestamp } }

    /// The requests delivered, in order, with `recordsRequests` (else none).
    public var deliveredRequests: [APNsRequest] { state.withLock { $0.delivered } }

    /// Creates a broadcast channel, as `POST /1/apps/<bundle id>/channels` would; returns its id.
    public func createChannel(storagePolicy: Int = 0) -> String { state.withLock { $0.newChannel(storagePolicy: storagePolicy) } }
    /// The app's broadcast channels, oldest first.
    public var channels: [String] { state.withLock { $0.channelOrder } }

    /// What the simulator has seen and done.
    public var counters: HTTP2SimulatorCounters { state.withLock { $0.counters } }

    /// What happens to one request.
    public enum Reply: Sendable, Hashable {
        case answer(APNsResponse)
        /// The stream is reset; `processed`: the notification was delivered first.
        case reset(processed: Bool)
        /// Not processed: the connection is going away (GOAWAY goes out before this stream).
        case refused
        /// Delivered, and the answer never comes.
        case silence
    }

    /// The streams connection `connection` allows: one until a valid provider token arrived on it.
    public func maxStreams(on connection: Int) -> Int {
        state.withLock { !configuration.usesTokens || $0.trusted.contains(connection) ? configuration.maxConcurrentStreams : 1 }
    }

    /// Whether GOAWAY has been decided for the connection (the transport tells the client).
    public func isGoingAway(_ connection: Int) -> Bool { state.withLock { $0.goingAway.contains(connection) } }

    public func handle(_ request: APNsRequest, authorization: String?, connection: Int, now: Duration) -> Reply {
        state.withLock { $0.handle(request, authorization: authorization, connection: connection, now: now) }
    }
}

struct HTTP2SimulatorState {
    /// A key provider tokens may be signed with; `topics`: those its team may send to (nil: any).
    struct TokenKey {
        let keyID: String
        let teamID: String
        let key: P256.Signing.PublicKey
        let topics: Set<String>?
    }

    let configuration: HTTP2SimulatorConfiguration
    let keys: [TokenKey]
    /// The apps requests may be for: the teams' topics, or the one bundle identifier.
    let bundleIDs: [String]
    var revoked: Set<String> = []
    var random: SeededGenerator
    var invalid: Set<DeviceToken> = []
    var unregistered: [DeviceToken: Int64] = [:]
    var goingAway: Set<Int> = []
    /// Broadcast channels and their storage policies; ids in creation order.
    var channels: [String: Int] = [:]
    var channelOrder: [String] = []
    /// Channel ids, and ids for requests that came without one, come from their own generator, so they leave the fault sequence alone.
    var channelRandom: SeededGenerator
    var trusted: Set<Int> = []
    /// Provider tokens already verified: when they were issued, and by which of `keys`.
    var verified: [String: (issuedAt: Int64, key: Int)] = [:]
    var counters = HTTP2SimulatorCounters()
    var delivered: [APNsRequest] = []

    init(configuration: HTTP2SimulatorConfiguration, keys: [TokenKey]) {
        self.configuration = configuration
        self.keys = keys
        bundleIDs = configuration.teams.isEmpty ? [configuration.bundleID] : configuration.teams.flatMap(\.topics)
        random = SeededGenerator(seed: configuration.faults.seed)
        channelRandom = SeededGenerator(seed: configuration.faults.seed ^ 0x6368_616E_6E65_6C73)
    }

    mutating func handle(_ request: APNsRequest, authorization: String?, connection: Int, now: Duration) -> HTTP2Simulator.Reply {
        counters.requests += 1
        // APNs names a request that came without an id (and echoes that name).
        var request = request
        if request.apnsID.isEmpty { request.apnsID = APNsID.make(using: &channelRandom) }
        if goingAway.contains(connection) {
            counters.refused += 1
            return .refused
        }
        if let (status, reason) = authenticate(authorization, request: request, connection: connection, now: now) {
            return answer(status, reason, request)
        }
        if request.path.hasPrefix(Self.channelsPrefix) { return .answer(manageChannels(request)) }
        let broadcast = request.path.hasPrefix(Self.broadcastPath)
        if let (status, reason) = broadcast ? checkBroadcast(request) : check(request) { return answer(status, reason, request) }
        let f = configuration.faults
        let roll = Double.random(in: 0..<1, using: &random)
        var edge = f.goAway
        if roll < edge {
            goingAway.insert(connection)
            counters.goAways += 1
            counters.refused += 1
            return .refused
        }
        for (p, status, reason) in [(f.unavailable, 503, "ServiceUnavailable"), (f.tooManyRequests, 429, "TooManyRequests"), (f.internalError, 500, "InternalServerError")] {
            edge += p
            if roll < edge { return answer(status, reason, request) }
        }
        if !broadcast {
            let token = try! DeviceToken(hex: request.path.dropFirst(Self.devicePath.count))  // checked above
            if invalid.contains(token) { return answer(400, "BadDeviceToken", request) }
            if let since = unregistered[token] {
                counters.answers["Unregistered", default: 0] += 1
                return .answer(APNsResponse(status: 410, apnsID: request.apnsID, reason: "Unregistered", timestamp: since))
            }
        }
        edge += f.reset
        if roll < edge {
            let processed = Bool.random(using: &random)
            if processed { deliver(request) }
            counters.resets += 1
            return .reset(processed: processed)
        }
        deliver(request)
        edge += f.lostAnswer
        if roll < edge {
            counters.lostAnswers += 1
            return .silence
        }
        counters.answers["", default: 0] += 1
        return .answer(APNsResponse(status: 200, apnsID: request.apnsID))
    }

    static let devicePath = "/3/device/"

    /// The answer to a request whose provider token is not good, or nil when it is (or none is
    /// needed): signed by one of `keys` not revoked (else 403), not expired (403), and for a topic
    /// its team may send to (400 `TopicDisallowed`).
    mutating func authenticate(_ authorization: String?, request: APNsRequest, connection: Int, now: Duration) -> (Int, String)? {
        guard !keys.isEmpty else { return nil }
        guard let authorization, authorization.hasPrefix("bearer ") else { return (403, "MissingProviderToken") }
        let jwt = String(authorization.dropFirst(7))
        let known: (issuedAt: Int64, key: Int)
        if let seen = verified[jwt] {
            known = seen
        } else {
            var match: (issuedAt: Int64, key: Int)?
            for (i, k) in keys.enumerated() {
                if let iat = Self.verify(jwt, with: k.key, keyID: k.keyID, teamID: k.teamID) {
                    match = (iat, i)
                    break
                }
            }
            guard let found = match else { return (403, "InvalidProviderToken") }
            verified[jwt] = found
            counters.providerTokens.insert(jwt)
            known = found
        }
        let key = keys[known.key]
        if revoked.contains(key.keyID) { return (403, "InvalidProviderToken") }
        if Int64(now.components.seconds) - known.issuedAt >= 3600 { return (403, "ExpiredProviderToken") }
        trusted.insert(connection)
        if let topics = key.topics, let topic = request[header: "apns-topic"] {
            guard topics.contains(PushType.bundleID(ofTopic: topic)) else { return (400, "TopicDisallowed") }
        }
        return nil
    }

    /// The token's `iat` if its signature verifies and it names the expected key and team.
    static func verify(_ jwt: String, with key: P256.Signing.PublicKey, keyID: String, teamID: String) -> Int64? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
            let sig = Base64URL.decode(parts[2]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: sig),
            key.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)),
            let h = (try? JSONParser.parse(header))?.objectValue, let c = (try? JSONParser.parse(claims))?.objectValue,
            h["alg"]?.stringValue == "ES256", h["kid"]?.stringValue == keyID, c["iss"]?.stringValue == teamID,
            let iat = c["iat"]?.numberValue?.intValue
        else { return nil }
        return Int64(iat)
    }

    /// Whether a header name comes twice. Pairs compared: a request has a few headers (a set of
    /// their names, grown as each was inserted, was 0.5% of a lanes bench's samples, stop 68).
    static func repeatsAHeader(_ r: APNsRequest) -> Bool {
        let headers = r.headers
        for i in headers.indices.dropFirst() where headers[..<i].contains(where: { $0.name == headers[i].name }) { return true }
        return false
    }

    /// Apple's request checks, in the order APNs reports them.
    func check(_ r: APNsRequest) -> (Int, String)? {
        if r.method != "POST" { return (405, "MethodNotAllowed") }
        guard r.path.hasPrefix(Self.devicePath) else { return (404, "BadPath") }
        let hex = r.path.dropFirst(Self.devicePath.count)
        if hex.isEmpty { return (400, "MissingDeviceToken") }
        guard (try? DeviceToken(hex: hex)) != nil else { return (400, "BadDeviceToken") }
        if Self.repeatsAHeader(r) { return (400, "DuplicateHeaders") }
        guard let type = r[header: "apns-push-type"].map(PushType.init(rawValue:)), PushType.known.contains(type) else {
            return (400, "InvalidPushType")
        }
        guard let topic = r[header: "apns-topic"] else { return (400, "MissingTopic") }
        if let suffix = type.topicSuffix, !bundleIDs.contains(where: { topic.utf8.count == $0.utf8.count + suffix.utf8.count && topic.hasPrefix($0) && topic.hasSuffix(suffix) }) {
            return (400, "DeviceTokenNotForTopic")
        }
        if let id = r[header: "apns-id"], !RequestDecoder.isCanonicalUUID(id) { return (400, "BadMessageId") }
        if let e = r[header: "apns-expiration"], Int64(e) == nil { return (400, "BadExpirationDate") }
        if let p = r[header: "apns-priority"], !["10", "5", "1"].contains(p) || (type == .background && p == "10") { return (400, "BadPriority") }
        if let c = r[header: "apns-collapse-id"], c.utf8.count > 64 { return (400, "BadCollapseId") }
        if r.body.isEmpty { return (400, "PayloadEmpty") }
        if r.body.count > type.payloadLimit { return (413, "PayloadTooLarge") }
        return nil
    }

    mutating func deliver(_ request: APNsRequest) {
        counters.delivered += 1
        if configuration.recordsDeliveries { counters.deliveries.add(request.apnsID) }
        if configuration.recordsRequests { delivered.append(request) }
        if let channel = request.channelID { counters.broadcasts[channel, default: 0] += 1 }
    }

    // MARK: - Broadcasts

    static let broadcastPath = "/4/broadcasts/apps/"
    static let channelsPrefix = "/1/apps/"

    /// A broadcast push's checks, in APNs' order.
    func checkBroadcast(_ r: APNsRequest) -> (Int, String)? {
        if r.method != "POST" { return (405, "MethodNotAllowed") }
        if r.path.dropFirst(Self.broadcastPath.count) != configuration.bundleID { return (403, "TopicMismatch") }
        if Self.repeatsAHeader(r) { return (400, "DuplicateHeaders") }
        guard let channel = r.channelID else { return (400, "MissingChannelId") }
        guard RequestDecoder.isChannelID(channel) else { return (400, "BadChannelId") }
        guard r[header: "apns-push-type"] == PushType.liveActivity.rawValue else { return (400, "InvalidPushType") }
        if let id = r[header: "apns-request-id"], !RequestDecoder.isCanonicalUUID(id) { return (400, "BadMessageId") }
        if let e = r[header: "apns-expiration"], Int64(e) == nil { return (400, "BadExpirationDate") }
        if let p = r[header: "apns-priority"], !["10", "5", "1"].contains(p) { return (400, "BadPriority") }
        if r.body.isEmpty { return (400, "PayloadEmpty") }
        if r.body.count > 5120 { return (413, "PayloadTooLarge") }
        if channels[channel] == nil { return (400, "ChannelNotRegistered") }
        return nil
    }

    /// A channel id as APNs makes them: 16 random bytes in base64.
    mutating func newChannel(storagePolicy: Int) -> String {
        let a = channelRandom.next(), b = channelRandom.next()
        let bytes = (0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? a : b) >> (8 * UInt64($0 & 7))) }
        let id = Data(bytes).base64EncodedString()
        channels[id] = storagePolicy
        channelOrder.append(id)
        return id
    }

    /// The channel management API (`/1/apps/<bundle id>/channels` and `/all-channels`).
    mutating func manageChannels(_ r: APNsRequest) -> APNsResponse {
        counters.channelRequests += 1
        func fail(_ status: Int, _ reason: String) -> APNsResponse {
            counters.answers[reason, default: 0] += 1
            return APNsResponse(status: status, apnsID: r.apnsID, reason: reason)
        }
        func success(_ status: Int, channel: String? = nil, content: [UInt8] = []) -> APNsResponse {
            var a = APNsResponse(status: status, apnsID: r.apnsID)
            a.channelID = channel
            a.content = content
            return a
        }
        let rest = r.path.dropFirst(Self.channelsPrefix.count)
        guard let slash = rest.lastIndex(of: "/") else { return fail(404, "BadPath") }
        let resource = rest[rest.index(after: slash)...]
        guard resource == "channels" || resource == "all-channels" else { return fail(404, "BadPath") }
        if rest[..<slash] != configuration.bundleID { return fail(403, "TopicMismatch") }
        if let id = r[header: "apns-request-id"], !RequestDecoder.isCanonicalUUID(id) { return fail(400, "BadMessageId") }
        switch (r.method, resource) {
        case ("GET", "all-channels"):
            var w = JSONWriter(capacity: 32 + channelOrder.count * 28)
            w.raw("{\"channels\":[")
            for (i, id) in channelOrder.enumerated() {
                if i > 0 { w.raw(",") }
                w.string(id)
            }
            w.raw("]}")
            return success(200, content: w.bytes)
        case ("POST", "channels"):
            guard let o = (try? JSONParser.parse(r.body))?.objectValue, o.count == 2,
                let policy = o["message-storage-policy"]?.numberValue?.intValue, BroadcastChannelRequest.storagePolicies.contains(policy),
                o["push-type"]?.stringValue == "LiveActivity"
            else { return fail(400, "BadRequestParams") }
            guard channels.count < configuration.maxChannels else { return fail(400, "CannotCreateChannelConfig") }
            return success(201, channel: newChannel(storagePolicy: policy))
        case ("GET", "channels"), ("DELETE", "channels"):
            guard let channel = r.channelID else { return fail(400, "MissingChannelId") }
            guard RequestDecoder.isChannelID(channel) else { return fail(400, "BadChannelId") }
            guard let policy = channels[channel] else { return fail(404, "ChannelNotRegistered") }
            if r.method == "DELETE" {
                channels[channel] = nil
                channelOrder.removeAll { $0 == channel }
                return success(204)
            }
            var w = JSONWriter(capacity: 64)
            w.raw("{\"message-storage-policy\":")
            w.int(policy)
            w.raw(",\"push-type\":\"LiveActivity\"}")
            return success(200, content: w.bytes)
        default:
            return fail(405, "MethodNotAllowed")
        }
    }

    mutating func answer(_ status: Int, _ reason: String, _ request: APNsRequest) -> HTTP2Simulator.Reply {
        counters.answers[reason, default: 0] += 1
        return .answer(APNsResponse(status: status, apnsID: request.apnsID, reason: reason))
    }
}

/// What an ``HTTP2Simulator`` has counted.
public struct HTTP2SimulatorCounters: Sendable, Hashable {
    public var requests = 0
    public var delivered = 0
    /// Deliveries per `apns-id`: more than one is a duplicate.
    public var deliveries = DeliveryCounts()
    /// Answers by reason (`""` for 200).
    public var answers: [String: Int] = [:]
    /// Distinct provider tokens seen (valid ones).
    public var providerTokens: Set<String> = []
    public var goAways = 0
    public var refused = 0
    public var resets = 0
    public var lostAnswers = 0
    /// Broadcast pushes delivered, by channel.
    public var broadcasts: [String: Int] = [:]
    /// Channel management calls answered.
    public var channelRequests = 0
    /// Notifications delivered more than once.
    public var duplicates: Int { deliveries.duplicates }
}

/// How many times each `apns-id` was delivered, in 256 tables chosen by the id's last two
/// characters (``SpreadTable``): one table of every id doubled in one step as it grew, every id
/// hashed again under the simulator's lock, 150 ms at 393,217 ids on the project's machine, and
/// every connection's answers waited meanwhile (the lanes bench's slowest fast-lane sends, issue 30).
public struct DeliveryCounts: Sendable, Hashable {
    private var counts = SpreadTable<String, Int>()

    public init() {}

    /// The table of `id`: its last two characters as hex digits (an `apns-id` is a UUID), any
    /// other byte by its low four bits.
    static func table(_ id: String) -> UInt8 {
        func digit(_ b: UInt8) -> UInt8 { Hex.nibble(b) ?? b & 15 }
        var bytes = id.utf8.reversed().makeIterator()
        let last = bytes.next().map(digit) ?? 0, before = bytes.next().map(digit) ?? 0
        return before << 4 | last
    }

    /// How many times `id` was delivered.
    public subscript(id: String) -> Int { counts[id, table: Self.table(id)] ?? 0 }

    /// Counts a delivery of `id`.
    public mutating func add(_ id: String) { counts.update(Self.table(id)) { $0[id, default: 0] += 1 } }

    /// The ids delivered at least once.
    public var count: Int { counts.count }

    /// The ids delivered more than once.
    public var duplicated: Set<String> {
        var ids: Set<String> = []
        for t in counts.tables { for (id, n) in t where n > 1 { ids.insert(id) } }
        return ids
    }

    /// Deliveries beyond each id's first.
    public var duplicates: Int {
        var n = 0
        for t in counts.tables { for times in t.values { n += times - 1 } }
        return n
    }
}
