import CHeraldOpenSSL
import COpenSSL
import HeraldCore
import NIOCore

/// TLS on OpenSSL for a SwiftNIO channel: ciphertext goes between the socket
/// and two memory BIOs, so OpenSSL never touches a socket and no thread ever
/// blocks; all work happens on the channel's event loop.
///
/// Put it first in the pipeline. Inbound it turns ciphertext into plaintext
/// `ByteBuffer`s; outbound it encrypts what is written (writes made before the
/// handshake completes are held, then sent). When the handshake completes it
/// fires ``TLSEvent/handshakeCompleted(protocolVersion:cipher:serverName:resumed:applicationProtocol:)``;
/// when it fails, or the peer breaks the protocol, it fires a ``TLSError``
/// through `errorCaught` and closes the channel. A client that requires ALPN
/// (``TLSConfiguration/requireApplicationProtocol``) and gets no protocol back
/// fails the handshake that way, after a close_notify, instead of firing the event.
public final class OpenSSLHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    enum State { case idle, handshaking, active, closed }

    let tls: TLSContext
    let ssl: OpaquePointer
    let wbio: OpaquePointer
    let rbio: OpaquePointer
    /// The host name we connect to (client side), for SNI, verification and messages.
    let serverName: String?
    var state: State = .idle
    var pendingWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    /// The buffer small writes are gathered in (``encryptPending(context:)``), kept between flushes.
    var staging: ByteBuffer?
    var flushPending = false
    var handshakeTimer: Scheduled<Void>?
    var readBuffer: ByteBuffer?

    /// - Parameters:
    ///   - context: the TLS context (client or server).
    ///   - serverName: client side: the host name for SNI and for checking the server's certificate.
    public init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        self.tls = context
        self.serverName = serverName
        self.ssl = try context.makeConnection(serverName: serverName)
        self.rbio = SSL_get_rbio(ssl)
        self.wbio = SSL_get_wbio(ssl)
    }

    deinit { SSL_free(ssl) }

    var isClient: Bool { tls.configuration.role == .client }

    // MARK: - Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startHandshake(context: context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        handshakeTimer?.cancel()
        failPendingWrites(ChannelError.ioOnClosedChannel)
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        startHandshake(context: context)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        handshakeTimer?.cancel()
        if state == .handshaking || state == .idle {
            state = .closed
            let who = isClient ? "the server \(serverName ?? "")" : "the client"
            let hint = isClient ? " (handshake refused: check the certificate \(tls.configuration.identity?.description ?? "(none)") and the host/port)" : ""
            context.fireErrorCaught(TLSError(.closedDuringHandshake, "\(who) closed the connection during the TLS handshake\(hint)",
                                             detail: OpenSSLErrors.text(OpenSSLErrors.drain())))
        }
        state = .closed
        failPendingWrites(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    func startHandshake(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        state = .handshaking
        let timeout = tls.configuration.handshakeTimeout
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        handshakeTimer = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            let (handler, context) = bound.value
            guard handler.state == .handshaking else { return }
            handler.fail(context: context, TLSError(.handshakeTimeout,
                "the TLS handshake with \(handler.peerName) did not finish within \(timeout)"))
        }
        doHandshake(context: context)
    }

    var peerName: String { isClient ? "the server \(serverName ?? "")" : "the client" }

    func doHandshake(context: ChannelHandlerContext) {
        OpenSSLErrors.clear()
        let rc = SSL_do_handshake(ssl)
        flushNetwork(context: context)
        if rc == 1 {
            let alpn = selectedApplicationProtocol
            if let refusal = missingApplicationProtocol(alpn) {
                OpenSSLErrors.clear()
                _ = SSL_shutdown(ssl)  // a close_notify, so the server sees us leave on purpose
                OpenSSLErrors.clear()
                fail(context: context, refusal)
                return
            }
            state = .active
            handshakeTimer?.cancel()
            handshakeTimer = nil
            let version = String(cString: SSL_get_version(ssl))
            let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? "?"
            let sni = cherald_get_servername(ssl).map { String(cString: $0) }
            let resumed = SSL_session_reused(ssl) == 1
            context.fireUserInboundEventTriggered(
                TLSEvent.handshakeCompleted(
                    protocolVersion: version, cipher: cipher, serverName: sni, resumed: resumed, applicationProtocol: alpn))
            if state == .active && !pendingWrites.isEmpty && flushPending { encryptPending(context: context) }
            if state == .active { readApplicationData(context: context) }
            return
        }
        let err = SSL_get_error(ssl, rc)
        if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { return }
        fail(context: context, describeFailure(during: true))
    }

    // MARK: - Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard state != .closed else { return }
        buffer.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = BIO_write(rbio, raw.baseAddress! + offset, Int32(min(raw.count - offset, Int(Int32.max))))
                if n <= 0 { break }
                offset += Int(n)
            }
        }
        switch state {
        case .idle:
            startHandshake(context: context)
        case .handshaking:
            doHandshake(context: context)
        case .active:
            readApplicationData(context: context)
        case .closed:
            break
        }
    }

    func readApplicationData(context: ChannelHandlerContext) {
        let chunk = 16_384
        var out = readBuffer ?? context.channel.allocator.buffer(capacity: 4 * chunk)
        readBuffer = nil
        out.clear()
        var closeNotify = false
        var failure: TLSError?
        // The error queue is per thread and an event loop serves many connections: start clean.
        OpenSSLErrors.clear()
        while true {
            var rc: Int32 = 0
            out.writeWithUnsafeMutableBytes(minimumWritableBytes: chunk) { ptr in
                rc = SSL_read(ssl, ptr.baseAddress, Int32(min(ptr.count, Int(Int32.max))))
                return rc > 0 ? Int(rc) : 0
            }
            if rc > 0 {
                if out.writableBytes < chunk && out.readableBytes >= 3 * chunk {
                    context.fireChannelRead(wrapInboundOut(out))
                    out = context.channel.allocator.buffer(capacity: 4 * chunk)
                    // The handlers above may have closed the channel in reaction.
                    if state == .closed { return }
                }
                continue
            }
            let err = SSL_get_error(ssl, rc)
            if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { break }
            if err == SSL_ERROR_ZERO_RETURN { closeNotify = true; break }
            failure = describeFailure(during: false)
            break
        }
        if out.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(out))
        } else {
            readBuffer = out
        }
        flushNetwork(context: context)
        if let failure {
            fail(context: context, failure)
        } else if closeNotify {
            // The peer finished cleanly: answer and close.
            closeConnection(context: context, promise: nil)
        }
    }

    // MARK: - Outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard state != .closed else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        pendingWrites.append((unwrapOutboundIn(data), promise))
    }

    public func flush(context: ChannelHandlerContext) {
        flushPending = true
        if state == .active { encryptPending(context: context) }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        closeConnection(context: context, promise: promise)
    }

    func closeConnection(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        if state == .active {
            if flushPending { encryptPending(context: context) }
            OpenSSLErrors.clear()
            _ = SSL_shutdown(ssl)  // queue our close_notify
            OpenSSLErrors.clear()
            flushNetwork(context: context)
        }
        handshakeTimer?.cancel()
        state = .closed
        failPendingWrites(ChannelError.ioOnClosedChannel)
        context.close(mode: .all, promise: promise)
    }

    /// Writes smaller than this are gathered into one buffer before OpenSSL sees them: each
    /// `SSL_write` makes a TLS record of its own (a header, a tag, an AEAD pass), and HTTP/2
    /// writes each frame apart, so a request's HEADERS and DATA were two records. A record
    /// holds at most 16 KiB of plaintext.
    static let coalescingLimit = 16 * 1024

    func encryptPending(context: ChannelHandlerContext) {
        flushPending = false
        guard !pendingWrites.isEmpty else { return }
        let writes = pendingWrites
        pendingWrites.removeAll(keepingCapacity: true)
        var promises: [EventLoopPromise<Void>] = []
        promises.reserveCapacity(writes.count)
        for (_, promise) in writes { if let promise { promises.append(promise) } }
        OpenSSLErrors.clear()
        var gathered = staging.take() ?? context.channel.allocator.buffer(capacity: Self.coalescingLimit)
        gathered.clear()
        var written = true
        for (buffer, _) in writes {
            if gathered.readableBytes + buffer.readableBytes > Self.coalescingLimit && gathered.readableBytes > 0 {
                written = encrypt(&gathered)
                if !written { break }
                gathered.clear()  // from the start again: the buffer stays at 16 KiB
            }
            if buffer.readableBytes >= Self.coalescingLimit {
                var b = buffer
                written = encrypt(&b)
                if !written { break }
            } else {
                gathered.writeImmutableBuffer(buffer)
            }
        }
        if written && gathered.readableBytes > 0 { written = encrypt(&gathered) }
        gathered.clear()
        staging = gathered
        if !written {
            let failure = describeFailure(during: false)
            for p in promises { p.fail(failure) }
            fail(context: context, failure)
            return
        }
        let combined: EventLoopPromise<Void>?
        switch promises.count {
        case 0: combined = nil
        case 1: combined = promises[0]
        default:
            let c = context.eventLoop.makePromise(of: Void.self)
            let all = promises
            c.futureResult.whenComplete { result in
                for p in all { p.completeWith(result) }
            }
            combined = c
        }
        if let out = takeNetworkBytes(context: context) {
            context.writeAndFlush(wrapOutboundOut(out), promise: combined)
        } else {
            combined?.succeed(())
        }
    }

    /// Hands all of `buffer` to OpenSSL (which may take it a part at a time); false when it refused.
    func encrypt(_ buffer: inout ByteBuffer) -> Bool {
        while buffer.readableBytes > 0 {
            let n = buffer.withUnsafeReadableBytes { raw in
                SSL_write(ssl, raw.baseAddress, Int32(min(raw.count, 1 << 30)))
            }
            if n <= 0 { return false }
            buffer.moveReaderIndex(forwardBy: Int(n))
        }
        return true
    }

    func takeNetworkBytes(context: ChannelHandlerContext) -> ByteBuffer? {
        let pending = cherald_bio_pending(wbio)
        guard pending > 0 else { return nil }
        var out = context.channel.allocator.buffer(capacity: pending)
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { ptr in
            let n = BIO_read(wbio, ptr.baseAddress, Int32(pending))
            return n > 0 ? Int(n) : 0
        }
        return out
    }

    func flushNetwork(context: ChannelHandlerContext) {
        if let out = takeNetworkBytes(context: context) {
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        }
    }

    func failPendingWrites(_ error: any Error) {
        guard !pendingWrites.isEmpty else { return }
        let writes = pendingWrites
        pendingWrites.removeAll()
        for (_, p) in writes { p?.fail(error) }
    }

    func fail(context: ChannelHandlerContext, _ error: TLSError) {
        guard state != .closed else { return }
        handshakeTimer?.cancel()
        state = .closed
        // Send the alert OpenSSL queued, if any, so the peer learns why.
        flushNetwork(context: context)
        failPendingWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    // MARK: - Errors in plain words

    /// Explains the failure OpenSSL just reported, from the verification result and the error queue.
    func describeFailure(during handshake: Bool) -> TLSError {
        let errors = OpenSSLErrors.drain()
        let detail = OpenSSLErrors.text(errors)
        let verify = SSL_get_verify_result(ssl)
        let ours = tls.configuration.identity?.description ?? "(no certificate configured)"
        let trust = tls.configuration.trust.description
        let host = serverName ?? "the server"
        let reasons = Set(errors.filter { $0.library == 20 /* ERR_LIB_SSL */ }.map(\.reason))

        if isClient && verify != Int(X509_V_OK) && reasons.contains(134 /* SSL_R_CERTIFICATE_VERIFY_FAILED */) {
            let why = String(cString: X509_verify_cert_error_string(verify))
            switch Int32(verify) {
            case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
                return TLSError(.hostNameMismatch, "the server's certificate is not valid for host name \(host) (refused)", detail: detail)
            case X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_CERT_NOT_YET_VALID:
                return TLSError(.expiredCertificate, "the certificate of \(host) has expired or is not valid yet (\(why))", detail: detail)
            case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
                 X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
                 X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
                return TLSError(.unknownCA, "the certificate of \(host) is signed by an unknown CA: not trusted by \(trust) (\(why))",
                                detail: detail)
            default:
                return TLSError(.handshakeRefused, "the certificate of \(host) failed verification: \(why)", detail: detail)
            }
        }
        if !isClient && verify != Int(X509_V_OK) && reasons.contains(134) {
            let why = String(cString: X509_verify_cert_error_string(verify))
            return TLSError(.unknownCA, "refused the client's certificate: \(why) (trusted: \(trust))", detail: detail)
        }
        if let refusal = describeApplicationProtocolFailure(reasons, detail: detail) { return refusal }
        if reasons.contains(1116 /* TLSV13_ALERT_CERTIFICATE_REQUIRED */) || reasons.contains(199 /* PEER_DID_NOT_RETURN_A_CERTIFICATE */) {
            return isClient
                ? TLSError(.missingPeerCertificate, "\(host) requires a client certificate and refused the connection without one (ours: \(ours))", detail: detail)
                : TLSError(.missingPeerCertificate, "refused a client that presented no certificate", detail: detail)
        }
        if reasons.contains(1048 /* TLSV1_ALERT_UNKNOWN_CA */) {
            return TLSError(.handshakeRefused, "\(peerName) refused the handshake: it does not know the CA that signed our certificate (\(ours))", detail: detail)
        }
        if reasons.contains(1045 /* SSLV3_ALERT_CERTIFICATE_EXPIRED */) {
            return TLSError(.expiredCertificate, "\(peerName) refused the handshake: it says our certificate (\(ours)) has expired", detail: detail)
        }
        if reasons.contains(1042 /* SSLV3_ALERT_BAD_CERTIFICATE */) || reasons.contains(1043) || reasons.contains(1046) {
            return TLSError(.handshakeRefused, "\(peerName) refused our certificate (\(ours))", detail: detail)
        }
        if reasons.contains(267 /* WRONG_VERSION_NUMBER */) || reasons.contains(156 /* HTTP_REQUEST */) {
            return TLSError(.handshakeRefused, "\(peerName) does not speak TLS (is this the right host and port?)", detail: detail)
        }
        if reasons.contains(294 /* UNEXPECTED_EOF_WHILE_READING */) {
            return TLSError(handshake ? .closedDuringHandshake : .protocolError,
                            "\(peerName) closed the connection without a TLS close_notify", detail: detail)
        }
        if handshake {
            return TLSError(.handshakeRefused, "the TLS handshake with \(peerName) failed", detail: detail)
        }
        return TLSError(.protocolError, "TLS error on the connection with \(peerName)", detail: detail)
    }
}
