import CHeraldOpenSSL
import COpenSSL

/// A TLS problem, in plain words, naming the file or the peer it concerns.
///
/// `code` says what kind of problem it is, so callers can react (a wrong
/// password is not worth retrying; a refused handshake may be).
public struct TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem. Growable: new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        /// A file could not be read (missing, no permission).
        public static let unreadableFile = Code("unreadable file")
        /// A file does not hold what it should (no PEM certificate, not a PKCS#12 bundle…).
        public static let badFile = Code("bad file")
        /// The passphrase or password is wrong.
        public static let wrongPassword = Code("wrong password")
        /// The key is encrypted and no passphrase was configured.
        public static let missingPassword = Code("missing password")
        /// The private key is not the certificate's.
        public static let keyMismatch = Code("key does not match certificate")
        /// A certificate (ours or the peer's) has expired or is not valid yet.
        public static let expiredCertificate = Code("expired certificate")
        /// The peer's certificate is not signed by a trusted CA.
        public static let unknownCA = Code("unknown CA")
        /// The peer's certificate is not valid for the host name we asked for.
        public static let hostNameMismatch = Code("host name mismatch")
        /// The peer refused the handshake (it did not accept our certificate, or no common protocol).
        public static let handshakeRefused = Code("handshake refused")
        /// The peer did not present a certificate where one is required.
        public static let missingPeerCertificate = Code("missing peer certificate")
        /// No common application protocol (ALPN): the peer did not agree to ours,
        /// or (server) the client offered none of them. See ``TLSConfiguration/requireApplicationProtocol``.
        public static let noApplicationProtocol = Code("no application protocol")
        /// The handshake did not finish in time.
        public static let handshakeTimeout = Code("handshake timed out")
        /// The connection closed during the handshake.
        public static let closedDuringHandshake = Code("closed during handshake")
        /// A protocol error after the handshake.
        public static let protocolError = Code("protocol error")
        /// The configuration itself is wrong.
        public static let configuration = Code("configuration")
        public var description: String { name }
    }

    public let code: Code
    /// The sentence for the user.
    public let message: String
    /// OpenSSL's own error strings, for the curious (may be empty).
    public let detail: String

    public init(_ code: Code, _ message: String, detail: String = "") {
        self.code = code
        self.message = message
        self.detail = detail
    }

    public var description: String {
        detail.isEmpty ? message : "\(message) [openssl: \(detail)]"
    }
}

/// One entry of OpenSSL's thread-local error queue.
package struct OpenSSLErrorEntry: Sendable, Hashable {
    var library: Int32
    var reason: Int32
    var text: String
}

package enum OpenSSLErrors {
    /// Takes (and clears) OpenSSL's error queue for this thread.
    package static func drain() -> [OpenSSLErrorEntry] {
        var out: [OpenSSLErrorEntry] = []
        while true {
            let e = ERR_get_error()
            if e == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(e, &buf, buf.count)
            out.append(OpenSSLErrorEntry(
                library: cherald_err_get_lib(e), reason: cherald_err_get_reason(e),
                text: String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return out
    }

    package static func text(_ entries: [OpenSSLErrorEntry]) -> String {
        entries.map(\.text).joined(separator: "; ")
    }

    static func clear() { ERR_clear_error() }
}
