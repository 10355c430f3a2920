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
///   "framesPerWrite": 64, "writesPerCheck": 4, "maxAttempts": 5, "recordDeliveries": false,
///   "faults": {"seed": 7, "closeAfter": [100], "closeProbability": 0.001, "shutdownAfter": [250],
///              "responseDelayWrites": 2, "partialWriteProbability": 0.1,
///              "readDelayProbability": 0.01, "readDelayMilliseconds": 1}
/// }
/// ```
enum SimulatorTransportFactory {
    static func make(_ node: ConfigNode, payloadLimit: Int) throws(ConfigError) -> SimulatorTransport {
        var configuration = SimulatorConfiguration(payloadLimit: payloadLimit)
        // Off by default: `herald send` streams, and a record of every delivery would grow without bound.
        configuration.recordsDeliveries = try node.bool("recordDeliveries") ?? false
        if let policy = try node.string("unknownTokens", oneOf: ["deliver", "invalid"]) {
            configuration.unknownTokens = policy == "invalid" ? .invalid : .deliver
        }
        let faults = try node.child("faults")
        var plan = FaultPlan()
        plan.seed = UInt64(try faults.int("seed", in: 0...Int.max) ?? 0)
        plan.closeAfter = try ints(faults, "closeAfter")
        plan.shutdownAfter = try ints(faults, "shutdownAfter")
        plan.closeProbability = try probability(faults, "closeProbability")
        plan.partialWriteProbability = try probability(faults, "partialWriteProbability")
        plan.readDelayProbability = try probability(faults, "readDelayProbability")
        plan.responseDelayWrites = try faults.int("responseDelayWrites", in: 0...1_000_000) ?? 0
        if let ms = try faults.int("readDelayMilliseconds", in: 0...60_000) { plan.readDelay = .milliseconds(ms) }
        configuration.faults = plan

        let simulator = APNsSimulator(configuration: configuration)
        for t in try tokens(node, "invalidTokens") { simulator.markInvalid(t) }
        for t in try tokens(node, "uninstalledTokens") { simulator.uninstall(t) }
        for t in try tokens(node, "offlineTokens") { simulator.register(t, online: false) }

        var options = SimulatorTransport.Options()
        options.topic = try node.string("topic") ?? options.topic
        options.framesPerWrite = try node.int("framesPerWrite", in: 1...65536) ?? options.framesPerWrite
        options.writesPerCheck = try node.int("writesPerCheck", in: 1...65536) ?? options.writesPerCheck
        options.maxAttempts = try node.int("maxAttempts", in: 1...1000) ?? options.maxAttempts
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

    static func probability(_ node: ConfigNode, _ key: String) throws(ConfigError) -> Double {
        guard let p = try node.double(key) else { return 0 }
        guard p >= 0 && p <= 1 else { throw node.error(key, "must be a probability from 0 to 1, got \(p)") }
        return p
    }
}
