import HeraldCore
import HeraldLocalization

/// The game's notifications, built from the typed keys that HeraldStringsPlugin
/// generates from `Localization/` (`Localizable`, `Digest`): a key and its
/// arguments cannot drift apart, and the compiler checks their types.
public enum GameNotifications {
    public static let topic = "com.example.game"

    /// "Bob and Alice have invited you to play Monopoly".
    public static func invite(_ token: DeviceToken, from first: String, and second: String) -> NotificationRequest {
        var request = NotificationRequest(token: token, topic: topic)
        request.aps.alert = Alert(body: Localizable.gamePlayRequestFormat(first, second), title: Localizable.inviteTitle)
        request.aps.sound = .named("default")
        request.aps.category = "GAME_INVITE"
        return request
    }

    /// "Bob now has 42 points".
    public static func score(_ token: DeviceToken, player: String, points: Int) -> NotificationRequest {
        var request = NotificationRequest(token: token, topic: topic)
        request.aps.alert = Alert(body: Localizable.scoreUpdate(player, points))
        request.aps.badge = 1
        request.aps.threadID = "scores"
        return request
    }

    /// "3 unread messages", from the `Digest` string catalog (plural forms). The
    /// device reads keys from `Localizable` only: this one is for Herald's
    /// server-side localization with `localize.table` set to `Digest`.
    public static func digest(_ token: DeviceToken, unread: Int) -> NotificationRequest {
        var request = NotificationRequest(token: token, topic: topic)
        request.aps.alert = Alert(body: Digest.unreadMessages(count: unread), title: Digest.digestTitle)
        return request
    }

    /// Every key the notifications use, with the number of arguments it takes.
    public static let keys = Localizable.argumentCounts.merging(Digest.argumentCounts) { a, _ in a }
}
