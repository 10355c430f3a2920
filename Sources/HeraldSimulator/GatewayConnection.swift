import HeraldBinary
import HeraldCore
import HeraldJSON
import Synchronization

/// What the gateway does with one write from the provider.
public struct GatewayReply: Sendable, Hashable {
    /// How many of the written bytes the gateway read. Fewer than written only
    /// under the partial-write fault: write the rest again.
    public var consumed: Int
    /// Bytes the gateway sends back (an error-response packet), possibly none.
    public var response: [UInt8]
    /// The gateway closed the connection (after sending `response`). Nothing
    /// written from now on is read.
    public var closed: Bool
    /// Under the read-delay fault: how long the gateway waits before reading
    /// again. A network server sleeps that long before its next read; the
    /// in-memory transport waits before its next write.
    public var readDelay: Duration?
    /// The gateway stopped reading for good (the stall fault): `consumed` is 0
    /// and nothing will ever be read or answered on this connection.
    public var stalled: Bool

    public init(consumed: Int, response: [UInt8] = [], closed: Bool = false, readDelay: Duration? = nil, stalled: Bool = false) {
        self.consumed = consumed
        self.response = response
        self.closed = closed
        self.readDelay = readDelay
        self.stalled = stalled
    }
}

/// One provider connection to the simulated gateway: bytes in, the gateway's
/// answer out. Synchronous and transport-agnostic.
///
/// ```swift
/// let connection = simulator.openConnection(topic: "com.example.app")
/// let reply = connection.receive(bytesTheProviderWrote)
/// send(reply.response)            // the error-response packet, if any
/// if reply.closed { close() }     // the gateway hung up
/// // reply.consumed < count: write the rest again (partial-write fault)
/// ```
///
/// The gateway's rules, applied to each notification in order (formats 0, 1 and 2):
///
/// | check | status |
/// |---|---|
/// | unknown command | 255, identifier 0 |
/// | malformed frame (item runs past the frame, unknown/duplicate item, bad item size) | 1, the frame's identifier if read, else 0 |
/// | no token, or an empty one | 2 |
/// | token not 32 bytes | 5 |
/// | no payload, or an empty one | 4 |
/// | payload over the limit | 7 |
/// | payload not JSON, or without an `aps` object | 1 |
/// | frame priority other than 10 or 5, or 10 for a `content-available`-only `aps` | 1 |
/// | token marked invalid (or unknown, with the `.invalid` policy) | 8 |
///
/// The topic is not carried by the binary interface (it comes from the
/// certificate), so statuses 3 and 6 never arise here. On the first error the
/// gateway writes the error-response packet with the notification's
/// identifier and status and closes; everything after it on the connection
/// is discarded. A simple-format (command 0) notification has no identifier:
/// for it the gateway closes without a word, as the seeds describe.
public final class GatewayConnection: Sendable {
    /// The connection's number in the simulator, from 1.
    public let id: Int
    /// The app this connection sends for.
    public let topic: String
    let simulator: APNsSimulator
    let state: Mutex<ConnectionState>

    /// How long this connection's TLS handshake takes (the slow-handshake fault), if it is slow.
    public let handshakeDelay: Duration?

    /// The gateway refused this connection (the outage fault): nothing can be written on it.
    public let isRefused: Bool

    init(simulator: APNsSimulator, id: Int, topic: String, stalled: Bool = false, handshakeDelay: Duration? = nil, refused: Bool = false) {
        self.simulator = simulator
        self.isRefused = refused
        self.id = id
        self.topic = topic
        self.handshakeDelay = handshakeDelay
        self.state = Mutex(ConnectionState(stalled: stalled))
    }

    struct ConnectionState: Sendable {
        var decoder = NotificationViewDecoder()
        /// The answer and close held back by the response-delay fault, and for how many more writes.
        var held: (response: [UInt8], writesLeft: Int)?
        var closed = false
        var lastGood: UInt32?
        var accepted = 0
        /// The stall fault: never reads again.
        var stalled = false
    }

    /// Whether the gateway stopped reading on this connection (the stall fault).
    public var isStalled: Bool { state.withLock { $0.stalled } }

    /// Whether the gateway has closed this connection (as the provider would see it).
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Notifications accepted on this connection.
    public var acceptedCount: Int { state.withLock { $0.accepted } }

    /// The provider wrote `bytes`.
    public func receive(_ bytes: [UInt8]) -> GatewayReply {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// The provider wrote `bytes`.
    public func receive(_ bytes: UnsafeRawBufferPointer) -> GatewayReply {
        let now = simulator.clock()
        let topic = self.topic
        let connectionID = id
        return simulator.state.withLock { sim in
            state.withLock { c in
                Self.receive(bytes, now: now, topic: topic, connection: connectionID, sim: &sim, c: &c)
            }
        }
    }

    /// The provider waited for an answer: anything the response-delay fault
    /// held back is delivered now.
    public func flush() -> GatewayReply {
        state.withLock { c in
            guard let held = c.held else { return GatewayReply(consumed: 0, closed: c.closed) }
            c.held = nil
            c.closed = true
            return GatewayReply(consumed: 0, response: held.response, closed: true)
        }
    }

    /// The provider closed its side. A notification cut short is dropped
    /// (counted as discarded bytes); any held answer is delivered.
    public func endOfInput() -> GatewayReply {
        let left = state.withLock { c in
            let n = c.decoder.bufferedByteCount
            c.decoder = NotificationViewDecoder()
            return n
        }
        if left > 0 { simulator.state.withLock { $0.counters.discardedBytes += left } }
        var reply = flush()
        reply.closed = true
        state.withLock { $0.closed = true }
        return reply
    }

    enum Stop: Equatable {
        case respond(Status, UInt32)
        case silentClose
    }

    static func receive(
        _ bytes: UnsafeRawBufferPointer, now: UInt32, topic: String, connection: Int,
        sim: inout SimulatorState, c: inout ConnectionState
    ) -> GatewayReply {
        let faults = sim.configuration.faults
        if c.closed {
            return GatewayReply(consumed: bytes.count, closed: true)
        }
        if c.stalled {
            return GatewayReply(consumed: 0, stalled: true)
        }
        if var held = c.held {
            // Closed already, but the provider does not know yet: what it writes is discarded.
            sim.counters.discardedBytes += bytes.count
            held.writesLeft -= 1
            if held.writesLeft > 0 {
                c.held = held
                return GatewayReply(consumed: bytes.count)
            }
            c.held = nil
            c.closed = true
            return GatewayReply(consumed: bytes.count, response: held.response, closed: true)
        }

        var readDelay: Duration?
        if sim.random.chance(faults.readDelayProbability) {
            readDelay = faults.readDelay
            sim.counters.readDelays += 1
        }
        var input = bytes
        if bytes.count > 1 && sim.random.chance(faults.partialWriteProbability) {
            let n = 1 + Int(sim.random.next() % UInt64(bytes.count - 1))
            input = UnsafeRawBufferPointer(rebasing: bytes[0..<n])
            sim.counters.partialWrites += 1
        }
        var cutMidFrame = false
        if input.count > 1 && sim.random.chance(faults.midFrameCloseProbability) {
            let n = 1 + Int(sim.random.next() % UInt64(input.count - 1))
            input = UnsafeRawBufferPointer(rebasing: input[0..<n])
            cutMidFrame = true
        }

        var stop: Stop?
        let limit = sim.configuration.payloadLimit
        let consumedBefore = c.decoder.consumedByteCount
        let bufferedBefore = c.decoder.bufferedByteCount
        do {
            try c.decoder.read(input) { view in
                var device: DeviceState?
                if let status = validate(view, limit: limit, sim: &sim, device: &device) {
                    sim.counters.rejected[status.byte, default: 0] += 1
                    stop = view.command == 0 ? .silentClose : .respond(status, view.identifier ?? 0)
                    return false
                }
                accept(view, device: device, now: now, topic: topic, connection: connection, sim: &sim)
                c.accepted += 1
                c.lastGood = view.identifier
                let n = sim.counters.accepted
                if (!sim.closeAfter.isEmpty && sim.closeAfter.remove(n) != nil) || sim.random.chance(faults.closeProbability) {
                    sim.counters.injectedCloses += 1
                    stop = .silentClose
                    return false
                }
                if (!sim.shutdownAfter.isEmpty && sim.shutdownAfter.remove(n) != nil) || sim.random.chance(faults.shutdownProbability) {
                    sim.counters.injectedShutdowns += 1
                    stop = view.command == 0 ? .silentClose : .respond(.shutdown, view.identifier ?? 0)
                    return false
                }
                return true
            }
        } catch {
            let status: Status = error.code == .unknownCommand ? .unknown : .processingError
            sim.counters.rejected[status.byte, default: 0] += 1
            stop = .respond(status, error.identifier ?? 0)
        }

        if stop == nil && cutMidFrame {
            sim.counters.midFrameCloses += 1
            stop = .silentClose
        }
        guard let stop else {
            return GatewayReply(consumed: input.count, readDelay: readDelay)
        }
        // Everything after the failing notification on this connection is discarded.
        let processed = c.decoder.consumedByteCount - consumedBefore - bufferedBefore
        sim.counters.discardedBytes += max(0, bytes.count - processed)
        c.decoder = NotificationViewDecoder()
        var response: [UInt8] = []
        if case .respond(let status, let identifier) = stop {
            if sim.random.chance(faults.lostAnswerProbability) {
                sim.counters.lostAnswers += 1
            } else {
                response = ErrorResponse(status: status, identifier: identifier).bytes
            }
        }
        if faults.responseDelayWrites > 0 {
            c.held = (response, faults.responseDelayWrites)
            return GatewayReply(consumed: bytes.count, readDelay: readDelay)
        }
        c.closed = true
        return GatewayReply(consumed: bytes.count, response: response, closed: true, readDelay: readDelay)
    }

    /// The gateway's checks, in order; `nil` when the notification is accepted.
    /// Sets `device` to the registry's entry for the token (`nil` if unknown).
    static func validate(_ v: NotificationView, limit: Int, sim: inout SimulatorState, device: inout DeviceState?) -> Status? {
        guard let token = v.token, token.count > 0 else { return .missingDeviceToken }
        guard token.count == DeviceToken.standardLength else { return .invalidTokenSize }
        guard let payload = v.payload, payload.count > 0 else { return .missingPayload }
        guard payload.count <= limit else { return .invalidPayloadSize }
        guard let shape = try? JSONParser.validate(payload), shape.hasAPSObject else { return .processingError }
        if let p = v.priority {
            guard p == 10 || p == 5 else { return .processingError }
            if p == 10 && PayloadInspector.isContentAvailableOnly(payload) { return .processingError }
        }
        // An empty registry (the embedded default) needs no lookup.
        device = sim.devices.isEmpty ? nil : sim.devices[DeviceToken(copying: token)]
        switch device {
        case .invalid?: return .invalidToken
        case nil where sim.rejectsUnknownTokens: return .invalidToken
        default: return nil
        }
    }

    /// Records an accepted notification and decides its fate.
    static func accept(_ v: NotificationView, device: DeviceState?, now: UInt32, topic: String, connection: Int, sim: inout SimulatorState) {
        let device = device ?? .online
        let sequence = sim.counters.accepted
        sim.counters.accepted += 1
        let fate: Delivery.Fate
        switch device {
        case .uninstalled:
            fate = .failed
            sim.counters.failedDeliveries += 1
            sim.addFeedback(DeviceToken(copying: v.token!), at: now)
        case .offline:
            if let e = v.expiry, e == 0 || e < now {
                fate = .notStored
                sim.counters.notStored += 1
            } else {
                fate = .stored
                sim.counters.stored += 1
            }
        default:
            fate = .delivered
            sim.counters.delivered += 1
        }
        guard sim.configuration.recordsDeliveries || fate == .stored else { return }
        let token = DeviceToken(copying: v.token!)
        let d = Delivery(
            sequence: sequence, token: token, payload: Array(v.payload!), identifier: v.identifier, expiry: v.expiry,
            priority: v.effectivePriority, format: v.format, topic: topic, connection: connection, time: now, fate: fate)
        if fate == .stored {
            if sim.stored.updateValue(d, forKey: StoreKey(topic: topic, token: token)) != nil { sim.counters.replaced += 1 }
        }
        guard sim.configuration.recordsDeliveries else { return }
        sim.deliveries.append(d)
        if fate == .delivered { sim.inboxes[token, default: []].append(d) }
    }
}
