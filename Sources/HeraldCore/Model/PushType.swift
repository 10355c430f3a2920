/// The HTTP/2 API's `apns-push-type`: what the notification is for, which
/// decides the topic's suffix and the payload's size limit. An open struct,
/// like ``Status``: a type Apple adds later is a value, not a crash.
public struct PushType: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let alert = PushType(rawValue: "alert")
    /// Content-available only; priority 5 (or 1).
    public static let background = PushType(rawValue: "background")
    public static let voip = PushType(rawValue: "voip")
    public static let complication = PushType(rawValue: "complication")
    public static let fileProvider = PushType(rawValue: "fileprovider")
    public static let mdm = PushType(rawValue: "mdm")
    /// Token authentication only.
    public static let location = PushType(rawValue: "location")
    public static let liveActivity = PushType(rawValue: "liveactivity")
    public static let pushToTalk = PushType(rawValue: "pushtotalk")
    public static let widgets = PushType(rawValue: "widgets")
    public static let controls = PushType(rawValue: "controls")

    /// Every push type APNs documents.
    public static let known: [PushType] = [
        .alert, .background, .voip, .complication, .fileProvider, .mdm, .location, .liveActivity, .pushToTalk, .widgets, .controls,
    ]

    /// The bundle identifier an `apns-topic` is for: the topic without the push type's suffix
    /// (`com.example.app.voip` → `com.example.app`), the longest suffix that fits.
    public static func bundleID(ofTopic topic: String) -> String {
        var best = 0
        for t in known {
            guard let suffix = t.topicSuffix, suffix.utf8.count > best, topic.utf8.count > suffix.utf8.count, topic.hasSuffix(suffix) else { continue }
            best = suffix.utf8.count
        }
        return best == 0 ? topic : String(topic.utf8.dropLast(best))!
    }

    /// What `apns-topic` adds to the bundle identifier; `nil` for `mdm`,
    /// whose topic comes from the MDM certificate as given.
    public var topicSuffix: String? {
        switch self {
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileProvider: return ".pushkit.fileprovider"
        case .location: return ".location-query"
        case .liveActivity: return ".push-type.liveactivity"
        case .pushToTalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        case .mdm: return nil
        default: return ""
        }
    }

    /// The largest payload APNs takes for this type over HTTP/2.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    public var description: String { rawValue }
}
