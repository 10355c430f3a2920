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
    /// Below `NIOHTTP2Handler`: holds the flushes of a step's streams until the step's end.
    let batcher = FlushBatcher()

    struct Pending {
        var stream: Int
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []
        var reset: HTTP2ErrorCode?
    }

    var nextStreamID: Int32 = 1
    /// Open streams by id (``key(_:)``: ids are odd and given out in order).
    var pending = StreamTable<Pending>()
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

    /// A stream's table key: client stream ids are odd, given out in order.
    static func key(_ id: HTTP2StreamID) -> Int { Int(Int32(id)) >> 1 }
    static func id(_ key: Int) -> HTTP2StreamID { HTTP2StreamID(Int32(key) << 1 | 1) }

    /// What opens a stream for a request: its header block and its body (nil without one).
    typealias Opening = (headers: HPACKHeaders, body: ByteBuffer?)

    /// Whether a stream may be opened now.
    var canOpen: Bool {
        guard let context, context.channel.isActive, goAwayLastStreamID == nil, nextStreamID < Int32.max - 2 else { return false }
        return true
    }

    /// What opens a stream for `request`: only reads it (the driver lends it from the machine) and writes nothing.
    /// A request's first send takes the header block and body its ``PreparedRequest`` holds (built by
    /// the sending task, off this loop); a send again builds them here.
    func opening(_ request: borrowing APNsRequest, prepared: PreparedRequest?, authorization: String?) -> Opening {
        let parts = prepared.flatMap { $0.headers == nil ? nil : $0 } ?? PreparedRequest(request, authority: authority, allocator: Self.allocator)
        // Taken out, so that adding the `authorization` writes into the room left for it, in place.
        var headers = parts.headers.take()!
        if let authorization { headers.add(name: "authorization", value: authorization) }
        return (headers, parts.body.take())
    }

    /// For the parts of a request sent again (its first send took what the sending task prepared).
    static let allocator = ByteBufferAllocator()

    /// Opens a stream with `headers` and `body` (an ``Opening``) for the machine's `stream` (the
    /// caller has seen ``canOpen``); false when the connection is gone.
    func open(stream: Int, headers: consuming HPACKHeaders, body: consuming ByteBuffer?) -> Bool {
        guard let context else { return false }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        pending.insert(Pending(stream: stream), at: Self.key(id))
        // The frames made here with their stream id, the header block and body moved into them
        // (frames made before and given their id here were copied, each reference retained).
        // No promise: a write that fails ends its stream (a `StreamClosedEvent`) or the
        // connection (`channelInactive`), and either reports the stream; a promise a
        // request (and its callback) only said it again.
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body == nil)))), promise: nil)
        if let body {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
            // Flushed into `NIOHTTP2Handler` now, so that the DATA leaves behind its HEADERS in the
            // order written: the library sends the DATA frames of one flush in a `Set`'s order, and
            // a server answers as bodies complete, so the streams of a flush closed in no order, and
            // every close out of order moved the later streams of the library's stream maps (a third
            // of the loop at 1,000 streams). The batcher keeps the socket's flush for the step's end.
            batcher.holding = true
            context.flush()
            batcher.holding = false
        }
        return true
    }

    /// Resets the stream the machine gave up on (its answer is no longer wanted).
    /// Rare (a request past its deadline), so found by a search: no second table kept for it on every request.
    func cancel(stream: Int) {
        guard let key = pending.keys.first(where: { pending.withValue($0) { $0.stream == stream } == true }) else { return }
        _ = pending.remove(key)
        context?.write(wrapOutboundOut(HTTP2Frame(streamID: Self.id(key), payload: .rstStream(.cancel))), promise: nil)
    }

    func ping() {
        guard let context else { return }
        pingPayload &+= 1
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: pingPayload), ack: false))), promise: nil)
    }

    /// The step's end: what the streams written since wrote goes to the socket, in one flush
    /// (`NIOHTTP2Handler`'s own, when it wrote something since, else the one the batcher kept).
    func flush() {
        queuedFlush = false
        context?.flush()
        batcher.release()
    }

    func close() { context?.close(promise: nil) }

    // MARK: - From the channel

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Several events a request (stream created, windows moved, stream closed): told apart by
        // their type, compared once, not by a dynamic cast tried against each in turn.
        let type = ObjectIdentifier(Swift.type(of: event))
        if type == Self.streamClosed {
            let closed = Self.unbox(event, as: StreamClosedEvent.self)
            if pending.contains(Self.key(closed.streamID)) { streamEnded(closed.streamID, closed.reason) }
        } else if type == Self.windowUpdated {
            if let update = window.update(after: Self.unbox(event, as: NIOHTTP2WindowUpdatedEvent.self)) {
                context.writeAndFlush(wrapOutboundOut(update), promise: nil)
            }
        } else if type == Self.tlsEvent, case .handshakeCompleted(let version, _, _, let resumed, _) = event as! TLSEvent {
            driver.handshakeCompleted(connection, protocolVersion: version, resumed: resumed)
        }
        // Not passed on: this is the pipeline's last handler, and its tail discards events (several a request).
    }

    /// `event`, whose type was seen to be `T`, as a `T`: a dynamic cast (`as!`) searched the
    /// conversions each time (several events a request), opening the box is a read.
    @inline(__always)
    static func unbox<T>(_ event: Any, as type: T.Type) -> T {
        func open<E>(_ e: E) -> T {
            precondition(E.self == T.self)
            return unsafeBitCast(e, to: T.self)
        }
        return open(event)
    }

    static let streamClosed = ObjectIdentifier(StreamClosedEvent.self)
    static let windowUpdated = ObjectIdentifier(NIOHTTP2WindowUpdatedEvent.self)
    static let tlsEvent = ObjectIdentifier(TLSEvent.self)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        // The stream's entry changed where it lies; an answer that ends the stream takes it out.
        case .headers(let h):
            let key = Self.key(frame.streamID)
            guard pending.update(key, { (p: inout Pending) -> Void in
                guard p.status == nil else { return }
                // Names are lowercase in HTTP/2 (the library refuses others); their first byte
                // tells most apart before a comparison of the whole name.
                for (name, value, _) in h.headers {
                    switch name.utf8.first {
                    case UInt8(ascii: ":"): if name == ":status" { p.status = Self.status(value) }
                    case UInt8(ascii: "a"): if name.hasPrefix("apns-") { p.headers.append((name, value)) }
                    default: break
                    }
                }
            }) != nil else { return }
            if h.endStream, let p = pending.remove(key) { answer(p) }
        case .data(let d):
            let key = Self.key(frame.streamID)
            guard pending.update(key, { (p: inout Pending) -> Void in
                if case .byteBuffer(let b) = d.data, p.body.count + b.readableBytes <= Self.maxBody { p.body += b.readableBytesView }
            }) != nil else { return }
            if d.endStream, let p = pending.remove(key) { answer(p) }
        case .rstStream(let code):
            pending.update(Self.key(frame.streamID)) { $0.reset = code }
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
            for key in pending.keys where Self.id(key) > last { streamEnded(Self.id(key), .refusedStream) }
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
        guard pending.contains(Self.key(id)) else { return }
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
            guard let p = pending.remove(Self.key(id)) else { continue }
            let code = p.reset ?? reason
            let unprocessed = code == .refusedStream || goAwayLastStreamID.map { id > $0 } == true
            let why = unprocessed ? "not processed (\(code.map { "\($0)" } ?? "GOAWAY"))" : "stream ended without an answer (\(code.map { "\($0)" } ?? "closed"))"
            driver.streamFailed(p.stream, unprocessed: unprocessed, reason: why)
        }
    }

    /// A `:status` value: three digits (RFC 9110), nil otherwise.
    static func status(_ value: String) -> Int? {
        var status = 0
        var digits = 0
        for c in value.utf8 {
            guard c &- UInt8(ascii: "0") < 10, digits < 3 else { return nil }
            status = status * 10 + Int(c &- UInt8(ascii: "0"))
            digits += 1
        }
        return digits == 3 ? status : nil
    }

    /// A GOAWAY's debug data: APNs sends `{"reason":"…"}`.
    static func reason(_ data: ByteBuffer?) -> String? {
        guard let data, data.readableBytes > 0 else { return nil }
        let bytes = Array(data.readableBytesView)
        if let object = (try? JSONParser.parse(bytes))?.objectValue, let reason = object["reason"]?.stringValue { return reason }
        return String(decoding: bytes.prefix(200), as: UTF8.self)
    }
}

/// What the sending task makes of a request before handing it to the event loop
/// (``HTTP2Item/prepared``): its header block, without `authorization` (the delivery machine
/// chooses the token when it opens the stream) but with room for it, and its body in a buffer.
/// The request's first send takes both (``HTTP2ConnectionHandler/opening(_:prepared:authorization:)``);
/// a send again builds them anew.
///
/// `@unchecked Sendable`: written by the sending task before the item is handed over, then read
/// and emptied only on the event loop of the driver it was handed to.
final class PreparedRequest: @unchecked Sendable {
    var headers: HPACKHeaders?
    var body: ByteBuffer?

    init(_ request: borrowing APNsRequest, authority: String, allocator: ByteBufferAllocator) {
        headers = HPACKHeaders(request: request, authority: authority)
        body = request.body.isEmpty ? nil : allocator.buffer(bytes: request.body)
    }

    /// The item's prepared request, if the HTTP/2 transport made it.
    static func of(_ prepared: (any AnyObject & Sendable)?) -> PreparedRequest? { prepared as? PreparedRequest }
}

extension HPACKHeaders {
    /// A request's header block as the transport sends it, but for the `authorization` the
    /// delivery machine chooses when it opens the stream: room is left for it, last.
    package init(request: borrowing APNsRequest, authority: String) {
        self.init()
        reserveCapacity(5 + request.headers.count + 1)
        add(name: ":method", value: request.method)
        add(name: ":scheme", value: "https")
        // A device's path is unique to its token, like `apns-id`: indexing a unique value would only
        // push the headers every request repeats out of the HPACK table (and lengthen the encoder's search).
        add(name: ":path", value: request.path, indexing: .nonIndexable)
        add(name: ":authority", value: authority)
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

/// Between TLS and `NIOHTTP2Handler`: while `holding`, a flush from above is kept, not passed
/// on; ``release()`` passes the kept one. The connection handler flushes each stream into the
/// HTTP/2 handler as it writes it (which orders the DATA frames) and the socket once a step.
/// Flushes at any other time (the library's own frames, PINGs, window updates) pass at once.
final class FlushBatcher: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = IOData  // what `NIOHTTP2Handler` writes; passed on as it is
    var holding = false
    var held = false
    var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func flush(context: ChannelHandlerContext) {
        if holding {
            held = true
        } else {
            held = false
            context.flush()
        }
    }

    /// Passes the flush kept while holding, if any.
    func release() {
        guard held else { return }
        held = false
        context?.flush()
    }
}
