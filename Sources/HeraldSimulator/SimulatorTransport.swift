import HeraldCore
import Synchronization

/// A basic in-memory APNs: validates each notification as the gateway would
/// (token size, payload present and within the limit) and records the
/// accepted ones in order. Unknown tokens listed as invalid get status 8.
public final class SimulatorTransport: Transport {
    public struct Delivery: Sendable, Hashable {
        public var token: DeviceToken
        public var payload: [UInt8]
        public var identifier: UInt32?
    }

    let payloadLimit: Int
    let invalidTokens: Set<DeviceToken>
    let delivered = Mutex<[Delivery]>([])

    public init(payloadLimit: Int = 2048, invalidTokens: Set<DeviceToken> = []) {
        self.payloadLimit = payloadLimit
        self.invalidTokens = invalidTokens
    }

    /// Everything accepted so far, in order.
    public var deliveries: [Delivery] { delivered.withLock { $0 } }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var records: [OutcomeRecord] = []
        records.reserveCapacity(batch.count)
        var accepted: [Delivery] = []
        for e in batch {
            let status: Status?
            if e.request.token.count == 0 {
                status = .missingDeviceToken
            } else if e.request.token.count != DeviceToken.standardLength {
                status = .invalidTokenSize
            } else if e.payload.isEmpty {
                status = .missingPayload
            } else if e.payload.count > payloadLimit {
                status = .invalidPayloadSize
            } else if invalidTokens.contains(e.request.token) {
                status = .invalidToken
            } else {
                status = nil
            }
            if let status {
                records.append(e.record(.rejected(status)))
            } else {
                accepted.append(Delivery(token: e.request.token, payload: e.payload, identifier: e.request.id))
                records.append(e.record(.accepted))
            }
        }
        delivered.withLock { $0.append(contentsOf: accepted) }
        outcomes.record(records)
    }

    public func finish(outcomes: OutcomeLedger) async {}
}
