import HeraldCore
import HeraldOpenSSL

/// The TLS keys the network transports (`gateway`, `http2`) share:
/// - identity: `certificate` and `key` (PEM; the key may be encrypted), or
///   `p12` (PKCS#12); the passphrase or password from `passphraseFile` (its
///   first line) or `passphraseEnv` (an environment variable's name), never
///   from the configuration itself;
/// - trust: `caFile` (PEM) instead of the system store; `verify: false` turns
///   verification off (tests only);
/// - `handshakeTimeoutSeconds`, `maxTLSVersion` (`"1.2"` or `"1.3"`).
enum TLSOptions {
    static func client(_ node: ConfigNode) throws(ConfigError) -> TLSConfiguration {
        var passphrase: SecretSource?
        let file = try node.path("passphraseFile")
        let env = try node.string("passphraseEnv")
        if file != nil && env != nil { throw node.error("passphraseFile", "give passphraseFile or passphraseEnv, not both") }
        if let file { passphrase = .file(file) }
        if let env { passphrase = .environment(env) }

        let identity: TLSIdentity?
        let certificate = try node.path("certificate")
        let key = try node.path("key")
        if let p12 = try node.path("p12") {
            if certificate != nil || key != nil { throw node.error("p12", "give p12, or certificate and key, not both") }
            identity = .pkcs12(p12, password: passphrase)
        } else if let certificate {
            identity = .pem(certificate: certificate, key: key ?? certificate, passphrase: passphrase)
        } else if key != nil {
            throw node.error("certificate", "required with key")
        } else {
            identity = nil
        }

        var tls = TLSConfiguration.client(identity: identity, trust: try node.path("caFile").map(TLSTrust.caFile) ?? .system)
        tls.verifyPeer = try node.bool("verify") ?? true
        if let s = try node.int("handshakeTimeoutSeconds", in: 1...600) { tls.handshakeTimeout = .seconds(s) }
        if let v = try node.string("maxTLSVersion", oneOf: ["1.2", "1.3"]) { tls.maximumVersion = TLSVersion(v)! }
        return tls
    }
}

/// Where a network transport connects: `environment` (one of `environments`,
/// whose host and port `host` and `port` may override), or `host` and `port`.
enum EndpointOptions {
    static func hostAndPort(_ node: ConfigNode, environments: [(name: String, host: String, port: Int)]) throws(ConfigError) -> (String, Int) {
        if let name = try node.string("environment", oneOf: environments.map(\.name)) {
            let env = environments.first { $0.name == name }!
            return (try node.string("host") ?? env.host, try node.int("port", in: 1...65535) ?? env.port)
        }
        guard let host = try node.string("host") else {
            throw node.error("environment", "required: \(environments.map { "\"\($0.name)\"" }.joined(separator: " or ")) (or give host and port)")
        }
        guard let port = try node.int("port", in: 1...65535) else { throw node.error("port", "required with host") }
        return (host, port)
    }
}
