import HeraldCore
import HeraldJSON

/// The checks a request must pass before its payload is built.
///
/// Each failure is a ``StageFailure`` whose reason names the key and the
/// value, so the `dropped` outcome says what to fix. Strings are Swift
/// strings and so always valid Unicode: invalid UTF-8 in a request line is
/// caught earlier, by the strict parser, and the line ends as `dropped` there.
public enum PayloadValidator {
    /// Checks a structured request (``NotificationRequest/aps`` and ``NotificationRequest/custom``).
    public static func validate(_ request: NotificationRequest) throws(StageFailure) {
        if request.custom["aps"] != nil {
            throw StageFailure("custom key \"aps\" is reserved for Apple's dictionary; put Apple's keys in \"aps\" itself")
        }
        try validate(request.aps, context: "aps.")
    }

    /// Checks the `aps` dictionary's values.
    public static func validate(_ aps: APS, context: String = "aps.") throws(StageFailure) {
        if let badge = aps.badge, badge < 0 {
            throw StageFailure("\"\(context)badge\" must be 0 or more (0 clears the badge), got \(badge)")
        }
        if case .critical(_, let volume, _)? = aps.sound, !(volume >= 0 && volume <= 1) {
            throw StageFailure("\"\(context)sound.volume\" must be between 0 and 1, got \(volume)")
        }
        if let r = aps.relevanceScore, !(r >= 0 && r <= 1) {
            throw StageFailure("\"\(context)relevance-score\" must be between 0 and 1, got \(r)")
        }
        if let level = aps.interruptionLevel, !APSKey.interruptionLevels.contains(level) {
            throw StageFailure("\"\(context)interruption-level\" must be one of \(APSKey.interruptionLevels.joined(separator: ", ")), got \"\(level)\"")
        }
        try aps.alert?.checkArgumentsHaveKeys(context: context)  // read in place (a method through `?.`), not copied
        try validateLiveActivity(aps, context: context)
    }

    static func validateLiveActivity(_ aps: APS, context: String) throws(StageFailure) {
        guard aps.event != nil || aps.timestamp != nil || aps.contentState != nil || aps.staleDate != nil
            || aps.dismissalDate != nil || aps.attributesType != nil || aps.attributes != nil
            || aps.inputPushToken || aps.inputPushChannel != nil
        else { return }  // not a Live Activity push
        func seconds(_ value: Int?, _ name: String) throws(StageFailure) {
            if let value, value < 0 { throw StageFailure("\"\(context)\(name)\" must be UNIX seconds (0 or more), got \(value)") }
        }
        try seconds(aps.timestamp, "timestamp")
        try seconds(aps.staleDate, "stale-date")
        try seconds(aps.dismissalDate, "dismissal-date")
        if let v = aps.contentState, v.objectValue == nil {
            throw StageFailure("\"\(context)content-state\" must be an object, got \(v.typeName)")
        }
        if let v = aps.attributes, v.objectValue == nil {
            throw StageFailure("\"\(context)attributes\" must be an object, got \(v.typeName)")
        }
        guard let event = aps.event else {
            let present = [
                aps.contentState != nil ? "content-state" : nil, aps.staleDate != nil ? "stale-date" : nil,
                aps.dismissalDate != nil ? "dismissal-date" : nil, aps.attributesType != nil ? "attributes-type" : nil,
                aps.attributes != nil ? "attributes" : nil, aps.inputPushToken ? "input-push-token" : nil,
                aps.inputPushChannel != nil ? "input-push-channel" : nil,
            ].compactMap { $0 }
            if let first = present.first {
                throw StageFailure("\"\(context)\(first)\" is a Live Activity key and needs \"event\" (start, update or end)")
            }
            return
        }
        guard APSKey.events.contains(event) else {
            throw StageFailure("\"\(context)event\" must be one of \(APSKey.events.joined(separator: ", ")), got \"\(event)\"")
        }
        if aps.timestamp == nil { throw StageFailure("\"\(context)event\" needs \"timestamp\"") }
        if event != "end" && aps.contentState == nil { throw StageFailure("\"\(context)event\": \(event) needs \"content-state\"") }
        if event == "start" && (aps.attributesType == nil || aps.attributes == nil) {
            throw StageFailure("\"\(context)event\": start needs \"attributes-type\" and \"attributes\"")
        }
        if event != "start" && (aps.attributesType != nil || aps.attributes != nil) {
            throw StageFailure("\"\(context)attributes\" and \"attributes-type\" go only with event start")
        }
        if event != "start" && (aps.inputPushToken || aps.inputPushChannel != nil) {
            throw StageFailure("\"\(context)\(aps.inputPushToken ? "input-push-token" : "input-push-channel")\" goes only with event start")
        }
        if aps.inputPushToken && aps.inputPushChannel != nil {
            throw StageFailure("\"\(context)input-push-token\" and \"input-push-channel\" cannot be combined")
        }
    }

    /// Whether the push only wakes the app: `content-available` with no alert, badge or sound.
    public static func isContentAvailableOnly(_ aps: APS) -> Bool {
        aps.contentAvailable && aps.alert == nil && aps.badge == nil && aps.sound == nil
    }

    /// A `content-available`-only push may not go with priority 10 (APNs
    /// rejects it); with no priority, it gets 5.
    public static func applyPriorityRule(_ aps: APS, to request: inout NotificationRequest) throws(StageFailure) {
        request.priority = try priority(request.priority, underRuleFor: aps)
    }

    /// ``applyPriorityRule(_:to:)`` on a priority alone: the one to send for `aps`.
    public static func priority(_ priority: Priority?, underRuleFor aps: APS) throws(StageFailure) -> Priority? {
        guard isContentAvailableOnly(aps) else { return priority }
        switch priority {
        case nil: return .considerPower
        case .immediately?:
            throw StageFailure("a content-available-only push (no alert, badge or sound) cannot have priority 10; use priority 5 or 1, or leave priority out")
        default: return priority
        }
    }

    /// Checks a raw payload and returns its `aps` dictionary as a model, for the
    /// priority rule. Apple's keys inside `aps` are checked as in the structured
    /// form; other keys inside `aps` pass (APNs ignores them).
    public static func validateRaw(_ raw: JSONValue) throws(StageFailure) -> APS {
        guard case .object(let top) = raw else {
            throw StageFailure("\"payload\" must be an object with an \"aps\" dictionary, got \(raw.typeName)")
        }
        guard let apsValue = top["aps"] else {
            throw StageFailure("\"payload\" has no \"aps\" dictionary; every payload needs one (it may be empty)")
        }
        guard case .object(let apsObject) = apsValue else {
            throw StageFailure("\"payload.aps\" must be an object, got \(apsValue.typeName)")
        }
        var aps = APS()
        let decoder = RequestDecoder()
        for (key, value) in apsObject where APSKey.known.contains(key) {
            do throws(RequestError) {
                try decoder.decodeAPSKey(key, value, into: &aps, context: "payload.aps.")
            } catch {
                throw StageFailure(error.message)
            }
        }
        try validate(aps, context: "payload.aps.")
        return aps
    }
}

extension Alert {
    /// ``PayloadValidator/validate(_:context:)``'s check of the alert: arguments only with their key.
    fileprivate func checkArgumentsHaveKeys(context: String) throws(StageFailure) {
        if locArgs != nil && locKey == nil {
            throw StageFailure("\"\(context)alert.loc-args\" needs \"loc-key\"")
        }
        if titleLocArgs != nil && titleLocKey == nil {
            throw StageFailure("\"\(context)alert.title-loc-args\" needs \"title-loc-key\"")
        }
        if subtitleLocArgs != nil && subtitleLocKey == nil {
            throw StageFailure("\"\(context)alert.subtitle-loc-args\" needs \"subtitle-loc-key\"")
        }
    }
}
