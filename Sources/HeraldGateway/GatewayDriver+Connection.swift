import HeraldBinary
import HeraldCore
import HeraldOpenSSL
import NIOCore
import NIOPosix

extension GatewayDriver {
    /// Opens a spare connection while one is in use and more is queued: the
    /// binary interface ends a connection at every error response, and a
    /// handshake costs more than a hundred notifications.
    func openSpareIfUseful() {
        while spares.count < configuration.spareConnections, connection != nil, machine.isReady, machine.queuedCount > 0 {
            let handler = GatewayChannelHandler(driver: self, connection: GatewayChannelHandler.spare)
            spares.append(Spare(channel: nil, handler: handler))
            trace("open a spare")
            open(handler).whenComplete { result in
                let k = self.spares.firstIndex { $0.handler === handler }
                switch result {
                case .success(let channel):
                    if let k { self.spares[k].channel = channel } else { channel.close(promise: nil) }
                case .failure:
                    if let k { self.spares.remove(at: k) }
                }
            }
        }
    }

    /// Closes the spares (nothing left to send).
    func closeSpares() {
        guard !spares.isEmpty else { return }
        trace("close \(spares.count) spare(s)")
        let closing = spares
        spares.removeAll()
        for s in closing { s.channel?.close(promise: nil) }
    }

    /// A spare's TLS session is up.
    func spareReady(_ handler: GatewayChannelHandler, resumed: Bool) {
        guard let k = spares.firstIndex(where: { $0.handler === handler }) else { return }
        spares[k].ready = true
        spares[k].resumed = resumed
    }

    /// A spare closed before it was needed (a gateway's idle timeout): forget it.
    func spareClosed(_ handler: GatewayChannelHandler) {
        spares.removeAll { $0.handler === handler }
    }

    /// Opens connection `n`: TCP, then TLS; the handler reports back.
    func connect(_ n: Int) {
        open(GatewayChannelHandler(driver: self, connection: n)).whenComplete { result in
            switch result {
            case .success(let channel):
                // The machine may have given up on it meanwhile (its connect timeout).
                if self.machine.isConnecting(n) {
                    self.connection = (n, channel)
                } else {
                    channel.close(promise: nil)
                }
            case .failure(let error):
                self.machine.closed(n, reason: .transient("cannot connect to the gateway \(self.endpoint): \(describeConnectError(error))"), now: self.now)
                self.step()
            }
        }
    }

    /// A TCP connection with the TLS handler and `handler` on it.
    func open(_ handler: GatewayChannelHandler) -> EventLoopFuture<any Channel> {
        let tls = self.tls
        let serverName = configuration.serverName ?? configuration.host
        var bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: ChannelOptions.Types.WriteBufferWaterMark(
                low: min(configuration.writeBufferLow, configuration.writeBufferHigh), high: configuration.writeBufferHigh))
        if let size = configuration.socketSendBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_sndbuf), value: SocketOptionValue(size))
        }
        bootstrap = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([
                    try OpenSSLHandler(context: tls, serverName: serverName),
                    handler,
                ])
            }
        }
        // Reconnections (one per error response) reuse the address resolved
        // for the last good connection for a minute: no resolver round trip each time.
        let connecting: EventLoopFuture<any Channel>
        if let (address, until) = resolvedAddress, NIODeadline.now() < until {
            connecting = bootstrap.connect(to: address)
        } else {
            connecting = bootstrap.connect(host: configuration.host, port: configuration.port)
        }
        return connecting.map { channel in
            if self.resolvedAddress == nil, let address = channel.remoteAddress {
                self.resolvedAddress = (address, .now() + .seconds(60))
            }
            return channel
        }.flatMapErrorThrowing { error in
            self.resolvedAddress = nil
            throw error
        }
    }

    /// Connection `n` completed its TLS handshake.
    func handshakeCompleted(_ n: Int, channel: any Channel, protocolVersion: String, resumed: Bool) {
        guard machine.isConnecting(n) else {
            channel.close(promise: nil)
            return
        }
        tlsStatistics.protocolVersion = protocolVersion
        if resumed { tlsStatistics.resumedHandshakes += 1 }
        connection = (n, channel)
        trace("handshake \(n)\(resumed ? " (resumed)" : "")")
        machine.connected(n, now: now)
        step()
    }

    /// Bytes the gateway sent on connection `n`.
    func read(_ n: Int, _ buffer: ByteBuffer) {
        trace("read \(buffer.readableBytes) bytes on \(n)")
        buffer.withUnsafeReadableBytes { machine.read(n, $0, now: now) }
        step()
    }

    /// An error on connection `n` (it is closing); kept to explain the close.
    func failed(_ n: Int, _ error: any Error) {
        if closeErrors[n] == nil { closeErrors[n] = error }
    }

    /// Connection `n` ended.
    func closed(_ n: Int) {
        trace("closed \(n)")
        if connection?.number == n { connection = nil }
        let error = closeErrors.removeValue(forKey: n)
        let reason: DeliveryMachine.CloseReason
        if let tlsError = error as? TLSError, Self.isPermanent(tlsError.code) {
            reason = .permanent("\(tlsError)")
        } else {
            reason = .transient(error.map { "\($0)" })
        }
        machine.closed(n, reason: reason, now: now)
        step()
    }

    static func isPermanent(_ code: TLSError.Code) -> Bool {
        [.unknownCA, .hostNameMismatch, .expiredCertificate, .missingPeerCertificate, .handshakeRefused].contains(code)
    }
}

/// The provider's end of a gateway connection, after the TLS handler: passes
/// every byte read, every error and the close to the driver, in order.
///
/// `@unchecked Sendable`: it is created on the driver's event loop, which is
/// also its channel's, and `connection`, its only mutable state, is read and
/// written there only (the driver adopts a spare on its loop).
final class GatewayChannelHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    /// The number of a connection opened as a spare, until it is used.
    static let spare = 0

    let driver: GatewayDriver
    /// The machine's number for this connection (``spare`` until the driver adopts it).
    var connection: Int

    init(driver: GatewayDriver, connection: Int) {
        self.driver = driver
        self.connection = connection
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let version, _, _, let resumed, _) = event as? TLSEvent {
            if connection == Self.spare {
                driver.spareReady(self, resumed: resumed)
            } else {
                driver.handshakeCompleted(connection, channel: context.channel, protocolVersion: version, resumed: resumed)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard connection != Self.spare else { return }
        driver.read(connection, unwrapInboundIn(data))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { driver.step() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if connection != Self.spare { driver.failed(connection, error) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if connection == Self.spare { driver.spareClosed(self) } else { driver.closed(connection) }
        context.fireChannelInactive()
    }
}
