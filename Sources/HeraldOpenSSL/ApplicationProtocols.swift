import CHeraldOpenSSL
import COpenSSL

/// ALPN (RFC 7301), which the HTTP/2 interface of APNs requires (`h2`): the
/// wire format of a protocol list, and the words for its failures.
enum ApplicationProtocols {
    /// `names` in ALPN's wire format: each name preceded by its length in one byte.
    static func wireFormat(_ names: [String]) throws(TLSError) -> [UInt8] {
        var wire: [UInt8] = []
        for name in names {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError(.configuration,
                    "the application protocol name \(name.debugDescription) (ALPN) must be 1 to 255 bytes long, not \(bytes.count)")
            }
            wire.append(UInt8(bytes.count))
            wire += bytes
        }
        // The extension's list has a 2-byte length.
        guard wire.count <= Int(UInt16.max) else {
            throw TLSError(.configuration, "the application protocol list (ALPN) is longer than 65535 bytes")
        }
        return wire
    }

    /// "h2", "h2 or http/1.1", "h2, spdy/3 or http/1.1".
    static func words(_ names: [String]) -> String {
        guard let last = names.last, names.count > 1 else { return names.first ?? "(none)" }
        return names.dropLast().joined(separator: ", ") + " or " + last
    }
}

extension TLSContext {
    /// Client: offers the configured protocols. Server: selects from them (see ``TLSConfiguration/applicationProtocols``).
    static func configureApplicationProtocols(_ configuration: TLSConfiguration, _ ctx: OpaquePointer) throws(TLSError) {
        let names = configuration.applicationProtocols
        guard !names.isEmpty else { return }
        let wire = try ApplicationProtocols.wireFormat(names)
        let ok: Bool
        switch configuration.role {
        case .client:
            ok = SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0  // 0 is success here
        case .server:
            ok = cherald_ctx_set_alpn_server(ctx, wire, UInt32(wire.count), configuration.requireApplicationProtocol ? 1 : 0) == 1
        }
        guard ok else {
            throw TLSError(.configuration, "OpenSSL refused the application protocols \(ApplicationProtocols.words(names)) (ALPN)",
                           detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
    }
}

extension OpenSSLHandler {
    /// The protocol ALPN selected on this connection, once the handshake is done; nil without one.
    var selectedApplicationProtocol: String? {
        var data: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// Client side, after the handshake: the error when we required one of our
    /// application protocols and the server selected none (it ignored ALPN).
    func missingApplicationProtocol(_ selected: String?) -> TLSError? {
        let configuration = tls.configuration
        guard isClient, selected == nil, configuration.requireApplicationProtocol, !configuration.applicationProtocols.isEmpty else {
            return nil
        }
        return TLSError(.noApplicationProtocol,
            "\(peerName) did not agree to \(ApplicationProtocols.words(configuration.applicationProtocols)) (ALPN): "
                + "it selected no application protocol")
    }

    /// The ALPN failures in OpenSSL's error queue, in plain words; nil when there is none.
    func describeApplicationProtocolFailure(_ reasons: Set<Int32>, detail: String) -> TLSError? {
        let ours = ApplicationProtocols.words(tls.configuration.applicationProtocols)
        if reasons.contains(SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
            // The peer sent the no_application_protocol alert.
            return TLSError(.noApplicationProtocol,
                "\(peerName) did not agree to \(ours) (ALPN): it refused the handshake with no_application_protocol", detail: detail)
        }
        if reasons.contains(SSL_R_NO_APPLICATION_PROTOCOL) {
            // We (the server) refused a client's offer.
            return TLSError(.noApplicationProtocol,
                "refused a client that offered none of our application protocols, \(ours) (ALPN)", detail: detail)
        }
        return nil
    }
}
