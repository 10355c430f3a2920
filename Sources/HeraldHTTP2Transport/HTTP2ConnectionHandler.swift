import HeraldHTTP2
import HeraldJSON
import HeraldOpenSSL
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The provider's end of one HTTP/2 connection, after `NIOHTTP2Handler`:
/// opens a stream per request (HEADERS, then DATA ending the stream), reads
/// each answer (HEADERS with `:status`, a DATA body for errors), and reports
/// answers, resets, SETTINGS, GOAWAY, PING acknowledgements and the close to
/// the driver, in order.
///
/// A stream that ends without an answer is reported once the read that ended
/// it is over, so that a GOAWAY in the same read decides first whether APNs
/// processed it (above the GOAWAY's last stream id: never seen, resent without
/// counting as a possible duplicate).
///
/// `@unchecked Sendable`: created on the driver's event loop, which is also its
/// channel's; all its state is read and written there only.
final class HTTP2ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let driver: HTTP2Driver
    let connection: Int
    let authority: String
    var context: ChannelHandlerContext?
    /// Set by the driver while this connection waits for its flush.
    var queuedFlush = false
    let window = ConnectionWindow()

    struct Pending {
        var stream: Int
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []
        var reset: HTTP2ErrorCode?
    }

    var nextStreamID: Int32 = 1
    var pending: [HTTP2StreamID: Pending] = [:]
    var sawSettings = false
    var goAwayLastStreamID: HTTP2StreamID?
    /// Streams that ended without an answer, reported after the current read.
    var endedUnanswered: [(HTTP2StreamID, HTTP2ErrorCode?)] = []
    var reportScheduled = false
    var pingPayload: UInt64 = 0

    /// Answer bodies are a few dozen bytes of JSON; more than this is not APNs.
    static let maxBody = 16 << 10

    init(driver: HTTP2Driver, connection: Int, authority: String) {
        self.driver = driver
        self.connection = connection
        self.authority = authority
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    // MARK: - From the driver

    /// Opens a stream for `request`; false when the connection cannot take it.
    func send(stream: Int, request: APNsRequest, authorization: String?) -> Bool {
        guard let context, context.channel.isActive, goAwayLastStreamID == nil, nextStreamID < Int32.max - 2 else { return false }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        let headers = HPACKHeaders(request: request, authority: authority, authorization: authorization)
        pending[id] = Pending(stream: stream)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: request.body.isEmpty)))), promise: nil)
        if !request.body.isEmpty {
            // No promise: a write that fails ends its stream (a `StreamClosedEvent`) or the
            // connection (`channelInactive`), and either reports the stream; a promise a
            // request (and its callback) only said it again.
            let body = context.channel.allocator.buffer(bytes: request.body)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
        return true
    }

    /// Resets the stream the machine gave up on (its answer is no longer wanted).
    /// Rare (a request past its deadline), so found by a search: no second table kept for it on every request.
    func cancel(stream: Int) {
        guard let id = pending.first(where: { $0.value.stream == stream })?.key else { return }
        pending[id] = nil
        context?.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    func ping() {
        guard let context else { return }
        pingPayload &+= 1
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: pingPayload), ack: false))), promise: nil)
    }

    func flush() {
        queuedFlush = false
        context?.flush()
    }

    func close() { context?.close(promise: nil) }

    // MARK: - From the channel

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Several events a request (stream created, windows moved, stream closed): told apart by
        // their type, compared once, not by a dynamic cast tried against each in turn.
        let type = ObjectIdentifier(Swift.type(of: event))
        if type == Self.streamClosed {
            let closed = event as! StreamClosedEvent
            if pending[closed.streamID] != nil { streamEnded(closed.streamID, closed.reason) }
        } else if type == Self.windowUpdated {
            if let update = window.update(after: event as! NIOHTTP2WindowUpdatedEvent) {
                context.writeAndFlush(wrapOutboundOut(update), promise: nil)
            }
        } else if type == Self.tlsEvent, case .handshakeCompleted(let version, _, _, let resumed, _) = event as! TLSEvent {
            driver.handshakeCompleted(connection, protocolVersion: version, resumed: resumed)
        }
        context.fireUserInboundEventTriggered(event)
    }

    static let streamClosed = ObjectIdentifier(StreamClosedEvent.self)
    static let windowUpdated = ObjectIdentifier(NIOHTTP2WindowUpdatedEvent.self)
    static let tlsEvent = ObjectIdentifier(TLSEvent.self)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        // The stream's entry found once and changed where it lies; an answer that ends the stream takes it out by its index.
        case .headers(let h):
            guard let i = pending.index(forKey: frame.streamID) else { return }
            if pending.values[i].status == nil {
                for (name, value, _) in h.headers {
                    if name == ":status" {
                        pending.values[i].status = Int(value)
                    } else if name.hasPrefix("apns-") {
                        pending.values[i].headers.append((name, value))
                    }
                }
            }
            if h.endStream { answer(pending.remove(at: i).value) }
        case .data(let d):
            guard let i = pending.index(forKey: frame.streamID) else { return }
            if case .byteBuffer(let b) = d.data, pending.values[i].body.count + b.readableBytes <= Self.maxBody {
                pending.values[i].body += b.readableBytesView
            }
            if d.endStream { answer(pending.remove(at: i).value) }
        case .rstStream(let code):
            pending[frame.streamID]?.reset = code
        case .settings(.settings(let settings)):
            let limit = settings.last { $0.parameter == .maxConcurrentStreams }.map(\.value)
            let first = !sawSettings
            sawSettings = true
            driver.settings(connection, maxStreams: limit, first: first)
        case .ping(_, ack: true):
            driver.pong(connection)
        case .goAway(let last, let code, let debugData):
            goAwayLastStreamID = last
            driver.goAway(connection, reason: Self.reason(debugData) ?? (code == .noError ? nil : "\(code)"))
            // Streams above `last` were never processed: APNs will not answer them.
            for id in pending.keys.filter({ $0 > last }).sorted() { streamEnded(id, .refusedStream) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reportEnded()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream error ends that stream only (its StreamClosedEvent reports it); the connection carries on.
        if error is NIOHTTP2Errors.StreamError { return }
        // After a GOAWAY, swift-nio-http2 takes a late RST_STREAM (nginx resets each stream whose
        // body it did not read) on a connection whose last stream closed as an error: a normal end.
        if goAwayLastStreamID == nil || !(error is NIOHTTP2Errors.IOOnClosedConnection) { driver.failed(connection, error) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        reportEnded()
        driver.closed(connection, handler: self)
        context.fireChannelInactive()
    }

    // MARK: - Answers

    /// `p`, taken out of `pending`, ended with its answer.
    func answer(_ p: Pending) {
        guard let status = p.status else {
            driver.streamFailed(p.stream, unprocessed: false, reason: "an answer without :status")
            return
        }
        driver.answered(p.stream, APNsResponse(status: status, headers: p.headers, body: p.body))
    }

    /// Notes a stream that ended without an answer; reported after the current read.
    func streamEnded(_ id: HTTP2StreamID, _ reason: HTTP2ErrorCode?) {
        guard pending[id] != nil else { return }
        endedUnanswered.append((id, reason))
        guard !reportScheduled else { return }
        reportScheduled = true
        driver.loop.execute { self.reportEnded() }
    }

    func reportEnded() {
        reportScheduled = false
        guard !endedUnanswered.isEmpty else { return }
        let ended = endedUnanswered
        endedUnanswered.removeAll()
        for (id, reason) in ended {
            guard let p = pending.removeValue(forKey: id) else { continue }
            let code = p.reset ?? reason
            let unprocessed = code == .refusedStream || goAwayLastStreamID.map { id > $0 } == true
            let why = unprocessed ? "not processed (\(code.map { "\($0)" } ?? "GOAWAY"))" : "stream ended without an answer (\(code.map { "\($0)" } ?? "closed"))"
            driver.streamFailed(p.stream, unprocessed: unprocessed, reason: why)
        }
    }

    /// A GOAWAY's debug data: APNs sends `{"reason":"…"}`.
    static func reason(_ data: ByteBuffer?) -> String? {
        guard let data, data.readableBytes > 0 else { return nil }
        let bytes = Array(data.readableBytesView)
        if let object = (try? JSONParser.parse(bytes))?.objectValue, let reason = object["reason"]?.stringValue { return reason }
        return String(decoding: bytes.prefix(200), as: UTF8.self)
    }
}

extension HPACKHeaders {
    /// A request's header block as the transport sends it.
    package init(request: APNsRequest, authority: String, authorization: String?) {
        self.init()
        reserveCapacity(6 + request.headers.count)
        add(name: ":method", value: request.method)
        add(name: ":scheme", value: "https")
        // A device's path is unique to its token, like `apns-id`: indexing a unique value would only
        // push the headers every request repeats out of the HPACK table (and lengthen the encoder's search).
        add(name: ":path", value: request.path, indexing: .nonIndexable)
        add(name: ":authority", value: authority)
        if let authorization { add(name: "authorization", value: authorization) }
        for h in request.headers {
            add(name: h.name, value: h.value, indexing: h.name == "apns-id" || h.name == "apns-request-id" ? .nonIndexable : .indexable)
        }
    }
}

extension NIOHTTP2Handler.ConnectionConfiguration {
    /// The connection settings of the transport's `NIOHTTP2Handler`.
    package static func apnsClient(initialWindowSize: Int) -> Self {
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .initialWindowSize, value: initialWindowSize),
        ]
        // Our headers are built from checked requests, and of APNs' answers only `:status`
        // and `apns-*` are read: validating every header block both ways costs a tenth of the time.
        connection.headerBlockValidation = .disabled
        connection.contentLengthValidation = .disabled
        return connection
    }
}
