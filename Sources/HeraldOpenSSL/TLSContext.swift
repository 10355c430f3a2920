import CHeraldOpenSSL
import COpenSSL
import HeraldCore
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An OpenSSL `SSL_CTX` set up from a ``TLSConfiguration``: identity loaded
/// and checked (password, key matches certificate, not expired), trust store
/// loaded, TLS 1.2 minimum, verification mode set. One context serves many
/// connections; creating it reads the files, so do it once.
///
/// Every problem is reported as a ``TLSError`` in plain words naming the file.
public final class TLSContext: @unchecked Sendable {
    // @unchecked Sendable: the SSL_CTX is set up in init and never changed after;
    // OpenSSL makes connections from it on any thread (the session cache and the
    // ticket stack have locks of their own, in CHeraldOpenSSL).
    let ctx: OpaquePointer
    public let configuration: TLSConfiguration
    /// The subject of our certificate, if we have one (for logs).
    public let identitySubject: String?

    /// `logger` gets the context's warnings (verification turned off).
    public init(_ configuration: TLSConfiguration, logger: Logger = Logger(label: "herald.tls")) throws(TLSError) {
        // Everything that can fail happens before `self` owns the context, so
        // the context is freed exactly once: by `makeContext` on failure, by `deinit` after.
        let (ctx, subject) = try Self.makeContext(configuration, logger: logger)
        self.configuration = configuration
        self.ctx = ctx
        self.identitySubject = subject
    }

    /// A configured `SSL_CTX` and the subject of our certificate; frees the context itself if anything fails.
    static func makeContext(_ configuration: TLSConfiguration, logger: Logger) throws(TLSError) -> (OpaquePointer, String?) {
        OpenSSLErrors.clear()
        guard let ctx = SSL_CTX_new(TLS_method()) else {
            throw TLSError(.configuration, "OpenSSL could not create a TLS context", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        do throws(TLSError) {
            guard cherald_ctx_set_min_proto_version(ctx, cherald_tls1_2_version()) == 1 else {
                throw TLSError(.configuration, "OpenSSL refused TLS 1.2 as the minimum version")
            }
            guard cherald_ctx_set_max_proto_version(ctx, configuration.maximumVersion.wire) == 1 else {
                throw TLSError(.configuration, "OpenSSL refused TLS \(configuration.maximumVersion) as the maximum version")
            }
            cherald_ctx_set_default_modes(ctx)
            cherald_ctx_set_default_options(ctx)
            var subject: String? = nil
            if let identity = configuration.identity {
                subject = try load(identity, into: ctx, checkDates: configuration.checkIdentityDates)
            } else if configuration.role == .server {
                throw TLSError(.configuration, "a TLS server needs a certificate and key")
            }
            try loadTrust(configuration, into: ctx)
            configureRole(configuration, ctx, logger: logger)
            try configureApplicationProtocols(configuration, ctx)
            return (ctx, subject)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
    }

    static func configureRole(_ configuration: TLSConfiguration, _ ctx: OpaquePointer, logger: Logger) {
        switch configuration.role {
        case .client:
            if configuration.sessionResumption { _ = cherald_ctx_enable_client_resumption(ctx) }
            if configuration.verifyPeer {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
            } else {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
                logger.warning(
                    "TLS VERIFICATION IS OFF (verify: false): the server's certificate and host name are NOT checked; anyone on the path can pose as the gateway. Use this only against a test server you control.")
            }
        case .server:
            if configuration.requireClientCertificate {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            } else {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
            }
            if configuration.sessionResumption {
                cherald_ctx_enable_server_resumption(ctx, "herald")
            } else {
                cherald_ctx_disable_session_cache(ctx)
            }
        }
    }

    deinit { SSL_CTX_free(ctx) }

    /// A new connection object with memory BIOs, in client or server state.
    /// - Parameter serverName: client side: the host name to send (SNI) and to check the certificate against.
    func makeConnection(serverName: String?) throws(TLSError) -> OpaquePointer {
        guard let ssl = SSL_new(ctx) else {
            throw TLSError(.configuration, "OpenSSL could not create a connection", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        guard let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError(.configuration, "OpenSSL could not create memory BIOs")
        }
        cherald_bio_set_mem_eof_retry(rbio)
        cherald_bio_set_mem_eof_retry(wbio)
        SSL_set_bio(ssl, rbio, wbio)
        switch configuration.role {
        case .client:
            SSL_set_connect_state(ssl)
            if configuration.sessionResumption { cherald_ssl_offer_session(ssl) }
            if let name = serverName, !name.isEmpty {
                let isIP = Self.isIPAddress(name)
                if !isIP { _ = cherald_set_tlsext_host_name(ssl, name) }
                if configuration.verifyPeer {
                    let param = SSL_get0_param(ssl)
                    let ok = isIP ? X509_VERIFY_PARAM_set1_ip_asc(param, name) : X509_VERIFY_PARAM_set1_host(param, name, 0)
                    if ok != 1 {
                        SSL_free(ssl)
                        throw TLSError(.configuration, "cannot check the server's certificate against host name \"\(name)\"")
                    }
                }
            }
        case .server:
            SSL_set_accept_state(ssl)
        }
        return ssl
    }

    package static func isIPAddress(_ s: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, s, &v4) == 1 || inet_pton(AF_INET6, s, &v6) == 1
    }

    // MARK: - Identity

    /// Loads the identity into `ctx`; returns the certificate's subject.
    static func load(_ identity: TLSIdentity, into ctx: OpaquePointer, checkDates: Bool = true) throws(TLSError) -> String {
        switch identity.kind {
        case .pem(let certificatePath, let keyPath, let passphrase):
            return try loadPEM(certificatePath: certificatePath, keyPath: keyPath, passphrase: passphrase, into: ctx, checkDates: checkDates)
        case .pkcs12(let path, let password):
            return try loadPKCS12(path: path, password: password, into: ctx, checkDates: checkDates)
        }
    }

    static func withMemoryBIO<R>(_ bytes: [UInt8], _ body: (OpaquePointer) throws(TLSError) -> R) throws(TLSError) -> R {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
        defer { copy.deallocate() }
        copy.copyBytes(from: bytes)
        guard let bio = BIO_new_mem_buf(copy.baseAddress, Int32(bytes.count)) else {
            throw TLSError(.configuration, "OpenSSL could not create a memory BIO")
        }
        defer { BIO_free(bio) }
        return try body(bio)
    }

    static func loadPEM(certificatePath: String, keyPath: String, passphrase: SecretSource?, into ctx: OpaquePointer,
                        checkDates: Bool) throws(TLSError) -> String {
        OpenSSLErrors.clear()
        let certBytes = try readFile(certificatePath, what: "certificate file")
        var chain: [OpaquePointer] = []
        try withMemoryBIO(certBytes) { bio throws(TLSError) in
            while let x = PEM_read_bio_X509(bio, nil, nil, nil) { chain.append(x) }
        }
        OpenSSLErrors.clear()  // the end of the file reads as "no start line"
        guard let leaf = chain.first else {
            let hint = certBytes.first == 0x30 ? " (it looks like DER: convert it with `openssl x509 -inform der -in FILE -out FILE.pem`)" : ""
            throw TLSError(.badFile, "certificate file \(certificatePath) contains no PEM certificate\(hint)")
        }
        defer { for x in chain { X509_free(x) } }

        let keyBytes = keyPath == certificatePath ? certBytes : try readFile(keyPath, what: "private key file")
        let secret = try passphrase?.read()
        var asked: Int32 = 0
        let key: OpaquePointer? = try withMemoryBIO(keyBytes) { bio throws(TLSError) in
            if let secret {
                return secret.withCString { cherald_read_private_key(bio, $0, &asked) }
            }
            return cherald_read_private_key(bio, nil, &asked)
        }
        let errors = OpenSSLErrors.drain()
        guard let key else {
            if asked != 0 && passphrase == nil {
                throw TLSError(.missingPassword,
                    "private key file \(keyPath) is encrypted: give its passphrase with passphraseFile or passphraseEnv")
            }
            if asked != 0, let passphrase {
                throw TLSError(.wrongPassword,
                    "wrong passphrase for private key file \(keyPath) (passphrase from \(passphrase))", detail: OpenSSLErrors.text(errors))
            }
            throw TLSError(.badFile, "private key file \(keyPath) contains no PEM private key", detail: OpenSSLErrors.text(errors))
        }
        defer { EVP_PKEY_free(key) }
        let what = "certificate file \(certificatePath)"
        if checkDates { try checkValidity(leaf, what: what) }
        return try install(leaf: leaf, key: key, extra: Array(chain.dropFirst()), into: ctx, what: what,
                           keyWhat: "private key file \(keyPath)")
    }

    static func loadPKCS12(path: String, password: SecretSource?, into ctx: OpaquePointer, checkDates: Bool) throws(TLSError) -> String {
        OpenSSLErrors.clear()
        let bytes = try readFile(path, what: "PKCS#12 file")
        let p12: OpaquePointer? = try withMemoryBIO(bytes) { bio throws(TLSError) in d2i_PKCS12_bio(bio, nil) }
        guard let p12 else {
            let errors = OpenSSLErrors.drain()
            let hint = bytes.starts(with: Array("-----BEGIN".utf8)) ? " (it is PEM: use certificate and key instead of p12)" : ""
            throw TLSError(.badFile, "\(path) is not a PKCS#12 (.p12) bundle\(hint)", detail: OpenSSLErrors.text(errors))
        }
        defer { PKCS12_free(p12) }
        let secret = try password?.read() ?? ""
        let what = "PKCS#12 file \(path)"
        if PKCS12_mac_present(p12) == 1 {
            let ok = secret.withCString { PKCS12_verify_mac(p12, $0, Int32(secret.utf8.count)) }
            if ok != 1 {
                let errors = OpenSSLErrors.drain()
                if let password {
                    throw TLSError(.wrongPassword, "wrong password for \(what) (password from \(password))", detail: OpenSSLErrors.text(errors))
                }
                throw TLSError(.missingPassword, "\(what) needs a password: give it with passphraseFile or passphraseEnv",
                               detail: OpenSSLErrors.text(errors))
            }
        }
        var key: OpaquePointer? = nil
        var cert: OpaquePointer? = nil
        var ca: OpaquePointer? = nil
        func parse() -> Bool {
            secret.withCString { PKCS12_parse(p12, $0, &key, &cert, &ca) } == 1
        }
        var parsed = parse()
        if !parsed {
            // Older Keychain exports encrypt with RC2, which OpenSSL 3 keeps in its legacy provider.
            let first = OpenSSLErrors.drain()
            if cherald_load_legacy_provider() == 1 {
                parsed = parse()
            }
            if !parsed {
                let errors = OpenSSLErrors.drain()
                throw TLSError(.badFile,
                    "cannot decrypt \(what): it may use legacy encryption this OpenSSL lacks; re-export it, or convert it with "
                        + "`openssl pkcs12 -legacy -in \(path) -nodes -out identity.pem`",
                    detail: OpenSSLErrors.text(first + errors))
            }
        }
        defer {
            if let key { EVP_PKEY_free(key) }
            if let cert { X509_free(cert) }
            cherald_sk_x509_pop_free(ca)
        }
        guard let cert else { throw TLSError(.badFile, "\(what) holds no certificate") }
        guard let key else { throw TLSError(.badFile, "\(what) holds no private key (export the certificate together with its key)") }
        var extra: [OpaquePointer] = []
        for i in 0..<cherald_sk_x509_num(ca) {
            if let x = cherald_sk_x509_value(ca, i) { extra.append(x) }
        }
        if checkDates { try checkValidity(cert, what: what) }
        return try install(leaf: cert, key: key, extra: extra, into: ctx, what: what, keyWhat: "its private key")
    }

    /// Puts certificate, chain and key into the context and checks they belong together.
    static func install(leaf: OpaquePointer, key: OpaquePointer, extra: [OpaquePointer], into ctx: OpaquePointer,
                        what: String, keyWhat: String) throws(TLSError) -> String {
        guard SSL_CTX_use_certificate(ctx, leaf) == 1 else {
            throw TLSError(.badFile, "OpenSSL refused the certificate in \(what)", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        for x in extra {
            X509_up_ref(x)
            if cherald_ctx_add_extra_chain_cert(ctx, x) != 1 { X509_free(x) }
        }
        // SSL_CTX_use_PrivateKey itself fails when the key is not the certificate's.
        if SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1 {
            throw TLSError(.keyMismatch, "\(keyWhat) does not match the certificate in \(what)",
                           detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        return subject(of: leaf)
    }

    static func checkValidity(_ cert: OpaquePointer, what: String) throws(TLSError) {
        if let notAfter = X509_get0_notAfter(cert), X509_cmp_current_time(notAfter) < 0 {
            throw TLSError(.expiredCertificate,
                "the certificate in \(what) (\(subject(of: cert))) expired on \(timeText(notAfter)): ask Apple for a new one")
        }
        if let notBefore = X509_get0_notBefore(cert), X509_cmp_current_time(notBefore) > 0 {
            throw TLSError(.expiredCertificate,
                "the certificate in \(what) (\(subject(of: cert))) is not valid before \(timeText(notBefore)); check the clock")
        }
    }

    static func subject(of cert: OpaquePointer) -> String {
        guard let name = X509_get_subject_name(cert), let text = X509_NAME_oneline(name, nil, 0) else { return "?" }
        defer { cherald_openssl_free(text) }
        return String(cString: text)
    }

    static func timeText(_ t: UnsafePointer<ASN1_TIME>) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        ASN1_TIME_print(bio, t)
        return bioText(bio)
    }

    static func bioText(_ bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>? = nil
        let n = cherald_bio_get_mem_data(bio, &data)
        guard n > 0, let data else { return "" }
        return data.withMemoryRebound(to: UInt8.self, capacity: n) { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) }
    }

    // MARK: - Trust

    static func loadTrust(_ configuration: TLSConfiguration, into ctx: OpaquePointer) throws(TLSError) {
        let needed = configuration.role == .client ? configuration.verifyPeer : configuration.requireClientCertificate
        guard needed else { return }
        switch configuration.trust.kind {
        case .system:
            if configuration.role == .server {
                throw TLSError(.configuration, "a TLS server requiring client certificates needs a CA file for them")
            }
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw TLSError(.configuration, "cannot load the system trust store", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
            }
        case .caFile(let path):
            _ = try readFile(path, what: "CA file")
            guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                throw TLSError(.badFile, "CA file \(path) contains no PEM certificate", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
            }
            if configuration.role == .server, let names = SSL_load_client_CA_file(path) {
                SSL_CTX_set_client_CA_list(ctx, names)
            }
            OpenSSLErrors.clear()
        }
    }
}
