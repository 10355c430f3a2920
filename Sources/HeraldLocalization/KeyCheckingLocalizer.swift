import HeraldCore

/// Client-side localization without catalogs: the keys go to the device as
/// they are, after the checks that need no catalog (arguments only with a key,
/// no empty keys). A request that asks for server-side localization is
/// dropped, since there is nothing to render it from.
public struct KeyCheckingLocalizer: Localizer {
    public init() {}
    public func localize(_ request: inout NotificationRequest) throws(StageFailure) {
        guard let alert = request.aps.alert else { return }
        try Self.check(key: alert.locKey, args: alert.locArgs, name: "loc")
        try Self.check(key: alert.titleLocKey, args: alert.titleLocArgs, name: "title-loc")
        try Self.check(key: alert.subtitleLocKey, args: alert.subtitleLocArgs, name: "subtitle-loc")
        if request.localization == .server && alert.hasLocalizationKeys {
            throw StageFailure("server-side localization was requested but no catalogs are configured (--catalogs or localize.catalogs)")
        }
    }

    static func check(key: String?, args: [String]?, name: String) throws(StageFailure) {
        if let key, key.isEmpty { throw StageFailure("\(name)-key is empty") }
        if key == nil, args != nil { throw StageFailure("\(name)-args given without \(name)-key") }
    }
}
