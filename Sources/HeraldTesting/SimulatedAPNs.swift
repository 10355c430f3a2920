import HeraldClient
import HeraldCore
import HeraldHTTP2
import HeraldJSON
import HeraldKit
import HeraldSimulator

/// APNs in memory behind a ``HeraldClient``, for an app's own tests: the
/// same client the app uses in production, over the HTTP/2 delivery rules,
/// against the HTTP/2 simulator (which checks every request as APNs does),
/// with what was delivered kept for the test to assert on.
///
/// ```swift
/// let apns = try SimulatedAPNs()
/// try await apns.run { client in
///     let outcome = try await client.send(.alert(to: token, body: "Your order shipped"))
///     #expect(outcome.isAccepted)
/// }
/// #expect(apns.sent.first?.payload.contains("Your order shipped") == true)
/// ```
public final class SimulatedAPNs: Sendable {
    public let simulator: HTTP2Simulator
    public let client: HeraldClient

    /// `configuration`: the rest of Herald's configuration (localization,
    /// stages, payload policy); its transport is replaced by the simulator.
    public init(
        bundleID: String = "com.example.app", configuration: HeraldConfiguration = HeraldConfiguration(), registry: HeraldRegistry = .standard(),
        options: HeraldClient.Options = .init()
    ) throws {
        var settings = HTTP2SimulatorConfiguration()
        settings.bundleID = bundleID
        settings.recordsRequests = true
        simulator = try HTTP2Simulator(configuration: settings)
        let assembly = try HeraldAssembly.configured(configuration, registry: registry)
        client = try HeraldClient(assembly: assembly, transport: HTTP2SimulatorTransport(simulator: simulator), options: options)
    }

    /// What was delivered, in order.
    public var sent: [SentNotification] { simulator.deliveredRequests.map(SentNotification.init) }

    /// APNs answers 400 `BadDeviceToken` for `token` from now on.
    public func markInvalid(_ token: DeviceToken) { simulator.markInvalid(token) }
    /// APNs answers 410 `Unregistered` (dead since `timestamp`, milliseconds since 1970) for `token`.
    public func markUnregistered(_ token: DeviceToken, at timestamp: Int64 = 1_700_000_000_000) { simulator.markUnregistered(token, at: timestamp) }

    /// Runs the client around `body`, then shuts it down (draining what was
    /// sent) and waits for it to stop.
    public func run<T: Sendable>(_ body: @Sendable (HeraldClient) async throws -> T) async throws -> T {
        let client = self.client
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await client.run() }
            do {
                let result = try await body(client)
                client.shutdown()
                try await group.waitForAll()
                return result
            } catch {
                client.shutdown()
                try? await group.waitForAll()
                throw error
            }
        }
    }
}

/// One notification the simulated APNs delivered, as it arrived.
public struct SentNotification: Sendable, Hashable {
    /// The device token (hex), or `nil` for a broadcast.
    public let token: String?
    /// The broadcast channel, for a broadcast.
    public let channelID: String?
    public let topic: String?
    public let pushType: String?
    public let priority: String?
    public let collapseID: String?
    public let apnsID: String
    /// The payload's JSON text, exactly as sent.
    public let payload: String

    init(_ r: APNsRequest) {
        let device = "/3/device/"
        token = r.path.hasPrefix(device) ? String(r.path.dropFirst(device.count)) : nil
        channelID = r.channelID
        topic = r[header: "apns-topic"]
        pushType = r[header: "apns-push-type"]
        priority = r[header: "apns-priority"]
        collapseID = r[header: "apns-collapse-id"]
        apnsID = r.apnsID
        payload = String(decoding: r.body, as: UTF8.self)
    }

    /// The payload, parsed.
    public var json: JSONValue? { try? JSONParser.parse(Array(payload.utf8)) }
}
