import HeraldCore

/// How an ``HTTP2DeliveryMachine`` spreads requests, waits and retries.
public struct HTTP2DeliveryPolicy: Sendable, Hashable {
    /// Connections kept open to APNs.
    public var connections = 1
    /// A request unanswered this long is cancelled and sent again.
    public var requestTimeout: Duration = .seconds(20)
    /// A connection with nothing in flight this long gets a PING.
    public var idlePing: Duration = .seconds(60)
    /// A PING unanswered this long ends the connection.
    public var pingTimeout: Duration = .seconds(10)
    /// A connection not ready after this long is closed and tried again.
    public var connectTimeout: Duration = .seconds(15)
    /// After 429 `TooManyRequests`: how long before that request goes again.
    public var retryLaterDelay: Duration = .seconds(2)
    /// Sends of one request that APNs answers with a retry (500, 503,
    /// `Shutdown`, 429) or that end without an answer, before it fails.
    public var maxAttempts = 5
    /// Delays between connection attempts, and before resending after 500/503.
    public var backoff = BackoffPolicy()
    /// With no connection ready for this long, what waits fails (`gateway-unreachable`).
    public var maxOutage: Duration = .seconds(300)
    /// Before any connection has been ready: after this many connection
    /// attempts have failed, what waits fails at once (`gateway-unreachable`,
    /// naming the last error) instead of waiting out ``maxOutage``; later
    /// requests get one attempt each until a connection is ready. `nil`: hold
    /// through ``maxOutage``. (The binary interface's
    /// `DeliveryPolicy.firstConnectAttempts` is the same rule.)
    public var firstConnectAttempts: Int? = 5
    /// How long answers may come later than the quickest round-trip seen lately before the bulk
    /// lane holds fewer streams (``BulkStreamLimit``; a quarter of that round-trip if longer), so a
    /// fast-lane request does not queue behind a campaign in the connection. `nil`: the bulk lane
    /// may fill every stream.
    public var bulkQueueing: Duration? = .milliseconds(10)

    public init() {}
}

/// One notification on its way over HTTP/2.
///
/// What does not change on the way (the request, its token and identifiers) is kept in one
/// box, the rest inline: the machine moves an item from its queue to a stream, into the
/// stream's entry and out again, and with every field inline each move copied some 250 bytes
/// (`memmove` was 2% of a connection's event loop, `herald bench http2 --url`).
public struct HTTP2Item: Sendable, LaneCarrying {
    /// The fields an item keeps from its making to its outcome.
    final class Carried: Sendable {
        let line: Int?
        let id: UInt32?
        let token: DeviceToken
        let request: APNsRequest
        let topic: String?
        let app: String?

        init(line: Int?, id: UInt32?, token: DeviceToken, request: APNsRequest, topic: String?, app: String?) {
            self.line = line
            self.id = id
            self.token = token
            self.request = request
            self.topic = topic
            self.app = app
        }
    }

    public var sequence: UInt64
    let carried: Carried
    public var line: Int? { carried.line }
    public var id: UInt32? { carried.id }
    public var token: DeviceToken { carried.token }
    public var request: APNsRequest { carried.request }
    /// The request's `topic` as given (a 410 is filed under it in the token store).
    public var topic: String? { carried.topic }
    /// The app it is for (``OutcomeRecord/app``).
    public var app: String? { carried.app }
    /// The lane it waits in for a stream (``NotificationRequest/effectiveLane``).
    public var lane: Lane = .fast
    /// What the transport made of the request before handing it over, off its event loop (the
    /// HTTP/2 transport: the header block and body, ready to write), for its send to use; the
    /// machine keeps it with the item and never reads it (``HTTP2DeliveryMachine/withRequest(ofStream:_:)`` lends it).
    public var prepared: (any AnyObject & Sendable)?
    /// Sends that ended in a retry or without an answer.
    var attempts = 0
    /// Sent again after a send whose answer was lost: the device may have it twice.
    var resentUnanswered = false
    /// Not sent again before then.
    var notBefore: Duration = .zero

    public init(sequence: UInt64, line: Int?, id: UInt32?, token: DeviceToken, request: APNsRequest, topic: String? = nil, app: String? = nil,
                lane: Lane = .fast) {
        self.sequence = sequence
        self.lane = lane
        carried = Carried(line: line, id: id, token: token, request: request, topic: topic, app: app)
    }

    func record(_ outcome: Outcome, _ response: APNsResponse? = nil) -> OutcomeRecord {
        let c = carried
        var r = OutcomeRecord(
            sequence: sequence, line: c.line, id: c.id, token: c.token, outcome: outcome,
            apnsID: response?.apnsID ?? c.request.apnsID, apnsUniqueID: response?.uniqueID,
            apnsUnregisteredAt: response?.status == 410 ? response?.timestamp : nil, apnsChannelID: c.request.channelID, topic: c.topic, app: c.app)
        r.possibleDuplicate = resentUnanswered
        return r
    }
}

/// What an ``HTTP2DeliveryMachine`` has seen and done.
public struct HTTP2Statistics: Sendable, Hashable {
    public var connections = 0
    public var connectFailures = 0
    public var streams = 0
    public var goAways = 0
    public var pings = 0
    public var timeouts = 0
    /// Sent again after an answer that asks for it (429, 500, 503, `Shutdown`, expired token…).
    public var retried = 0
    /// Sent again after a stream or connection ended with no answer, once APNs may
    /// already have had it: the only possible duplicates.
    public var resentUnanswered = 0
    /// Sent again after APNs said it did not process it (GOAWAY above its stream, refused stream).
    public var resentUnprocessed = 0
    /// The last GOAWAY's reason, if any.
    public var lastGoAwayReason: String?

    public init() {}
}

extension HTTP2Statistics {
    /// Adds another machine's counts (a transport with a machine an event loop).
    public mutating func add(_ o: HTTP2Statistics) {
        connections += o.connections
        connectFailures += o.connectFailures
        streams += o.streams
        goAways += o.goAways
        pings += o.pings
        timeouts += o.timeouts
        retried += o.retried
        resentUnanswered += o.resentUnanswered
        resentUnprocessed += o.resentUnprocessed
        lastGoAwayReason = o.lastGoAwayReason ?? lastGoAwayReason
    }

    /// The counters an HTTP/2 transport reports (``TransportReporting``); `handshakes`
    /// (TLS) and `provider_tokens_signed` are the transport's own, before and after these.
    public var counters: [(name: String, value: Int)] {
        [
            ("connections", connections), ("connect_failures", connectFailures), ("streams", streams), ("goaways", goAways),
            ("timeouts", timeouts), ("retried", retried), ("resent", resentUnanswered + resentUnprocessed),
            ("possible_duplicates", resentUnanswered),
        ]
    }
}
