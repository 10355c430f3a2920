import HeraldBinary
import HeraldCore
import NIOCore
import NIOPosix

extension GatewayDriver {
    /// Opens connection `n`: TCP, then TLS; the handler reports back.
    func connect(_ n: Int) {
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
                    GatewayChannelHandler(driver: self, connection: n),
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
        connecting.whenComplete { result in
            switch result {
            case .success(let channel):
                if self.resolvedAddress == nil, let address = channel.remoteAddress {
                    self.resolvedAddress = (address, .now() + .seconds(60))
                }
                // The machine may have given up on it meanwhile (its connect timeout).
                if self.machine.isConnecting(n) {
                    self.connection = (n, channel)
                } else {
                    channel.close(promise: nil)
                }
            case .failure(let error):
                self.resolvedAddress = nil
                self.machine.closed(n, reason: .transient("cannot connect to \(self.endpoint): \(error)"), now: self.now)
                self.step()
            }
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
        machine.connected(n, now: now)
        step()
    }

    /// Bytes the gateway sent on connection `n`.
    func read(_ n: Int, _ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { machine.read(n, $0, now: now) }
        step()
    }

    /// An error on connection `n` (it is closing); kept to explain the close.
    func failed(_ n: Int, _ error: any Error) {
        if closeErrors[n] == nil { closeErrors[n] = error }
    }

    /// Connection `n` ended.
    func closed(_ n: Int) {
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
final class GatewayChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let driver: GatewayDriver
    let connection: Int

    init(driver: GatewayDriver, connection: Int) {
        self.driver = driver
        self.connection = connection
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let version, _, _, let resumed) = event as? TLSEvent {
            driver.handshakeCompleted(connection, channel: context.channel, protocolVersion: version, resumed: resumed)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        driver.read(connection, unwrapInboundIn(data))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { driver.step() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        driver.failed(connection, error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        driver.closed(connection)
        context.fireChannelInactive()
    }
}
