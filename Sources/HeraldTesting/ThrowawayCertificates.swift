import HeraldCore
import HeraldOpenSSL
import CHeraldOpenSSL
import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A key and a certificate made in memory (EC P-256, X.509 v3), for tests
/// and `herald certs`: a throwaway CA and the server and client certificates
/// it signs. Never for production: Apple issues the real provider certificate.
public final class IssuedCertificate: @unchecked Sendable {
    // @unchecked Sendable: the X509 and the key are made in init and never
    // changed after (only read: signing, writing PEM), which OpenSSL allows from any thread.
    let cert: OpaquePointer
    let key: OpaquePointer
    public let commonName: String

    init(cert: OpaquePointer, key: OpaquePointer, commonName: String) {
        self.cert = cert
        self.key = key
        self.commonName = commonName
    }

    deinit {
        X509_free(cert)
        EVP_PKEY_free(key)
    }

    /// What the certificate is for.
    public enum Purpose: Int32, Sendable { case none = 0, server = 1, client = 2 }

    /// A self-signed CA certificate.
    public static func certificateAuthority(commonName: String, validDays: Int = 30) throws(TLSError) -> IssuedCertificate {
        try make(commonName: commonName, subjectAltNames: nil, isCA: true, purpose: .none,
                 notBefore: -3600, notAfter: validDays * 86_400, issuer: nil)
    }

    /// A certificate signed by `issuer`.
    /// - Parameters:
    ///   - hostNames: DNS names and IP addresses it is valid for (server certificates).
    ///   - notBefore, notAfter: seconds from now; a negative `notAfter` makes an expired certificate.
    public static func issue(
        commonName: String, hostNames: [String] = [], purpose: Purpose, by issuer: IssuedCertificate,
        notBefore: Int = -3600, notAfter: Int = 30 * 86_400
    ) throws(TLSError) -> IssuedCertificate {
        let sans = hostNames.map { TLSContext.isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        return try make(commonName: commonName, subjectAltNames: sans.isEmpty ? nil : sans, isCA: false, purpose: purpose,
                        notBefore: notBefore, notAfter: notAfter, issuer: issuer)
    }

    static func make(commonName: String, subjectAltNames: String?, isCA: Bool, purpose: Purpose,
                     notBefore: Int, notAfter: Int, issuer: IssuedCertificate?) throws(TLSError) -> IssuedCertificate {
        var cert: OpaquePointer? = nil
        var key: OpaquePointer? = nil
        var serialBytes: UInt32 = 0
        arc4random_buf(&serialBytes, 4)
        let ok = commonName.withCString { cn in
            withOptionalCString(subjectAltNames) { sans in
                cherald_make_certificate(cn, sans, isCA ? 1 : 0, purpose.rawValue, notBefore, notAfter,
                                         Int(serialBytes & 0x7fff_ffff) | 1, issuer?.cert, issuer?.key, &cert, &key)
            }
        }
        guard ok == 1, let cert, let key else {
            throw TLSError(.configuration, "cannot make a certificate for \(commonName)", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        return IssuedCertificate(cert: cert, key: key, commonName: commonName)
    }

    /// Writes the certificate as PEM.
    public func writeCertificate(to path: String) throws(TLSError) {
        try writeBIO(path, mode: 0o644) { cherald_write_certificate_pem($0, cert) }
    }

    /// Writes the private key as PEM, encrypted with AES-256 if `passphrase` is given (mode 0600).
    public func writeKey(to path: String, passphrase: String? = nil) throws(TLSError) {
        try writeBIO(path, mode: 0o600) { bio in withOptionalCString(passphrase) { cherald_write_private_key_pem(bio, key, $0) } }
    }

    /// Writes key, certificate and (optionally) the CA as a PKCS#12 bundle with `password` (mode 0600).
    public func writePKCS12(to path: String, password: String, including ca: IssuedCertificate? = nil) throws(TLSError) {
        try writeBIO(path, mode: 0o600) { bio in
            password.withCString { pw in commonName.withCString { cherald_write_pkcs12(bio, pw, $0, key, cert, ca?.cert) } }
        }
    }

    func writeBIO(_ path: String, mode: mode_t, _ body: (OpaquePointer) -> Int32) throws(TLSError) {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError(.configuration, "OpenSSL could not create a memory BIO") }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else {
            throw TLSError(.configuration, "cannot encode \(path)", detail: OpenSSLErrors.text(OpenSSLErrors.drain()))
        }
        var data: UnsafeMutablePointer<CChar>? = nil
        let n = cherald_bio_get_mem_data(bio, &data)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard fd >= 0 else { throw TLSError(.unreadableFile, "cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var off = 0
        while off < n {
            let w = write(fd, data! + off, n - off)
            if w <= 0 { throw TLSError(.unreadableFile, "cannot write \(path): \(String(cString: strerror(errno)))") }
            off += w
        }
    }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

/// The files of a throwaway certificate set: a CA, a server certificate for
/// the simulator (valid for localhost, 127.0.0.1 and ::1) and a client
/// certificate for the provider, as PEM and as a PKCS#12 bundle.
public struct ThrowawayCertificates: Sendable, Hashable {
    public var directory: String
    /// The file names of a set in `directory` (made earlier, e.g. by `herald certs`).
    public init(directory: String) { self.directory = directory }
    public var caCertificate: String { directory + "/ca.pem" }
    public var caKey: String { directory + "/ca-key.pem" }
    public var serverCertificate: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server-key.pem" }
    public var clientCertificate: String { directory + "/client.pem" }
    public var clientKey: String { directory + "/client-key.pem" }
    /// The client key again, encrypted with the passphrase in ``passphraseFile``.
    public var clientKeyEncrypted: String { directory + "/client-key-encrypted.pem" }
    /// The client identity as a PKCS#12 bundle, password in ``passphraseFile``.
    public var clientP12: String { directory + "/client.p12" }
    /// The passphrase of the encrypted key and the `.p12`.
    public var passphraseFile: String { directory + "/passphrase.txt" }

    /// Makes a fresh set in `directory` (created if missing).
    /// - Parameter hostNames: what the server certificate is valid for.
    @discardableResult
    public static func make(in directory: String, hostNames: [String] = ["localhost", "127.0.0.1", "::1"],
                            passphrase: String? = nil) throws(TLSError) -> ThrowawayCertificates {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw TLSError(.unreadableFile, "cannot create directory \(directory): \(String(cString: strerror(errno)))")
        }
        let files = ThrowawayCertificates(directory: directory)
        let ca = try IssuedCertificate.certificateAuthority(commonName: "Herald throwaway CA")
        let server = try IssuedCertificate.issue(commonName: hostNames.first ?? "localhost", hostNames: hostNames, purpose: .server, by: ca)
        let client = try IssuedCertificate.issue(commonName: "Herald throwaway provider", purpose: .client, by: ca)
        var secretBytes = [UInt8](repeating: 0, count: 12)
        arc4random_buf(&secretBytes, secretBytes.count)
        let secret = passphrase ?? secretBytes.map { String($0, radix: 16) }.joined()
        try ca.writeCertificate(to: files.caCertificate)
        try ca.writeKey(to: files.caKey)
        try server.writeCertificate(to: files.serverCertificate)
        try server.writeKey(to: files.serverKey)
        try client.writeCertificate(to: files.clientCertificate)
        try client.writeKey(to: files.clientKey)
        try client.writeKey(to: files.clientKeyEncrypted, passphrase: secret)
        try client.writePKCS12(to: files.clientP12, password: secret, including: ca)
        let fd = open(files.passphraseFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw TLSError(.unreadableFile, "cannot write \(files.passphraseFile)") }
        defer { close(fd) }
        do {
            try writeAll(fd, Array((secret + "\n").utf8), to: files.passphraseFile)
        } catch {
            throw TLSError(.unreadableFile, "cannot write \(files.passphraseFile): \(error)")
        }
        return files
    }
}
