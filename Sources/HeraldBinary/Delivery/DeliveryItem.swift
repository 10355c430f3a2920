import HeraldCore

/// A notification on its way through a ``DeliveryMachine``: its frame, who
/// asked for it, and what the machine has learnt about it so far.
public struct DeliveryItem: Sendable {
    public var sequence: UInt64
    public var line: Int?
    public var id: UInt32?
    public var token: DeviceToken
    /// The encoded notification; its identifier is patched in per connection.
    public var frame: [UInt8]
    /// Where the 4-byte identifier sits in `frame`; `nil` for the simple format.
    public var identifierOffset: Int?
    /// The confirmation probe (never reported).
    var isProbe = false
    /// Connections that closed with no answer while this was alone in flight.
    var aloneCloses = 0
    /// Written again after a connection closed with no answer: the device may have it twice.
    var resentAfterSilentClose = false
    /// The machine's confirmation count at its first such close: it is only
    /// blamed once the gateway has confirmed something else since (else the
    /// gateway, not the notification, is what closes).
    var confirmationsAtFirstAloneClose: Int?

    public init(sequence: UInt64, line: Int?, id: UInt32?, token: DeviceToken, frame: [UInt8], identifierOffset: Int?) {
        self.sequence = sequence
        self.line = line
        self.id = id
        self.token = token
        self.frame = frame
        self.identifierOffset = identifierOffset
    }

    /// The item for a framed envelope; `nil` when the envelope has no frame.
    /// Borrowed: an envelope passed owned was copied whole (some twenty
    /// references retained and released) to read five fields.
    public init?(_ envelope: borrowing Envelope) {
        guard let frame = envelope.frame else { return nil }
        self.init(sequence: envelope.sequence, line: envelope.line, id: envelope.request.id, token: envelope.request.token,
                  frame: frame.bytes, identifierOffset: frame.identifierOffset)
    }

    /// Each framed envelope of `batch` as an item, handed to `take` in order; the
    /// envelopes with no frame come back as records failed with `reason`
    /// (`internalFailure`). In place: `for e in batch` copied each envelope.
    public static func items(
        of batch: [Envelope], unframed reason: @autoclosure () -> String, _ take: (consuming DeliveryItem) -> Void
    ) -> [OutcomeRecord] {
        var unframed: [OutcomeRecord] = []
        for i in batch.indices {
            if let item = DeliveryItem(batch[i]) {
                take(item)
            } else {
                unframed.append(batch[i].record(.failed(OutcomeReason(.internalFailure, reason()))))
            }
        }
        return unframed
    }

    public func record(_ outcome: Outcome) -> OutcomeRecord {
        var r = OutcomeRecord(sequence: sequence, line: line, id: id, token: token, outcome: outcome)
        r.possibleDuplicate = resentAfterSilentClose
        return r
    }

    /// The probe: enhanced format, an all-zero token and no payload. Every
    /// gateway rejects it (status 4, missing payload), and its error response
    /// proves that every notification written before it on the connection was taken.
    static let probe: DeliveryItem = {
        var bytes: [UInt8] = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32]
        bytes += [UInt8](repeating: 0, count: 32)
        bytes += [0, 0]
        var p = DeliveryItem(sequence: .max, line: nil, id: nil, token: DeviceToken(bytes: [UInt8](repeating: 0, count: 32)),
                             frame: bytes, identifierOffset: 1)
        p.isProbe = true
        return p
    }()
}

/// Where a ``DeliveryMachine`` writes frames: `WriteBuffer` in memory, a
/// SwiftNIO `ByteBuffer` on a socket.
public protocol FrameSink {
    /// Bytes written so far.
    var count: Int { get }
    /// Appends `frame`, with `identifier` stored big-endian at `identifierOffset` (if any).
    mutating func appendFrame(_ frame: [UInt8], identifier: UInt32, at identifierOffset: Int?)
}

extension WriteBuffer: FrameSink {
    public mutating func appendFrame(_ frame: [UInt8], identifier: UInt32, at identifierOffset: Int?) {
        let start = count
        append(frame)
        if let identifierOffset { setUInt32(identifier, at: start + identifierOffset) }
    }
}

/// What a ``DeliveryMachine`` did, for summaries, logs and tests.
public struct DeliveryStatistics: Sendable, Hashable {
    /// Connections opened (asked for).
    public var connections = 0
    /// Connections that completed their handshake.
    public var handshakes = 0
    /// Connection attempts that failed before the handshake completed.
    public var connectFailures = 0
    /// Writes (each carrying many frames).
    public var writes = 0
    /// Error responses received (including status 10 and probe answers).
    public var errorResponses = 0
    /// Status 10 (shutdown) responses.
    public var shutdowns = 0
    /// Probes written.
    public var probes = 0
    /// Connections that closed with notifications in flight and no answer.
    public var silentCloses = 0
    /// Connections given up because a probe went unanswered (the gateway stopped reading).
    public var stalls = 0
    /// Error responses naming an identifier not in flight.
    public var unmatchedResponses = 0
    /// Notifications written again on a new connection, for any reason.
    public var resent = 0
    /// Of those, written again after a close with no answer: the only
    /// notifications that may reach a device twice (each counted once per
    /// such resend). This is the count of possible duplicates.
    public var resentAfterSilentClose = 0

    public init() {}

    /// Adds another machine's counters (a transport with several connections).
    public mutating func add(_ o: DeliveryStatistics) {
        connections += o.connections; handshakes += o.handshakes; connectFailures += o.connectFailures
        writes += o.writes; errorResponses += o.errorResponses; shutdowns += o.shutdowns; probes += o.probes
        silentCloses += o.silentCloses; stalls += o.stalls; unmatchedResponses += o.unmatchedResponses
        resent += o.resent; resentAfterSilentClose += o.resentAfterSilentClose
    }
}

extension DeliveryStatistics {
    /// The counters a binary-interface transport reports (``TransportReporting``).
    public var counters: [(name: String, value: Int)] {
        [
            ("connections", connections), ("handshakes", handshakes), ("connect_failures", connectFailures),
            ("error_responses", errorResponses), ("shutdowns", shutdowns), ("silent_closes", silentCloses), ("stalls", stalls),
            ("resent", resent), ("possible_duplicates", resentAfterSilentClose),
        ]
    }
}
