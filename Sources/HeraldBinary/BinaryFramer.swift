import HeraldCore

/// The frame stage for the binary interface: encodes each envelope's token,
/// payload, identifier, expiry and priority in one of the three formats.
///
/// The identifier written is the request's `id`, or the low 32 bits of the
/// envelope's sequence number; transports give each frame its own
/// per-connection identifier in place through ``Frame/identifierOffset``
/// (``Frame/setIdentifier(_:)``). The expiry is the request's (0, "do not
/// store", when absent); the priority is the request's or, when absent, 10
/// (5 for a `content-available`-only payload, which APNs refuses at 10). The
/// simple and enhanced formats cannot carry a priority: a request asking for 5
/// is encoded without it (they imply 10).
public struct BinaryFramer: Framer {
    public let format: NotificationFormat
    public init(format: NotificationFormat = .frame) { self.format = format }

    /// The stage's way: the envelope read where it lies (``frame(_:)`` takes a copy of it).
    public func frame(into envelope: inout Envelope) throws(StageFailure) {
        let frame = try encode(&envelope)
        envelope.frame = frame
    }

    public func frame(_ envelope: Envelope) throws(StageFailure) -> Frame {
        var envelope = envelope
        return try encode(&envelope)
    }

    /// `inout` only to be read in place: an envelope lent otherwise was first copied whole.
    private func encode(_ envelope: inout Envelope) throws(StageFailure) -> Frame {
        // The request read in place: a copy of it cost a retain and a release of each of its references.
        if envelope.request.isBroadcast {
            throw StageFailure("a broadcast push (\"channel-id\") needs an http2 transport: the binary interface sends to devices only")
        }
        guard envelope.request.token.count > 0 else { throw StageFailure("missing device token") }
        // The gateway answers any other size with status 5 and a closed connection: drop it here instead.
        guard envelope.request.token.count == DeviceToken.standardLength else {
            throw StageFailure("device token of \(envelope.request.token.count) bytes; the binary interface takes \(DeviceToken.standardLength)")
        }
        let id = envelope.request.id ?? UInt32(truncatingIfNeeded: envelope.sequence)
        let priority: UInt8
        if let p = envelope.request.priority {
            priority = p.rawValue
        } else {
            // Left open: 10, except for a background-only update, for which APNs refuses 10.
            priority = envelope.payload.withUnsafeBytes { PayloadInspector.isContentAvailableOnly($0) } ? 5 : 10
        }
        do {
            return try FrameEncoder.frame(
                format, token: envelope.request.token, payload: envelope.payload,
                identifier: id, expiry: envelope.request.expiry ?? 0, priority: priority)
        } catch {
            throw StageFailure(error.message)
        }
    }
}
