import ArgumentParser
import HeraldCore
import HeraldJSON
import HeraldTesting
#if canImport(Glibc)
import Glibc
#endif

/// `herald certs DIR`: a throwaway CA, a server certificate for the simulator
/// and a client certificate for the provider, for trying Herald against
/// `herald simulate`. Never for production.
struct CertsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "certs",
        abstract: "Make a throwaway CA, server and client certificate (for herald simulate and tests; not for production).",
        discussion: """
            Writes ca.pem, ca-key.pem, server.pem, server-key.pem (valid for localhost, 127.0.0.1, ::1), \
            client.pem, client-key.pem, client-key-encrypted.pem and client.p12 (passphrase in passphrase.txt), \
            then prints their paths as one JSON line. Keys are EC P-256, certificates valid for 30 days.

            Examples:
              herald certs /tmp/herald-certs
              herald certs /tmp/herald-certs --host-name gateway.test --force
            """
    )

    @Argument(help: "Directory to write into (created if missing).")
    var directory: String

    @Option(name: .customLong("host-name"), help: "A name or address the server certificate is valid for (repeatable).")
    var hostNames: [String] = ["localhost", "127.0.0.1", "::1"]

    @Flag(help: "Replace a set already in the directory (its CA key included).")
    var force = false

    func run() async throws {
        let existing = ThrowawayCertificates(directory: directory).caKey
        if !force && access(existing, F_OK) == 0 {
            throw SetupError("\(existing) exists: herald certs does not overwrite a CA key (use --force to replace the whole set)")
        }
        let files: ThrowawayCertificates
        do {
            files = try ThrowawayCertificates.make(in: directory, hostNames: hostNames)
        } catch {
            throw SetupError("\(error)")
        }
        var r = JSONLine()
        r.add("ca", files.caCertificate)
        r.add("server_certificate", files.serverCertificate)
        r.add("server_key", files.serverKey)
        r.add("client_certificate", files.clientCertificate)
        r.add("client_key", files.clientKey)
        r.add("client_key_encrypted", files.clientKeyEncrypted)
        r.add("client_p12", files.clientP12)
        r.add("passphrase_file", files.passphraseFile)
        r.print()
    }
}
