import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldSimulator

/// Builds the `http2-simulator` transport: the HTTP/2 provider API's delivery
/// rules against the in-memory HTTP/2 simulator.
///
/// ```json
/// "transport": {
///   "type": "http2-simulator",
///   "bundleID": "com.example.app",
///   "recordDeliveries": false,
///   "connections": 2,
///   "providerToken": {"keyFile": "AuthKey_ABC123DEFG.p8", "keyID": "ABC123DEFG", "teamID": "DEF123GHIJ"},
///   "invalidTokens": ["<hex>"], "unregisteredTokens": ["<hex>"],
///   "faults": {"seed": 7, "goAway": 0.001, "unavailable": 0.001, "tooManyRequests": 0.0005,
///              "internalError": 0, "reset": 0, "lostAnswer": 0}
/// }
/// ```
///
/// With `providerToken`, requests carry a JWT signed with that key and the
/// simulator verifies it against the key's public half; without, it plays a
/// certificate-authenticated connection. `unregisteredTokens` answer 410 as
/// unregistered since the transport started.
enum HTTP2SimulatorTransportFactory {
    static func make(_ node: ConfigNode, context: TransportContext) throws(ConfigError) -> HTTP2SimulatorTransport {
        var configuration = HTTP2SimulatorConfiguration()
        configuration.bundleID = try node.string("bundleID") ?? configuration.bundleID
        // Off by default, as for `simulator`: herald send streams, and a record of every delivery would grow without bound.
        configuration.recordsDeliveries = try node.bool("recordDeliveries") ?? false
        var tokens: SharedProviderTokens?
        if let key = try providerTokenKey(node) {
            configuration.tokenKeyPEM = key.publicKeyPEM
            configuration.keyID = key.keyID
            configuration.teamID = key.teamID
            tokens = try context.providerTokens.map { pool throws(ConfigError) in try shared(key, in: pool, node) } ?? SharedProviderTokens(ProviderTokens(key: key))
        }
        let f = try node.child("faults")
        configuration.faults.seed = UInt64(try f.int("seed", in: 0...Int.max) ?? 0)
        for (key, path) in [("goAway", \HTTP2SimulatorConfiguration.Faults.goAway), ("unavailable", \.unavailable),
                            ("tooManyRequests", \.tooManyRequests), ("internalError", \.internalError), ("reset", \.reset),
                            ("lostAnswer", \.lostAnswer)] {
            guard let p = try f.double(key) else { continue }
            guard p >= 0 && p <= 1 else { throw f.error(key, "must be a probability from 0 to 1, got \(p)") }
            configuration.faults[keyPath: path] = p
        }
        let simulator: HTTP2Simulator
        do { simulator = try HTTP2Simulator(configuration: configuration) } catch { throw node.error("providerToken", "\(error)") }
        for t in try SimulatorTransportFactory.tokens(node, "invalidTokens") { simulator.markInvalid(t) }
        let started = Int64(Date().timeIntervalSince1970 * 1000)
        for t in try SimulatorTransportFactory.tokens(node, "unregisteredTokens") { simulator.markUnregistered(t, at: started) }
        var policy = HTTP2DeliveryPolicy()
        policy.connections = try node.int("connections", in: 1...64) ?? 1
        return HTTP2SimulatorTransport(simulator: simulator, sharedTokens: tokens, policy: policy)
    }

    /// The JWT of `key`'s team, shared through `pool` with every other app signing with it.
    static func shared(_ key: ProviderTokenKey, in pool: ProviderTokenPool, _ node: ConfigNode) throws(ConfigError) -> SharedProviderTokens {
        guard let tokens = pool.tokens(for: key) else {
            throw node.error("providerToken", "key \(key.keyID) of team \(key.teamID) is configured with another .p8 file elsewhere: one key id, one key")
        }
        return tokens
    }

    /// `providerToken: {"keyFile": "AuthKey_….p8", "keyID": "…", "teamID": "…"}`, if given.
    static func providerTokenKey(_ node: ConfigNode) throws(ConfigError) -> ProviderTokenKey? {
        guard node.has("providerToken") else { return nil }
        let t = try node.child("providerToken")
        guard let file = try t.path("keyFile") else { throw t.error("keyFile", "required: the .p8 file Apple gave for the key") }
        guard let keyID = try t.string("keyID") else { throw t.error("keyID", "required: the key's 10-character id") }
        guard let teamID = try t.string("teamID") else { throw t.error("teamID", "required: the team's 10-character id") }
        // Each identifier is checked under its own key (a 9-character keyID was reported under keyFile).
        for (key, value) in [("keyID", keyID), ("teamID", teamID)] where !ProviderTokenKey.isIdentifier(value) {
            throw t.error(key, "must be 10 letters or digits, as Apple's developer account shows it (got \(value.count) characters)")
        }
        if let warning = secretFileWarning(file, holds: "the provider token's signing key") { warnAtStart(warning) }
        do { return try ProviderTokenKey(p8File: file, keyID: keyID, teamID: teamID) } catch { throw t.error("keyFile", error.description) }
    }
}
