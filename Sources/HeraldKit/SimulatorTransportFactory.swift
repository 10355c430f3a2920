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
enum SimulatorTransportFactory {
    static func make(_ node: ConfigNode, payloadLimit: Int) throws(ConfigError) -> SimulatorTransport {
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

        let simulator = APNsSimulator(configuration: configuration)
        for t in try tokens(node, "invalidTokens") { simulator.markInvalid(t) }
        for t in try tokens(node, "uninstalledTokens") { simulator.uninstall(t) }
        for t in try tokens(node, "offlineTokens") { simulator.register(t, online: false) }

        let options = SimulatorTransport.Options(topic: try node.string("topic") ?? "default",
                                                 delivery: try DeliveryPolicyFactory.make(node))
        return SimulatorTransport(simulator: simulator, options: options)
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
