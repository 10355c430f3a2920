#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a passphrase or password comes from. Never a command-line argument:
/// a file (its first line) or an environment variable. `value` is for
/// embedders that hold the secret in memory already (e.g. from a vault).
public struct SecretSource: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case file(String)
        case environment(String)
        case value(String)
    }
    let kind: Kind

    /// The first line of a file (a trailing newline is not part of the secret).
    public static func file(_ path: String) -> SecretSource { SecretSource(kind: .file(path)) }
    /// An environment variable.
    public static func environment(_ name: String) -> SecretSource { SecretSource(kind: .environment(name)) }
    /// A secret already in memory.
    public static func value(_ secret: String) -> SecretSource { SecretSource(kind: .value(secret)) }

    /// Where the secret comes from, never the secret itself.
    public var description: String {
        switch kind {
        case .file(let p): return "file \(p)"
        case .environment(let n): return "environment variable \(n)"
        case .value: return "(in-memory secret)"
        }
    }

    /// Reads the secret.
    public func read() throws(TLSError) -> String {
        switch kind {
        case .value(let v):
            return v
        case .environment(let name):
            guard let v = getenv(name) else {
                throw TLSError(.missingPassword, "environment variable \(name) (named as the passphrase source) is not set")
            }
            return String(cString: v)
        case .file(let path):
            let bytes = try readFile(path, what: "passphrase file")
            var line = bytes.prefix { $0 != 0x0A }
            if line.last == 0x0D { line = line.dropLast() }
            return String(decoding: line, as: UTF8.self)
        }
    }
}

/// Reads a whole (small) file, or explains why not.
func readFile(_ path: String, what: String, limit: Int = 4 << 20) throws(TLSError) -> [UInt8] {
    guard let f = fopen(path, "rb") else {
        let reason = String(cString: strerror(errno))
        throw TLSError(.unreadableFile, "cannot read \(what) \(path): \(reason)")
    }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 16_384)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n > 0 { out.append(contentsOf: buf[0..<n]) }
        if out.count > limit { throw TLSError(.badFile, "\(what) \(path) is larger than \(limit) bytes") }
        if n < buf.count { break }
    }
    if ferror(f) != 0 { throw TLSError(.unreadableFile, "cannot read \(what) \(path): read error") }
    return out
}

/// Who we are: the certificate and private key Apple issued for the app (the
/// provider certificate), or for the simulator its server certificate.
public struct TLSIdentity: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case pem(certificate: String, key: String, passphrase: SecretSource?)
        case pkcs12(path: String, password: SecretSource?)
    }
    let kind: Kind

    /// A PEM certificate (optionally followed by its chain) and a PEM private
    /// key, which may be encrypted (then give `passphrase`). Both may be the same file.
    public static func pem(certificate: String, key: String, passphrase: SecretSource? = nil) -> TLSIdentity {
        TLSIdentity(kind: .pem(certificate: certificate, key: key, passphrase: passphrase))
    }
    /// A PKCS#12 bundle (`.p12`, as Keychain Access exports it) and its password.
    public static func pkcs12(_ path: String, password: SecretSource?) -> TLSIdentity {
        TLSIdentity(kind: .pkcs12(path: path, password: password))
    }

    public var description: String {
        switch kind {
        case .pem(let c, let k, _): return c == k ? "PEM \(c)" : "PEM certificate \(c), key \(k)"
        case .pkcs12(let p, _): return "PKCS#12 \(p)"
        }
    }
}

/// Which certificate authorities we trust to sign the peer's certificate.
public struct TLSTrust: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case system
        case caFile(String)
    }
    let kind: Kind
    /// The system trust store (OpenSSL's default verify paths).
    public static let system = TLSTrust(kind: .system)
    /// The CA certificates in a PEM file (and only those).
    public static func caFile(_ path: String) -> TLSTrust { TLSTrust(kind: .caFile(path)) }

    public var description: String {
        switch kind {
        case .system: return "the system trust store"
        case .caFile(let p): return "CA file \(p)"
        }
    }
}

/// Everything needed to set up one side of a TLS connection.
///
/// Client side (the gateway transport): verification of the server is on by
/// default, against `trust`, with the host name checked; TLS 1.2 minimum; SNI.
/// Server side (the simulator): with `requireClientCertificate`, a client
/// without a certificate signed by `trust` is refused.
/// A TLS protocol version Herald negotiates.
public struct TLSVersion: Sendable, Hashable, CustomStringConvertible {
    let wire: Int32
    public let description: String
    public static let tls12 = TLSVersion(wire: 0x0303, description: "1.2")
    public static let tls13 = TLSVersion(wire: 0x0304, description: "1.3")
    /// "1.2" or "1.3".
    public init?(_ name: String) {
        switch name {
        case "1.2": self = .tls12
        case "1.3": self = .tls13
        default: return nil
        }
    }
    init(wire: Int32, description: String) {
        self.wire = wire
        self.description = description
    }
}

public struct TLSConfiguration: Sendable, Hashable {
    public enum Role: Sendable, Hashable { case client, server }

    public var role: Role
    /// Our certificate and key. Required for a server; APNs requires one from its clients.
    public var identity: TLSIdentity?
    /// Whom we trust to have signed the peer's certificate.
    public var trust: TLSTrust
    /// Client: check the server's certificate (chain and host name). Turning it
    /// off is only for tests against a server you control, and is logged loudly.
    public var verifyPeer: Bool
    /// Server: require and verify a client certificate.
    public var requireClientCertificate: Bool
    /// How long a handshake may take.
    public var handshakeTimeout: Duration
    /// Refuse to load an identity whose certificate has expired or is not
    /// valid yet (the peer would refuse it anyway; this says so up front).
    /// Off only to simulate a misconfigured server in tests.
    public var checkIdentityDates = true
    /// Resume TLS sessions (TLS 1.3 tickets) on reconnection: the gateway
    /// closes the connection after every error response, and a resumed
    /// handshake skips the certificates. Client: offer the last session;
    /// server: issue tickets.
    public var sessionResumption = true
    /// The newest TLS version to negotiate (1.2 or 1.3). TLS 1.2 resumes a
    /// session without a new key exchange, which makes the reconnection after
    /// each error response several times cheaper (the binary gateway never
    /// spoke 1.3); 1.3 by default.
    public var maximumVersion: TLSVersion = .tls13
    /// Application protocols to negotiate with ALPN (RFC 7301), most preferred
    /// first: `["h2"]` for APNs' HTTP/2 interface. Empty (the default): no ALPN
    /// at all, the handshake is as before. Each name is 1 to 255 bytes of UTF-8.
    ///
    /// Client: the list is offered in the ClientHello. Server: the first name of
    /// *this* list that the client offers is selected (the server's preference
    /// decides); a client that offers no ALPN at all is accepted, without a
    /// protocol. Either way the result is
    /// ``TLSEvent/handshakeCompleted(protocolVersion:cipher:serverName:resumed:applicationProtocol:)``'s
    /// `applicationProtocol`.
    public var applicationProtocols: [String] = []
    /// What happens when ALPN finds no common protocol; only matters when
    /// ``applicationProtocols`` is not empty. On by default, as APNs (which
    /// speaks nothing but `h2`) wants it.
    ///
    /// Client: the handshake fails with a ``TLSError`` of code
    /// ``TLSError/Code/noApplicationProtocol`` ("the server … did not agree to
    /// h2 (ALPN)") when the server selects none of our protocols, or refuses
    /// them with the `no_application_protocol` alert. Off: the connection goes
    /// on with `applicationProtocol` nil, and the caller decides.
    ///
    /// Server: a client that offers ALPN but none of our protocols is refused
    /// with the fatal `no_application_protocol` alert (RFC 7301 §3.2). Off: the
    /// handshake goes on without ALPN. A client that offers no ALPN is accepted
    /// in both cases.
    public var requireApplicationProtocol = true

    public init(
        role: Role, identity: TLSIdentity? = nil, trust: TLSTrust = .system, verifyPeer: Bool = true,
        requireClientCertificate: Bool = true, handshakeTimeout: Duration = .seconds(10)
    ) {
        self.role = role
        self.identity = identity
        self.trust = trust
        self.verifyPeer = verifyPeer
        self.requireClientCertificate = requireClientCertificate
        self.handshakeTimeout = handshakeTimeout
    }

    /// A client configuration with verification on.
    public static func client(identity: TLSIdentity?, trust: TLSTrust = .system) -> TLSConfiguration {
        TLSConfiguration(role: .client, identity: identity, trust: trust)
    }

    /// A server configuration that requires a client certificate signed by `clientCA`.
    public static func server(identity: TLSIdentity, clientCA: TLSTrust?) -> TLSConfiguration {
        TLSConfiguration(role: .server, identity: identity, trust: clientCA ?? .system, requireClientCertificate: clientCA != nil)
    }
}
