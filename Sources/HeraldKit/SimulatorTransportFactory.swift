import HeraldCore
import HeraldSimulator

/// Builds the `simulator` transport from its configuration node:
///
/// ```json
/// "transport": {
///   "type": "simulator",
///   "topic": "com.example.app",
///   "unknownTokens": "deliver",
///   "invalidTokens": ["<hex>"], "uninstalledTokens": ["<hex>"], "offlineTokens": ["<hex>"],
///   "recordDeliveries": false,
///   "faults": {"seed": 7, "appleLike": true, "closeAfter": [100], "closeProbability": 0.001, "shutdownAfter": [250],
///              "shutdownProbability": 0.0007, "lostAnswerProbability": 0.02, "midFrameCloseProbability": 0.001,
///              "stallProbability": 0.002, "slowHandshakeProbability": 0.01, "handshakeDelayMilliseconds": 200,
///              "responseDelayWrites": 2, "partialWriteProbability": 0.1,
///              "readDelayProbability": 0.01, "readDelayMilliseconds": 1}
/// }
/// ```
///
/// `appleLike` starts from ``FaultPlan/appleLike(seed:)``; the other keys
/// override it. The delivery keys (`maxUnconfirmed`, `confirmAfterMilliseconds`…)
/// are those of ``DeliveryPolicyFactory``.
///
/// `"shards": N` (1 to 256) spreads the simulator over N cores
/// (``ShardedSimulatorTransport``: a simulated gateway each, a token always on
/// the same one). Without `faults` the default is the pipeline's threads, at
/// most 8; with `faults` it is 1, so that a seed reproduces the same faults on any machine.
enum SimulatorTransportFactory {
    static func make(_ node: ConfigNode, payloadLimit: Int, threads: Int = 1) throws(ConfigError) -> any Transport {
        var configuration = SimulatorConfiguration(payloadLimit: payloadLimit)
        // Off by default: `herald send` streams, and a record of every delivery would grow without bound.
        configuration.recordsDeliveries = try node.bool("recordDeliveries") ?? false
        if let policy = try node.string("unknownTokens", oneOf: ["deliver", "invalid"]) {
            configuration.unknownTokens = policy == "invalid" ? .invalid : .deliver
        }
        let faults = try node.child("faults")
        let seed = UInt64(try faults.int("seed", in: 0...Int.max) ?? 0)
        var plan = try faults.bool("appleLike") == true ? FaultPlan.appleLike(seed: seed) : FaultPlan(seed: seed)
        plan.closeAfter = try ints(faults, "closeAfter")
        plan.shutdownAfter = try ints(faults, "shutdownAfter")
        func probability(_ key: String, _ value: inout Double) throws(ConfigError) {
            guard let p = try faults.double(key) else { return }
            guard p >= 0 && p <= 1 else { throw faults.error(key, "must be a probability from 0 to 1, got \(p)") }
            value = p
        }
        try probability("closeProbability", &plan.closeProbability)
        try probability("shutdownProbability", &plan.shutdownProbability)
        try probability("lostAnswerProbability", &plan.lostAnswerProbability)
        try probability("midFrameCloseProbability", &plan.midFrameCloseProbability)
        try probability("stallProbability", &plan.stallProbability)
        try probability("slowHandshakeProbability", &plan.slowHandshakeProbability)
        try probability("partialWriteProbability", &plan.partialWriteProbability)
        try probability("readDelayProbability", &plan.readDelayProbability)
        plan.responseDelayWrites = try faults.int("responseDelayWrites", in: 0...1_000_000) ?? 0
        if let ms = try faults.int("readDelayMilliseconds", in: 0...60_000) { plan.readDelay = .milliseconds(ms) }
        if let ms = try faults.int("handshakeDelayMilliseconds", in: 0...60_000) { plan.handshakeDelay = .milliseconds(ms) }
        configuration.faults = plan
        // Up to 8 by default: each shard's part of a batch costs a connection and a probe of its own.
        let shards = try node.int("shards", in: 1...256) ?? (node.value("faults") == nil ? min(max(1, threads), 8) : 1)

        let (invalid, uninstalled, offline) = (try tokens(node, "invalidTokens"), try tokens(node, "uninstalledTokens"), try tokens(node, "offlineTokens"))
        let options = SimulatorTransport.Options(topic: try node.string("topic") ?? "default",
                                                 delivery: try DeliveryPolicyFactory.make(node))
        // Shard i's faults follow seed + i; every shard knows the listed tokens (each sees only its own).
        let transports = (0..<shards).map { i in
            var c = configuration
            c.faults.seed = seed &+ UInt64(i)
            let simulator = APNsSimulator(configuration: c)
            for t in invalid { simulator.markInvalid(t) }
            for t in uninstalled { simulator.uninstall(t) }
            for t in offline { simulator.register(t, online: false) }
            return SimulatorTransport(simulator: simulator, options: options)
        }
        return shards == 1 ? transports[0] : ShardedSimulatorTransport(shards: transports)
    }

    static func tokens(_ node: ConfigNode, _ key: String) throws(ConfigError) -> [DeviceToken] {
        var out: [DeviceToken] = []
        for hex in try node.strings(key) ?? [] {
            do { out.append(try DeviceToken(hex: hex)) } catch { throw node.error(key, "\(error)") }
        }
        return out
    }

    static func ints(_ node: ConfigNode, _ key: String) throws(ConfigError) -> [Int] {
        guard let v = node.value(key) else { return [] }
        guard case .array(let a) = v else { throw node.error(key, "must be an array of counts") }
        var out: [Int] = []
        for e in a {
            guard let n = e.numberValue?.intValue, n >= 1 else { throw node.error(key, "must be an array of counts of 1 or more") }
            out.append(n)
        }
        return out
    }
}
