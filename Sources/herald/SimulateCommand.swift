import ArgumentParser
import Logging
import HeraldService
import ServiceLifecycle
import HeraldJSON
#if canImport(Glibc)
import Glibc
#endif
@preconcurrency import Dispatch
import Foundation
import HeraldCore
import HeraldSimulator
import HeraldGateway
import HeraldOpenSSL
import HeraldTesting
import Synchronization

/// `herald simulate`: the APNs simulator served over TLS on loopback, requiring
/// a client certificate, until SIGINT.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Serve the APNs simulator over TLS on loopback: the binary gateway and feedback (client certificate required), or with --http2 the HTTP/2 provider API.",
        discussion: """
            Prints one JSON line with the ports, e.g. \
            {"host":"127.0.0.1","gateway_port":40123,"feedback_port":40124,"server_name":"localhost",...}, \
            then serves until SIGINT or SIGTERM and prints the simulator's counters as a last JSON line. \
            Certificates come from --certs DIR (as `herald certs DIR` makes them) or from \
            --certificate, --key and --client-ca. See docs/operations.md.

            Examples:
              herald certs /tmp/herald-certs && herald simulate --certs /tmp/herald-certs
              herald simulate --certs DIR --unknown-tokens invalid --invalid-token <hex>
              herald simulate --http2 --certs DIR --token-key AuthKey.p8 --key-id KEY1234567 --team-id TEAM123456

            With --http2 the first line is {"host":…,"port":…,"server_name":"localhost","ca":…}; with \
            --token-key requests need a provider token signed by that key (its public half verifies them), \
            without it a client certificate signed by the CA.
            """
    )

    @Option(help: "A directory made by `herald certs` (server.pem, server-key.pem, ca.pem).")
    var certs: String?

    @Option(help: "The server certificate (PEM).")
    var certificate: String?

    @Option(help: "The server's private key (PEM, unencrypted).")
    var key: String?

    @Option(help: "The CA that signs client certificates (PEM).")
    var clientCa: String?

    @Option(help: "A loopback address to listen on: 127.0.0.1 or ::1.")
    var host = "127.0.0.1"

    @Option(help: "Gateway port (0 picks a free one).")
    var gatewayPort = 0

    @Option(help: "Feedback port (0 picks a free one).")
    var feedbackPort = 0

    @Option(help: "Payload limit in bytes.")
    var payloadLimit = 2048

    @Option(help: "What to do with tokens the simulator does not know.")
    var unknownTokens: UnknownTokensArgument = .deliver

    @Option(name: .customLong("invalid-token"), help: "A hex token answered with status 8 (repeatable).")
    var invalidTokens: [String] = []

    @Option(name: .customLong("uninstalled-token"), help: "A hex token whose app is uninstalled: accepted, then listed by the feedback service (repeatable).")
    var uninstalledTokens: [String] = []

    @OptionGroup(title: "HTTP/2 (--http2)")
    var http2: HTTP2SimulateOptions

    func run() async throws {
        guard ["127.0.0.1", "::1", "localhost"].contains(host) || host.hasPrefix("127.") else {
            throw SetupError("herald simulate listens on loopback only (127.0.0.1 or ::1), not \(host)")
        }
        let (serverCertificate, serverKey, ca) = try files()
        if http2.http2 {
            try await http2.serve(host: host == "localhost" ? "127.0.0.1" : host, certificate: serverCertificate, key: serverKey, ca: ca)
            return
        }
        let tls: TLSContext
        do {
            tls = try TLSContext(.server(identity: .pem(certificate: serverCertificate, key: serverKey), clientCA: .caFile(ca)))
        } catch {
            throw SetupError("\(error)")
        }
        let simulator = APNsSimulator(configuration: SimulatorConfiguration(
            payloadLimit: payloadLimit, unknownTokens: unknownTokens.policy))
        for hex in invalidTokens { simulator.markInvalid(try token(hex)) }
        for hex in uninstalledTokens { simulator.uninstall(try token(hex)) }

        let server = try await SimulatorServer.start(
            simulator: simulator, tls: tls, host: host == "localhost" ? "127.0.0.1" : host,
            gatewayPort: gatewayPort, feedbackPort: feedbackPort)
        var ready = JSONLine()
        ready.add("host", server.host)
        ready.add("gateway_port", server.gatewayPort)
        ready.add("feedback_port", server.feedbackPort)
        ready.add("server_name", "localhost")
        ready.add("client_ca", ca)
        await serveUntilSignal(ready) { await server.stop() }
        let c = simulator.counters
        var summary = JSONLine()
        summary.add("connections", c.connections)
        summary.add("accepted", c.accepted)
        summary.add("rejected", c.rejected.values.reduce(0, +))
        summary.add("tls_errors", server.connectionErrors.count)
        summary.print()
    }

    /// The server certificate, its key and the CA, from --certs or the single options.
    func files() throws -> (certificate: String, key: String, ca: String) {
        let serverCertificate: String, serverKey: String, ca: String
        if let certs {
            let files = ThrowawayCertificates(directory: certs)
            serverCertificate = certificate ?? files.serverCertificate
            serverKey = key ?? files.serverKey
            ca = clientCa ?? files.caCertificate
        } else {
            guard let certificate, let key, let clientCa else {
                throw SetupError("give --certs DIR (from `herald certs DIR`), or --certificate, --key and --client-ca")
            }
            serverCertificate = certificate
            serverKey = key
            ca = clientCa
        }
        return (serverCertificate, serverKey, ca)
    }

    func token(_ hex: String) throws -> DeviceToken {
        do { return try DeviceToken(hex: hex) } catch { throw SetupError("token \(hex.prefix(8))…: \(error)") }
    }
}

/// Prints `ready` (the line a test or script waits for), serves until SIGINT
/// or SIGTERM (``SignalledServiceGroup``), then runs `stop`; a second signal exits at once.
func serveUntilSignal(_ ready: JSONLine, stop: @escaping @Sendable () async -> Void) async {
    ready.print()
    fflush(nil)
    try? await SignalledServiceGroup.run(
        [], main: UntilShutdown(stop: stop), logger: Logger(label: "herald", factory: { _ in SwiftLogNoOpLogHandler() }),
        abandon: { exit(130) })
}

/// Waits for the group's graceful shutdown, then runs `stop`.
struct UntilShutdown: Service {
    let stop: @Sendable () async -> Void
    func run() async {
        try? await gracefulShutdown()
        await stop()
    }
}
