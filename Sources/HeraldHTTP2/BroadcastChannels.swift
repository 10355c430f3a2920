import HeraldCore
import HeraldJSON

/// A broadcast channel (iOS 18 Live Activities): devices subscribe to it, and
/// one broadcast push reaches every subscriber.
public struct BroadcastChannel: Sendable, Hashable {
    /// The id APNs issued (`apns-channel-id`), base64 text.
    public var id: String
    /// `0`: APNs stores no message for offline devices; `1`: it keeps the most recent one.
    public var storagePolicy: Int?
    /// `LiveActivity`, the only kind APNs has.
    public var pushType: String?

    public init(id: String, storagePolicy: Int? = nil, pushType: String? = nil) {
        self.id = id
        self.storagePolicy = storagePolicy
        self.pushType = pushType
    }
}

/// One call to APNs' channel management API (`api-manage-broadcast…`), as
/// an ``APNsRequest`` any HTTP/2 client can send, and the reading of its answer.
public enum BroadcastChannelRequest: Sendable, Hashable {
    /// `POST /1/apps/<bundle id>/channels`: a new channel; the answer (201) names it.
    case create(bundleID: String, storagePolicy: Int)
    /// `GET /1/apps/<bundle id>/channels` with `apns-channel-id`: the channel's settings.
    case read(bundleID: String, channelID: String)
    /// `DELETE /1/apps/<bundle id>/channels` with `apns-channel-id` (204).
    case delete(bundleID: String, channelID: String)
    /// `GET /1/apps/<bundle id>/all-channels`: every channel of the app in this environment.
    case list(bundleID: String)

    /// Storage policies APNs knows.
    public static let storagePolicies = 0...1

    /// The HTTP/2 request; `requestID` becomes `apns-request-id`.
    public func request(requestID: String) -> APNsRequest {
        var headers = [APNsRequest.Header("apns-request-id", requestID)]
        let method: String, path: String
        var body: [UInt8] = []
        switch self {
        case .create(let bundle, let policy):
            (method, path) = ("POST", Self.channelsPath(bundle))
            var w = JSONWriter(capacity: 64)
            w.raw("{\"message-storage-policy\":")
            w.int(policy)
            w.raw(",\"push-type\":\"LiveActivity\"}")
            body = w.bytes
        case .read(let bundle, let channel):
            (method, path) = ("GET", Self.channelsPath(bundle))
            headers.append(.init("apns-channel-id", channel))
        case .delete(let bundle, let channel):
            (method, path) = ("DELETE", Self.channelsPath(bundle))
            headers.append(.init("apns-channel-id", channel))
        case .list(let bundle):
            (method, path) = ("GET", "/1/apps/\(bundle)/all-channels")
        }
        var r = APNsRequest(method: method, path: path, headers: headers, body: body)
        r.apnsID = requestID
        return r
    }

    static func channelsPath(_ bundleID: String) -> String { "/1/apps/\(bundleID)/channels" }

    /// What APNs' answer says, or why it refused.
    public func result(of response: APNsResponse) throws(BroadcastChannelError) -> BroadcastChannelResult {
        guard (200..<300).contains(response.status) else {
            throw BroadcastChannelError(status: response.status, reason: response.reason ?? "no reason given", requestID: response.apnsID)
        }
        func json() throws(BroadcastChannelError) -> JSONObject {
            guard let o = (try? JSONParser.parse(response.content))?.objectValue else {
                throw BroadcastChannelError(
                    status: response.status, reason: "the answer's body is not a JSON object (\(response.content.count) bytes)",
                    requestID: response.apnsID)
            }
            return o
        }
        switch self {
        case .create:
            guard let id = response.channelID, !id.isEmpty else {
                throw BroadcastChannelError(status: response.status, reason: "the answer names no channel (apns-channel-id)", requestID: response.apnsID)
            }
            return .created(BroadcastChannel(id: id))
        case .read(_, let channel):
            let o = try json()
            return .channel(BroadcastChannel(
                id: channel, storagePolicy: o["message-storage-policy"]?.numberValue?.intValue, pushType: o["push-type"]?.stringValue))
        case .delete:
            return .deleted
        case .list:
            let o = try json()
            guard case .array(let items)? = o["channels"] else {
                throw BroadcastChannelError(status: response.status, reason: "the answer has no \"channels\" array", requestID: response.apnsID)
            }
            return .channels(items.compactMap(\.stringValue))
        }
    }
}

/// What a channel management call returned.
public enum BroadcastChannelResult: Sendable, Hashable {
    case created(BroadcastChannel)
    case channel(BroadcastChannel)
    case deleted
    case channels([String])
}

/// APNs refused a channel management call (or answered something unreadable).
public struct BroadcastChannelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status (0: no answer came).
    public var status: Int
    /// APNs' reason (`ChannelNotRegistered`, `BadChannelId`…) or what went wrong.
    public var reason: String
    public var requestID: String?

    public init(status: Int, reason: String, requestID: String? = nil) {
        self.status = status
        self.reason = reason
        self.requestID = requestID
    }

    public var description: String { status == 0 ? reason : "APNs answered \(status) \(reason)" }
}
