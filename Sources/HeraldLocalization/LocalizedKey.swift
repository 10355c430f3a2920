import HeraldCore

/// A catalog key with its arguments: what an alert's `loc-key` and `loc-args`
/// (or `title-loc-*`, `subtitle-loc-*`) carry.
///
/// The `HeraldStringsPlugin` build-tool plugin generates one function (or
/// constant) per catalog key returning a `LocalizedKey`, with one typed
/// parameter per argument, so a key and its arguments cannot drift apart:
///
/// ```swift
/// request.aps.alert = Alert(body: Localizable.gamePlayRequestFormat("Jenna", "Frank"),
///                           title: Localizable.inviteTitle)
/// // {"aps":{"alert":{"title-loc-key":"INVITE_TITLE","loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]}}}
/// ```
public struct LocalizedKey: Sendable, Hashable, CustomStringConvertible {
    /// The catalog key.
    public let key: String
    /// The arguments, as the device receives them (always strings).
    public let arguments: [String]

    public init(_ key: String, arguments: [String] = []) {
        self.key = key
        self.arguments = arguments
    }

    public var description: String {
        arguments.isEmpty ? key : "\(key)(\(arguments.joined(separator: ", ")))"
    }

    /// `loc-args` as the payload writes them: absent when the key takes none.
    var payloadArguments: [String]? { arguments.isEmpty ? nil : arguments }
}

extension Alert {
    /// An alert whose texts are catalog keys: rendered by the device
    /// (client-side) or by ``CatalogLocalizer`` (server-side).
    public init(body: LocalizedKey, title: LocalizedKey? = nil, subtitle: LocalizedKey? = nil) {
        self.init()
        locKey = body.key
        locArgs = body.payloadArguments
        titleLocKey = title?.key
        titleLocArgs = title?.payloadArguments
        subtitleLocKey = subtitle?.key
        subtitleLocArgs = subtitle?.payloadArguments
    }
}
