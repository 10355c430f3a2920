import ArgumentParser
import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldJSON
import HeraldOpenSSL
import HeraldSimulator
import HeraldTesting

/// `herald simulate --http2`: the HTTP/2 simulator over TLS (ALPN h2).
struct HTTP2SimulateOptions: ParsableArguments {
    @Flag(help: "Serve the HTTP/2 provider API instead of the binary gateway.")
    var http2 = false

    @Option(help: "HTTP/2 port (0 picks a free one).")
    var port = 0

    @Option(help: "The app's bundle identifier: the topic requests must name.")
    var bundleId = "com.example.app"

    @Option(help: "A provider token key (.p8): requests must carry a JWT it signed (verified with its public half).")
    var tokenKey: String?

    @Option(help: "The key id tokens must name (with --token-key).")
    var keyId: String?

    @Option(help: "The team id tokens must name (with --token-key).")
    var teamId: String?

    @Option(name: .customLong("unregistered-token"), help: "A hex token answered 410 Unregistered, dead since the server started (repeatable).")
    var unregisteredTokens: [String] = []

    @Option(name: .customLong("bad-token"), help: "A hex token answered 400 BadDeviceToken (repeatable).")
    var badTokens: [String] = []

    @Option(help: "Streams per connection once a request is authenticated.")
    var maxStreams = 1000

    @Option(help: "Probability of GOAWAY (Shutdown) per request.")
    var goAway = 0.0

    @Option(help: "Probability of 503 ServiceUnavailable per request.")
    var unavailable = 0.0

    @Option(help: "Probability of 429 TooManyRequests per request.")
    var tooManyRequests = 0.0

    @Option(help: "Probability of a reset stream per request.")
    var reset = 0.0

    @Option(help: "Seed for the faults.")
    var faultSeed: UInt64 = 0

    @Option(help: "Milliseconds each answer is held back (slow answers).")
    var answerDelayMs: Int?

    func serve(host: String, certificate: String, key: String, ca: String) async throws {
        var configuration = HTTP2SimulatorConfiguration()
        configuration.bundleID = bundleId
        configuration.maxConcurrentStreams = maxStreams
        configuration.faults.seed = faultSeed
        configuration.faults.goAway = goAway
        configuration.faults.unavailable = unavailable
        configuration.faults.tooManyRequests = tooManyRequests
        configuration.faults.reset = reset
        if let tokenKey {
            guard let keyId, let teamId else { throw SetupError("--token-key needs --key-id and --team-id") }
            do {
                let k = try ProviderTokenKey(p8File: tokenKey, keyID: keyId, teamID: teamId)
                configuration.tokenKeyPEM = k.publicKeyPEM
            } catch {
                throw SetupError("--token-key: \(error)")
            }
            configuration.keyID = keyId
            configuration.teamID = teamId
        }
        let simulator = try HTTP2Simulator(configuration: configuration)
        let started = Int64(Date().timeIntervalSince1970 * 1000)
        for hex in unregisteredTokens { simulator.markUnregistered(try token(hex), at: started) }
        for hex in badTokens { simulator.markInvalid(try token(hex)) }
        // Token authentication needs no client certificate; certificate authentication needs one from the CA.
        let tls = TLSConfiguration.server(identity: .pem(certificate: certificate, key: key), clientCA: tokenKey == nil ? .caFile(ca) : nil)
        let server: HTTP2SimulatorServer
        do {
            server = try await HTTP2SimulatorServer.start(
                simulator: simulator, tls: tls, host: host, port: port, answerDelay: answerDelayMs.map { .milliseconds($0) })
        } catch {
            throw SetupError("\(error)")
        }
        var ready = JSONLine()
        ready.add("host", server.host)
        ready.add("port", server.port)
        ready.add("server_name", "localhost")
        ready.add("ca", ca)
        ready.add("protocol", "h2")
        await serveUntilSignal(ready) { await server.stop() }
        let c = simulator.counters
        var summary = JSONLine()
        summary.add("connections", server.connections)
        summary.add("requests", c.requests)
        summary.add("delivered", c.delivered)
        summary.add("duplicates", c.duplicates)
        summary.add("goaways", c.goAways)
        summary.add("broadcasts", c.broadcasts.values.reduce(0, +))
        summary.add("channel_requests", c.channelRequests)
        summary.add("channels", simulator.channels.count)
        summary.add("provider_tokens", c.providerTokens.count)
        summary.add("errors", server.connectionErrors.count)
        summary.print()
    }

    func token(_ hex: String) throws -> DeviceToken {
        do { return try DeviceToken(hex: hex) } catch { throw SetupError("token \(hex.prefix(8))…: \(error)") }
    }
}
