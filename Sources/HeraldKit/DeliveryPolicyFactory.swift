import HeraldBinary
import HeraldCore

/// Reads the binary interface's delivery rules (``DeliveryPolicy``) from a
/// transport's configuration node; the `simulator` and `gateway` transports
/// take the same keys:
///
/// `writeBytes`, `maxUnconfirmed`, `minUnconfirmed`, `confirmAfterMilliseconds`,
/// `answerTimeoutMilliseconds`, `maxSilentCloses`, `maxOutageSeconds`,
/// `backoffInitialMilliseconds`, `backoffMaxMilliseconds`, `connectTimeoutSeconds`,
/// `firstConnectAttempts` (0: hold through `maxOutageSeconds` even before any connection).
enum DeliveryPolicyFactory {
    static func make(_ node: ConfigNode) throws(ConfigError) -> DeliveryPolicy {
        var p = DeliveryPolicy()
        p.writeBytes = try node.int("writeBytes", in: 512...(16 << 20)) ?? p.writeBytes
        p.maxUnconfirmed = try node.int("maxUnconfirmed", in: 1...10_000_000) ?? p.maxUnconfirmed
        p.minUnconfirmed = try node.int("minUnconfirmed", in: 1...10_000_000) ?? p.minUnconfirmed
        if p.minUnconfirmed > p.maxUnconfirmed { throw node.error("minUnconfirmed", "must not exceed maxUnconfirmed (\(p.maxUnconfirmed))") }
        if let ms = try node.int("confirmAfterMilliseconds", in: 1...600_000) { p.confirmAfter = .milliseconds(ms) }
        if let ms = try node.int("answerTimeoutMilliseconds", in: 1...600_000) { p.answerTimeout = .milliseconds(ms) }
        p.maxSilentCloses = try node.int("maxSilentCloses", in: 1...1000) ?? p.maxSilentCloses
        if let s = try node.int("maxOutageSeconds", in: 1...86_400) { p.maxOutage = .seconds(s) }
        if let ms = try node.int("backoffInitialMilliseconds", in: 1...600_000) { p.backoff.initial = .milliseconds(ms) }
        if let ms = try node.int("backoffMaxMilliseconds", in: 1...3_600_000) { p.backoff.maximum = .milliseconds(ms) }
        if let s = try node.int("connectTimeoutSeconds", in: 1...600) { p.connectTimeout = .seconds(s) }
        if let n = try node.int("firstConnectAttempts", in: 0...1000) { p.firstConnectAttempts = n == 0 ? nil : n }
        return p
    }
}
