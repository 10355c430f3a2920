import HeraldJSON
/// One notification to send: who it goes to, what it says, and how APNs should treat it.
///
/// A value type: stages copy and modify it freely. Either the structured
/// fields (`aps` and `custom`) or `rawPayload` describe the payload.
public struct NotificationRequest: Sendable, Hashable {
    /// The caller's identifier, echoed in the outcome; also the binary
    /// interface's notification identifier when the framer is told to use it.
    public var id: UInt32?
    /// The device token; empty for a broadcast (``channelID``).
    public var token: DeviceToken
    /// The app's bundle identifier (`apns-topic`; not carried by the binary interface).
    public var topic: String?
    /// The `aps` dictionary.
    public var aps: APS
    /// Custom keys, peers of `aps`, in order.
    public var custom: JSONObject
    /// A complete payload given as-is (the request's `payload` form); validated
    /// and re-emitted compactly by the payload builder.
    public var rawPayload: JSONValue?
    /// The device's preferred language, a BCP 47 tag such as `fr-CA`.
    public var language: String?
    /// When APNs may stop trying to deliver: UNIX seconds; 0 means "do not store".
    public var expiry: UInt32?
    /// Delivery priority; `nil` lets the payload builder choose.
    public var priority: Priority?
    /// The localization mode for this request; `nil` uses the configured mode.
    public var localization: LocalizationMode?
    /// The lane it travels in (the request's `lane` key); `nil` chooses by priority (``effectiveLane``).
    public var lane: Lane?
    /// The trace it belongs to (the request's `traceparent` and `enqueued-at`): its spans continue
    /// that trace where a tracer is set up (``NotificationTrace``); `nil` for an untraced request.
    /// Held in line (plain numbers, about 40 bytes), not with the headers out of line: a traced
    /// request there had a box of its own, allocated on one thread, counted up and down on each
    /// of the several threads its copies pass through, and freed on another (issue 31's cost).
    public var trace: NotificationTrace?
    /// HTTP/2 only, kept out of line (no storage at all when unused, so a
    /// request stays small to move): see ``pushType``, ``collapseID``, ``apnsID``.
    @usableFromInline var headers = CopyOnWrite<HTTP2Headers>()

    @usableFromInline struct HTTP2Headers: Sendable, Hashable, DefaultInitializable {
        @usableFromInline var pushType: PushType?
        @usableFromInline var collapseID: String?
        @usableFromInline var apnsID: String?
        @usableFromInline var channelID: String?
        @usableFromInline var app: String?
        @usableFromInline var sendAt: Int64?
        @usableFromInline init() {}
    }

    /// HTTP/2 only: `apns-push-type`; `nil` lets the transport infer it from the payload.
    @inlinable public var pushType: PushType? { get { headers.storage?.value.pushType } set { if newValue != nil || headers.storage != nil { headers.value.pushType = newValue } } }
    /// HTTP/2 only: `apns-collapse-id`, at most 64 bytes.
    @inlinable public var collapseID: String? { get { headers.storage?.value.collapseID } set { if newValue != nil || headers.storage != nil { headers.value.collapseID = newValue } } }
    /// HTTP/2 only: `apns-id`, a canonical UUID; `nil` lets the transport make one.
    @inlinable public var apnsID: String? { get { headers.storage?.value.apnsID } set { if newValue != nil || headers.storage != nil { headers.value.apnsID = newValue } } }
    /// HTTP/2 only: a broadcast push (iOS 18 Live Activities) to this channel
    /// (`apns-channel-id`) instead of a device; the request then has no token.
    @inlinable public var channelID: String? { get { headers.storage?.value.channelID } set { if newValue != nil || headers.storage != nil { headers.value.channelID = newValue } } }
    /// The app this request is for, by the name the configuration's `apps` section gives it
    /// (the request's `app` key); `nil` routes it by its topic. Without `apps` it is a label the
    /// outcome carries, nothing more.
    @inlinable public var app: String? { get { headers.storage?.value.app } set { if newValue != nil || headers.storage != nil { headers.value.app = newValue } } }
    /// When to send it (the request's `send-at`), in milliseconds since the UNIX epoch; `nil` sends
    /// it now. It waits until then where it was taken in: `herald serve`'s and `HeraldClient`'s
    /// memory, or the PostgreSQL queue.
    @inlinable public var sendAt: Int64? { get { headers.storage?.value.sendAt } set { if newValue != nil || headers.storage != nil { headers.value.sendAt = newValue } } }
    /// Whether this is a broadcast push to a channel rather than a push to one device.
    @inlinable public var isBroadcast: Bool { headers.storage?.value.channelID != nil }

    /// A request with nothing in it yet (no token, no fields): what a decoder fills in place.
    package static var blank: NotificationRequest { NotificationRequest(blank: ()) }

    /// ``blank``'s fields set one by one: through ``init(token:aps:custom:id:topic:language:expiry:priority:)``
    /// the defaults were made, copied in and destroyed (4% of `herald send`'s time on one core).
    private init(blank: Void) {
        token = DeviceToken()
        aps = APS()
        custom = JSONObject()
    }

    /// A broadcast push to channel `channelID` (no device token).
    public init(channelID: String, aps: APS = APS(), topic: String? = nil) {
        self.init(token: DeviceToken(bytes: []), aps: aps, topic: topic)
        self.channelID = channelID
    }

    public init(
        token: DeviceToken, aps: APS = APS(), custom: JSONObject = JSONObject(), id: UInt32? = nil,
        topic: String? = nil, language: String? = nil, expiry: UInt32? = nil, priority: Priority? = nil
    ) {
        self.token = token
        self.aps = aps
        self.custom = custom
        self.id = id
        self.topic = topic
        self.language = language
        self.expiry = expiry
        self.priority = priority
    }
}

/// Which lane a request travels in: the fast lane overtakes the bulk lane
/// wherever requests wait (the HTTP/2 delivery machine's queue), and the bulk
/// lane keeps a minimum share (``LaneQueue``).
public struct Lane: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }
    /// One-off notifications a person waits for: a password reset, a message.
    public static let fast = Lane(rawValue: 0)
    /// Campaigns and anything that can wait its turn.
    public static let bulk = Lane(rawValue: 1)
    public static func named(_ name: some StringProtocol) -> Lane? {
        switch name {
        case "fast": .fast
        case "bulk": .bulk
        default: nil
        }
    }
    public var description: String { self == .fast ? "fast" : "bulk" }
}

extension NotificationRequest {
    /// Why a scheduled request (one with a ``sendAt``) is not to be sent now: its `expiry` passed
    /// while it waited; nil to send it. A request sent at once is APNs' to judge.
    public func expiredBeforeSending(nowMilliseconds now: Int64) -> OutcomeReason? {
        guard let due = sendAt, let e = expiry, e != 0, Int64(e) * 1_000 < now else { return nil }
        return OutcomeReason(.expired, "expired before sending: its expiry (\(e)) passed while it waited for its send-at (\(due))")
    }

    /// The lane it travels in: its own ``lane``, else the bulk lane for priority 5 or 1 and for
    /// background pushes, and the fast lane for the rest (priority 10, which APNs assumes when
    /// none is given, and time-sensitive or critical alerts whatever their priority).
    @inlinable public var effectiveLane: Lane { lane(pushType: pushType) }

    /// ``effectiveLane`` with the push type as the request will go out: one a transport inferred
    /// from the payload (`background` for a content-available-only push) when it named none.
    @inlinable public func lane(pushType: PushType?) -> Lane {
        if let lane { return lane }
        if let level = aps.interruptionLevel, level == "time-sensitive" || level == "critical" { return .fast }
        if let p = priority { return p.rawValue == 10 ? .fast : .bulk }
        return pushType == .background ? .bulk : .fast
    }
}

/// APNs delivery priority. A struct with static members so new values can be added.
public struct Priority: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Send now; the notification must alert, sound or badge.
    public static let immediately = Priority(rawValue: 10)
    /// Send at a time that conserves the device's power.
    public static let considerPower = Priority(rawValue: 5)
    /// Lowest priority (HTTP/2 only).
    public static let low = Priority(rawValue: 1)
    public var description: String { String(rawValue) }
}

/// Where localization happens.
public struct LocalizationMode: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Herald renders the text in the device's language.
    public static let server = LocalizationMode(rawValue: "server")
    /// The keys go to the device, which renders them from the app's bundle.
    public static let client = LocalizationMode(rawValue: "client")
    public var description: String { rawValue }
}

/// The `aps` dictionary: Apple-defined keys.
///
/// The keys most requests use are stored inline; the rest (interruption
/// level, relevance, Live Activity keys…) live in one copy-on-write box, made
/// only for a request that sets one of them, so a request stays small to move.
public struct APS: Sendable, Hashable {
    public var alert: Alert?
    /// Badge number; 0 clears it.
    public var badge: Int?
    public var sound: Sound?
    public var threadID: String?
    public var category: String?
    public var contentAvailable: Bool = false
    public var mutableContent: Bool = false
    @usableFromInline var more = CopyOnWrite<More>()

    @usableFromInline struct More: Sendable, Hashable, DefaultInitializable {
        @usableFromInline var targetContentID: String?
        @usableFromInline var interruptionLevel: String?
        @usableFromInline var relevanceScore: Double?
        @usableFromInline var filterCriteria: String?
        @usableFromInline var timestamp: Int?
        @usableFromInline var event: String?
        @usableFromInline var contentState: JSONValue?
        @usableFromInline var staleDate: Int?
        @usableFromInline var dismissalDate: Int?
        @usableFromInline var attributesType: String?
        @usableFromInline var attributes: JSONValue?
        @usableFromInline var inputPushToken = false
        @usableFromInline var inputPushChannel: String?
        @usableFromInline init() {}
    }

    public init() {}

    @inlinable public var targetContentID: String? { get { more.storage?.value.targetContentID } set { if newValue != nil || more.storage != nil { more.value.targetContentID = newValue } } }
    /// `passive`, `active`, `time-sensitive` or `critical`.
    @inlinable public var interruptionLevel: String? { get { more.storage?.value.interruptionLevel } set { if newValue != nil || more.storage != nil { more.value.interruptionLevel = newValue } } }
    /// 0…1.
    @inlinable public var relevanceScore: Double? { get { more.storage?.value.relevanceScore } set { if newValue != nil || more.storage != nil { more.value.relevanceScore = newValue } } }
    @inlinable public var filterCriteria: String? { get { more.storage?.value.filterCriteria } set { if newValue != nil || more.storage != nil { more.value.filterCriteria = newValue } } }
    // Live Activities
    @inlinable public var timestamp: Int? { get { more.storage?.value.timestamp } set { if newValue != nil || more.storage != nil { more.value.timestamp = newValue } } }
    @inlinable public var event: String? { get { more.storage?.value.event } set { if newValue != nil || more.storage != nil { more.value.event = newValue } } }
    @inlinable public var contentState: JSONValue? { get { more.storage?.value.contentState } set { if newValue != nil || more.storage != nil { more.value.contentState = newValue } } }
    @inlinable public var staleDate: Int? { get { more.storage?.value.staleDate } set { if newValue != nil || more.storage != nil { more.value.staleDate = newValue } } }
    @inlinable public var dismissalDate: Int? { get { more.storage?.value.dismissalDate } set { if newValue != nil || more.storage != nil { more.value.dismissalDate = newValue } } }
    @inlinable public var attributesType: String? { get { more.storage?.value.attributesType } set { if newValue != nil || more.storage != nil { more.value.attributesType = newValue } } }
    @inlinable public var attributes: JSONValue? { get { more.storage?.value.attributes } set { if newValue != nil || more.storage != nil { more.value.attributes = newValue } } }
    /// A Live Activity start asks the device for an update token (`"input-push-token": 1`).
    @inlinable public var inputPushToken: Bool { get { more.storage?.value.inputPushToken ?? false } set { if newValue || more.storage != nil { more.value.inputPushToken = newValue } } }
    /// A Live Activity start subscribes to a broadcast channel.
    @inlinable public var inputPushChannel: String? { get { more.storage?.value.inputPushChannel } set { if newValue != nil || more.storage != nil { more.value.inputPushChannel = newValue } } }
}

/// The alert: a plain body, or a dictionary of text and localization keys.
///
/// The keys most alerts use are stored inline; the rest live in a
/// copy-on-write box made only for an alert that sets one of them.
public struct Alert: Sendable, Hashable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var locKey: String?
    public var locArgs: [String]?
    @usableFromInline var more = CopyOnWrite<More>()

    @usableFromInline struct More: Sendable, Hashable, DefaultInitializable {
        @usableFromInline var launchImage: String?
        @usableFromInline var actionLocKey: String??
        @usableFromInline var titleLocKey: String?
        @usableFromInline var titleLocArgs: [String]?
        @usableFromInline var subtitleLocKey: String?
        @usableFromInline var subtitleLocArgs: [String]?
        @usableFromInline init() {}
    }

    @inlinable public var launchImage: String? { get { more.storage?.value.launchImage } set { if newValue != nil || more.storage != nil { more.value.launchImage = newValue } } }
    /// `.some(nil)` is the explicit JSON `null`: a single OK button.
    @inlinable public var actionLocKey: String?? { get { if let s = more.storage { return s.value.actionLocKey } else { return nil } } set { if newValue != nil || more.storage != nil { more.value.actionLocKey = newValue } } }
    @inlinable public var titleLocKey: String? { get { more.storage?.value.titleLocKey } set { if newValue != nil || more.storage != nil { more.value.titleLocKey = newValue } } }
    @inlinable public var titleLocArgs: [String]? { get { more.storage?.value.titleLocArgs } set { if newValue != nil || more.storage != nil { more.value.titleLocArgs = newValue } } }
    @inlinable public var subtitleLocKey: String? { get { more.storage?.value.subtitleLocKey } set { if newValue != nil || more.storage != nil { more.value.subtitleLocKey = newValue } } }
    @inlinable public var subtitleLocArgs: [String]? { get { more.storage?.value.subtitleLocArgs } set { if newValue != nil || more.storage != nil { more.value.subtitleLocArgs = newValue } } }

    public init(body: String? = nil, title: String? = nil, subtitle: String? = nil) {
        self.body = body
        self.title = title
        self.subtitle = subtitle
    }

    /// Whether the alert has only a body, and so may be sent as a plain string.
    public var isBodyOnly: Bool {
        body != nil && title == nil && subtitle == nil && locKey == nil && locArgs == nil && more.isDefault
    }

    /// Removes every localization key and its arguments (`loc-`, `title-loc-`,
    /// `subtitle-loc-`), as the server-side localizer does once it has
    /// rendered them; `action-loc-key` stays. Drops the box of rarely used
    /// keys when nothing else is in it, rather than copying a shared one to
    /// clear two fields.
    @inlinable public mutating func clearLocalizationKeys() {
        locKey = nil
        locArgs = nil
        guard let s = more.storage else { return }
        if s.value.launchImage == nil && s.value.actionLocKey == nil {
            more.storage = nil
        } else if s.value.titleLocKey != nil || s.value.titleLocArgs != nil || s.value.subtitleLocKey != nil || s.value.subtitleLocArgs != nil {
            more.value.titleLocKey = nil
            more.value.titleLocArgs = nil
            more.value.subtitleLocKey = nil
            more.value.subtitleLocArgs = nil
        }
    }

    /// Whether any localization key is present.
    public var hasLocalizationKeys: Bool { locKey != nil || titleLocKey != nil || subtitleLocKey != nil }
}

/// The sound: a file name, or the critical-alert dictionary.
public enum Sound: Sendable, Hashable {
    case named(String)
    case critical(name: String, volume: Double, critical: Bool)
}
