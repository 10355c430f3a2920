import HeraldCore

/// Client-side localization without catalogs: the keys go to the device as
/// they are, after the checks that need no catalog (arguments only with a key,
/// no empty keys). A request that asks for server-side localization is
/// dropped, since there is nothing to render it from.
public struct KeyCheckingLocalizer: Localizer {
    public init() {}
    public func localize(_ request: inout NotificationRequest) throws(StageFailure) {
        // The alert read in place (a method through `?.`): a bound copy of it cost a retain and a
        // release of each of its texts, on every request.
        try request.aps.alert?.checkKeys(serverSide: request.localization == .server)
    }

    static func check(key: String?, args: [String]?, name: String) throws(StageFailure) {
        if let key, key.isEmpty { throw StageFailure("\(name)-key is empty") }
        if key == nil, args != nil { throw StageFailure("\(name)-args given without \(name)-key") }
    }
}

extension Alert {
    /// ``KeyCheckingLocalizer``'s checks of this alert's keys.
    fileprivate func checkKeys(serverSide: Bool) throws(StageFailure) {
        try KeyCheckingLocalizer.check(key: locKey, args: locArgs, name: "loc")
        try KeyCheckingLocalizer.check(key: titleLocKey, args: titleLocArgs, name: "title-loc")
        try KeyCheckingLocalizer.check(key: subtitleLocKey, args: subtitleLocArgs, name: "subtitle-loc")
        if serverSide && hasLocalizationKeys {
            throw StageFailure("server-side localization was requested but no catalogs are configured (--catalogs or localize.catalogs)")
        }
    }
}
