import HeraldJSON

/// Requests built in code, one per push type, so an app never writes JSON.
/// Each sets what APNs wants for its type (the `apns-push-type`, the `aps`
/// keys it needs, a priority it allows) and goes through the same checks as a
/// JSON request (token, the topic's suffix, the size limit of its push type,
/// the payload rules): what a builder cannot rule out, the pipeline reports as
/// `dropped` with the reason. `topic` is the app's bundle id (Herald adds the
/// suffix a push type needs: `.voip`, `.push-type.liveactivity`…), or `nil`
/// for the transport's default topic.
///
/// ```swift
/// try await client.send(.alert(to: token, title: "Order shipped", body: "Arrives Thursday"))
/// try await client.send(.liveActivityUpdate(to: activityToken, contentState: ["score": 3, "period": "Q4"], timestamp: now))
/// ```
extension NotificationRequest {
    /// An alert with text as given.
    public static func alert(
        to token: DeviceToken, title: String? = nil, subtitle: String? = nil, body: String, badge: Int? = nil, sound: String? = nil,
        topic: String? = nil, threadID: String? = nil, category: String? = nil, custom: JSONObject = JSONObject(), id: UInt32? = nil
    ) -> NotificationRequest {
        var aps = APS()
        aps.alert = Alert(body: body, title: title, subtitle: subtitle)
        aps.badge = badge
        aps.sound = sound.map { .named($0) }
        aps.threadID = threadID
        aps.category = category
        var r = NotificationRequest(token: token, aps: aps, custom: custom, id: id, topic: topic)
        r.pushType = .alert
        return r
    }

    /// An alert given as localization keys: rendered by Herald in `language`
    /// (`localization.mode` server, the default) or by the device from the
    /// app's bundle (client).
    public static func localizedAlert(
        to token: DeviceToken, titleKey: String? = nil, titleArgs: [String] = [], bodyKey: String, bodyArgs: [String] = [],
        language: String? = nil, badge: Int? = nil, sound: String? = nil, topic: String? = nil, id: UInt32? = nil
    ) -> NotificationRequest {
        var alert = Alert()
        alert.locKey = bodyKey
        alert.locArgs = bodyArgs.isEmpty ? nil : bodyArgs
        alert.titleLocKey = titleKey
        alert.titleLocArgs = titleArgs.isEmpty ? nil : titleArgs
        var aps = APS()
        aps.alert = alert
        aps.badge = badge
        aps.sound = sound.map { .named($0) }
        var r = NotificationRequest(token: token, aps: aps, id: id, topic: topic, language: language)
        r.pushType = .alert
        return r
    }

    /// A background update: wakes the app (`content-available`) with `custom`
    /// keys beside `aps`; priority 5, as APNs requires.
    public static func background(to token: DeviceToken, custom: JSONObject = JSONObject(), topic: String? = nil, id: UInt32? = nil) -> NotificationRequest {
        var aps = APS()
        aps.contentAvailable = true
        var r = NotificationRequest(token: token, aps: aps, custom: custom, id: id, topic: topic, priority: .considerPower)
        r.pushType = .background
        return r
    }

    /// A VoIP push (PushKit): `custom` is what the app's PushKit handler
    /// reads; topic suffix `.voip`; up to 5,120 bytes.
    public static func voip(to token: DeviceToken, custom: JSONObject, topic: String? = nil, id: UInt32? = nil) -> NotificationRequest {
        var r = NotificationRequest(token: token, custom: custom, id: id, topic: topic, priority: .immediately)
        r.pushType = .voip
        return r
    }

    /// Starts a Live Activity remotely (push-to-start token).
    public static func liveActivityStart(
        to token: DeviceToken, attributesType: String, attributes: JSONValue, contentState: JSONValue, timestamp: Int,
        alert: Alert? = nil, staleDate: Int? = nil, topic: String? = nil, id: UInt32? = nil
    ) -> NotificationRequest {
        var aps = APS()
        aps.event = "start"
        aps.timestamp = timestamp
        aps.contentState = contentState
        aps.attributesType = attributesType
        aps.attributes = attributes
        aps.alert = alert
        aps.staleDate = staleDate
        return liveActivity(token, aps, topic, id)
    }

    /// Updates a Live Activity (its activity push token).
    public static func liveActivityUpdate(
        to token: DeviceToken, contentState: JSONValue, timestamp: Int, alert: Alert? = nil, staleDate: Int? = nil,
        relevanceScore: Double? = nil, topic: String? = nil, id: UInt32? = nil
    ) -> NotificationRequest {
        var aps = APS()
        aps.event = "update"
        aps.timestamp = timestamp
        aps.contentState = contentState
        aps.alert = alert
        aps.staleDate = staleDate
        aps.relevanceScore = relevanceScore
        return liveActivity(token, aps, topic, id)
    }

    /// Ends a Live Activity; it stays on the Lock Screen until `dismissalDate` (UNIX seconds) if given.
    public static func liveActivityEnd(
        to token: DeviceToken, contentState: JSONValue? = nil, timestamp: Int, dismissalDate: Int? = nil, topic: String? = nil, id: UInt32? = nil
    ) -> NotificationRequest {
        var aps = APS()
        aps.event = "end"
        aps.timestamp = timestamp
        aps.contentState = contentState
        aps.dismissalDate = dismissalDate
        return liveActivity(token, aps, topic, id)
    }

    /// A Live Activity update to every device subscribed to a broadcast
    /// channel (iOS 18): no device token; `herald channels` makes channels.
    public static func broadcast(
        channel: String, contentState: JSONValue, timestamp: Int, event: String = "update", alert: Alert? = nil,
        staleDate: Int? = nil, dismissalDate: Int? = nil, topic: String? = nil, id: UInt32? = nil
    ) -> NotificationRequest {
        var aps = APS()
        aps.event = event
        aps.timestamp = timestamp
        aps.contentState = contentState
        aps.alert = alert
        aps.staleDate = staleDate
        aps.dismissalDate = dismissalDate
        var r = NotificationRequest(channelID: channel, aps: aps, topic: topic)
        r.id = id
        r.pushType = .liveActivity
        return r
    }

    /// Asks a Location Push Service Extension for the device's location
    /// (token authentication only; topic suffix `.location-query`).
    public static func locationQuery(to token: DeviceToken, topic: String? = nil, id: UInt32? = nil) -> NotificationRequest {
        var r = NotificationRequest(token: token, aps: APS(), id: id, topic: topic)
        r.pushType = .location
        return r
    }

    /// Tells the app's widgets to reload their timelines (`content-changed`).
    public static func widgetsReload(to token: DeviceToken, topic: String? = nil, id: UInt32? = nil) -> NotificationRequest {
        contentChanged(token, .widgets, topic, id)
    }

    /// Tells the app's controls (iOS 18 Control Center) to reload (`content-changed`).
    public static func controlsReload(to token: DeviceToken, topic: String? = nil, id: UInt32? = nil) -> NotificationRequest {
        contentChanged(token, .controls, topic, id)
    }

    static func liveActivity(_ token: DeviceToken, _ aps: APS, _ topic: String?, _ id: UInt32?) -> NotificationRequest {
        var r = NotificationRequest(token: token, aps: aps, id: id, topic: topic)
        r.pushType = .liveActivity
        return r
    }

    static func contentChanged(_ token: DeviceToken, _ type: PushType, _ topic: String?, _ id: UInt32?) -> NotificationRequest {
        var r = NotificationRequest(token: token, id: id, topic: topic)
        r.rawPayload = ["aps": ["content-changed": true]]
        r.pushType = type
        return r
    }
}
