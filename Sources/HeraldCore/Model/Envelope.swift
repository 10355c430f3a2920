/// A request on its way through the pipeline, with what the stages have made of it.
public struct Envelope: Sendable {
    /// Unique within a pipeline run, assigned on entry, in source order.
    public internal(set) var sequence: UInt64
    /// Where the request came from (a line number in a JSON Lines file), if known.
    public var line: Int?
    /// The request, as modified by the stages so far (localized, truncated…).
    public var request: NotificationRequest
    /// The compact JSON payload, once built.
    public var payload: [UInt8] = []
    /// The wire form, once framed.
    public var frame: Frame?
    /// Set when a stage decides the request's fate early (dropped, suppressed…).
    /// Stages leave decided envelopes alone; the runtime records them.
    public var outcome: Outcome?

    public init(sequence: UInt64, line: Int? = nil, request: NotificationRequest) {
        self.sequence = sequence
        self.line = line
        self.request = request
    }

    /// The record of this envelope ending with `outcome`.
    @inlinable public func record(_ outcome: Outcome) -> OutcomeRecord {
        var r = OutcomeRecord(sequence: sequence, line: line, id: request.id, token: request.token, outcome: outcome)
        r.app = request.app
        return r
    }
}

extension Array where Element == Envelope {
    /// Appends an envelope whose request `fill` writes in place, into a
    /// ``NotificationRequest/blank`` request (a request built elsewhere and handed in is moved
    /// and copied on its way, some 350 bytes and a retain and release of each reference); when
    /// `fill` returns false the envelope is taken back, and this returns false.
    package mutating func append(sequence: UInt64, line: Int?, building fill: (inout NotificationRequest) -> Bool) -> Bool {
        append(Envelope(sequence: sequence, line: line, request: .blank))
        guard fill(&self[count - 1].request) else {
            removeLast()
            return false
        }
        return true
    }

    /// The record of every envelope ending with `outcome`. Reads each envelope
    /// in place: `map { $0.record(...) }` copied every envelope (a request
    /// holds some twenty references) only to read four fields.
    @inlinable public func records(_ outcome: Outcome) -> [OutcomeRecord] {
        var out: [OutcomeRecord] = []
        out.reserveCapacity(count)
        for i in indices { out.append(self[i].record(outcome)) }
        return out
    }
}

/// The bytes of one notification on the wire.
public struct Frame: Sendable, Hashable {
    /// The encoded notification.
    public var bytes: [UInt8]
    /// Where the 4-byte big-endian notification identifier sits in `bytes`,
    /// so a transport can give it a per-connection identifier without
    /// re-encoding; `nil` for formats without one (the simple format).
    public var identifierOffset: Int?

    public init(bytes: [UInt8], identifierOffset: Int?) {
        self.bytes = bytes
        self.identifierOffset = identifierOffset
    }

    /// Overwrites the identifier, if the format has one.
    @inlinable
    public mutating func setIdentifier(_ id: UInt32) {
        guard let o = identifierOffset else { return }
        bytes[o] = UInt8(truncatingIfNeeded: id >> 24)
        bytes[o + 1] = UInt8(truncatingIfNeeded: id >> 16)
        bytes[o + 2] = UInt8(truncatingIfNeeded: id >> 8)
        bytes[o + 3] = UInt8(truncatingIfNeeded: id)
    }
}

/// How one request ended: what the ledger counts and the outcome writer prints.
public struct OutcomeRecord: Sendable, Hashable {
    public var sequence: UInt64
    public var line: Int?
    public var id: UInt32?
    public var token: DeviceToken?
    public var outcome: Outcome
    /// Sent more than once: an earlier send's answer was lost (a connection
    /// closed, a stream timed out, a queue's lease was taken over), so the
    /// device may have received it twice. The only notifications that may.
    public var possibleDuplicate = false
    /// The app it was for (``NotificationRequest/app``, or the one the `apps` section routed it to).
    public var app: String?
    /// HTTP/2's identifiers, one reference (nil on the binary interface), so records stay small.
    var apns: APNsIdentifiers?

    /// HTTP/2: the `apns-id` APNs answered with (the request's own, echoed).
    public var apnsID: String? {
        get { apns?.id }
        set { apns = newValue.map { APNsIdentifiers(id: $0, uniqueID: apns?.uniqueID, unregisteredAt: apns?.unregisteredAt, channelID: apns?.channelID, topic: apns?.topic) } }
    }
    /// HTTP/2, development environment: the `apns-unique-id` APNs gave the notification.
    public var apnsUniqueID: String? {
        get { apns?.uniqueID }
        set { apns = APNsIdentifiers(id: apns?.id ?? "", uniqueID: newValue, unregisteredAt: apns?.unregisteredAt, channelID: apns?.channelID, topic: apns?.topic) }
    }
    /// HTTP/2, a 410 answer: since when the token is dead (milliseconds since 1970), as APNs said.
    public var apnsUnregisteredAt: Int64? { apns?.unregisteredAt }
    /// HTTP/2, a broadcast push: the channel it went to.
    public var apnsChannelID: String? { apns?.channelID }
    /// HTTP/2: the request's `topic` as given (where a 410 is filed in the token store).
    public var topic: String? { apns?.topic }

    public init(
        sequence: UInt64, line: Int?, id: UInt32?, token: DeviceToken?, outcome: Outcome, apnsID: String? = nil,
        apnsUniqueID: String? = nil, apnsUnregisteredAt: Int64? = nil, apnsChannelID: String? = nil, topic: String? = nil,
        app: String? = nil
    ) {
        self.app = app
        self.sequence = sequence
        self.line = line
        self.id = id
        self.token = token?.count == 0 ? nil : token  // a broadcast has no device
        self.outcome = outcome
        if let apnsID {
            apns = APNsIdentifiers(id: apnsID, uniqueID: apnsUniqueID, unregisteredAt: apnsUnregisteredAt, channelID: apnsChannelID, topic: topic)
        }
    }
}

/// What an HTTP/2 answer said about a request beyond its outcome, immutable and shared.
final class APNsIdentifiers: Sendable, Hashable {
    let id: String
    let uniqueID: String?
    let unregisteredAt: Int64?
    let channelID: String?
    let topic: String?
    init(id: String, uniqueID: String?, unregisteredAt: Int64?, channelID: String?, topic: String?) {
        self.id = id
        self.uniqueID = uniqueID
        self.unregisteredAt = unregisteredAt
        self.channelID = channelID
        self.topic = topic
    }
    static func == (a: APNsIdentifiers, b: APNsIdentifiers) -> Bool {
        a.id == b.id && a.uniqueID == b.uniqueID && a.unregisteredAt == b.unregisteredAt && a.channelID == b.channelID && a.topic == b.topic
    }
    func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(uniqueID)
        hasher.combine(unregisteredAt)
        hasher.combine(channelID)
        hasher.combine(topic)
    }
}
