/// Events the TLS handler sends up the pipeline.
public enum TLSEvent: Sendable, Hashable {
    /// The handshake finished: application data may flow. `serverName` is the
    /// name the client asked for (SNI): on the server side, what the client
    /// sent; on the client side, what we sent.
    /// `resumed`: an earlier session was resumed (no certificates exchanged).
    /// `applicationProtocol`: what ALPN selected (`"h2"`), on both sides; nil
    /// when either side did not use ALPN, or (``TLSConfiguration/requireApplicationProtocol``
    /// off) no protocol was common.
    case handshakeCompleted(protocolVersion: String, cipher: String, serverName: String?, resumed: Bool, applicationProtocol: String?)

    /// The application protocol ALPN selected, if any (see ``handshakeCompleted(protocolVersion:cipher:serverName:resumed:applicationProtocol:)``).
    public var applicationProtocol: String? {
        switch self {
        case .handshakeCompleted(_, _, _, _, let selected): selected
        }
    }
}
