import Crypto
import HeraldCore
@testable import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldSimulator
import HeraldTestSupport
import HeraldTesting
import NIOCore
import NIOHPACK
import NIOPosix
import Testing

@testable import HeraldHTTP2

/// The event loops of the HTTP/2 tests: their own, so that full-speed runs do not
/// delay the gateway tests' servers on the shared singleton group.
let http2TestGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)

/// The simulator over TLS on loopback, with token authentication by a fresh key.
struct TLSSimulatorSetup {
    let simulator: HTTP2Simulator
    let server: HTTP2SimulatorServer
    let key: ProviderTokenKey

    /// `certificateAuth`: no provider token; the server requires a client certificate from the throwaway CA.
    static func start(
        faults: HTTP2SimulatorConfiguration.Faults = .init(), answerDelay: Duration? = nil, host: String = "127.0.0.1",
        certificateAuth: Bool = false
    ) async throws -> TLSSimulatorSetup {
        let signing = P256.Signing.PrivateKey()
        var config = HTTP2SimulatorConfiguration()
        config.tokenKeyPEM = certificateAuth ? nil : signing.publicKey.pemRepresentation
        config.keyID = "KEY1234567"
        config.teamID = "TEAM123456"
        config.faults = faults
        let simulator = try HTTP2Simulator(configuration: config)
        let certs = sharedCertificates
        let server = try await HTTP2SimulatorServer.start(
            simulator: simulator,
            tls: .server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey),
                         clientCA: certificateAuth ? .caFile(certs.caCertificate) : nil),
            host: host, answerDelay: answerDelay, group: http2TestGroup)
        let key = try ProviderTokenKey(pem: signing.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        return TLSSimulatorSetup(simulator: simulator, server: server, key: key)
    }

    func configuration(connections: Int = 1) -> HTTP2TransportConfiguration {
        var c = HTTP2TransportConfiguration(
            host: server.host, port: server.port, tls: .client(identity: nil, trust: .caFile(sharedCertificates.caCertificate)), providerToken: key)
        c.serverName = "localhost"
        c.delivery.connections = connections
        // Debug builds of swift-nio check their ring buffers' invariants on every change (O(n)):
        // 1,000 streams per connection would measure that, not Herald.
        c.maxStreamsPerConnection = 10
        c.delivery.retryLaterDelay = .milliseconds(50)
        c.delivery.backoff = BackoffPolicy(initial: .milliseconds(20), maximum: .milliseconds(200))
        c.drainTimeout = .seconds(60)
        return c
    }
}

/// Sends `envelopes` in batches through `transport` and returns what the ledger saw.
func sendAll(_ envelopes: [Envelope], through transport: some Transport) async throws -> (OutcomeLedger, OutcomeCollector) {
    let collector = OutcomeCollector()
    let ledger = OutcomeLedger(observers: [collector])
    for start in stride(from: 0, to: envelopes.count, by: 1000) {
        let batch = Array(envelopes[start..<min(start + 1000, envelopes.count)])
        ledger.enter(batch.map(\.sequence), count: batch.count)
        try await transport.send(batch, outcomes: ledger)
    }
    await transport.finish(outcomes: ledger)
    return (ledger, collector)
}

@Suite("HTTP/2 transport over TLS against the simulator server", .serialized)
struct HTTP2TransportTests {
    @Test("100,000 requests over TLS: 1% BadDeviceToken, 0.5% Unregistered, GOAWAY ~1/1000, 503 ~1/1000, 429 ~1/2000: nothing lost or duplicated, one JWT, every 410 with its timestamp")
    func issueScenario() async throws {
        try await HeavyTestGate.shared.run { try await issueScenarioRun() }
    }

    func issueScenarioRun() async throws {
        var faults = HTTP2SimulatorConfiguration.Faults()
        faults.seed = 21
        faults.goAway = 0.001
        faults.unavailable = 0.001
        faults.tooManyRequests = 0.0005
        let setup = try await TLSSimulatorSetup.start(faults: faults)
        defer { Task { await setup.server.stop() } }
        let envelopes = try alertEnvelopes(100_000)
        var bad = Set<UInt64>(), dead = [UInt64: Int64]()
        for e in envelopes {
            switch e.sequence % 200 {
            case 7, 77: bad.insert(e.sequence); setup.simulator.markInvalid(e.request.token)
            case 123:
                dead[e.sequence] = 1_699_000_000_000 + Int64(e.sequence)
                setup.simulator.markUnregistered(e.request.token, at: dead[e.sequence]!)
            default: break
            }
        }
        let transport = try HTTP2Transport(configuration: setup.configuration(connections: 2), group: http2TestGroup)
        let (ledger, collector) = try await sendAll(envelopes, through: transport)

        let snapshot = ledger.snapshot
        #expect(snapshot.isBalanced && snapshot.entered == 100_000)
        #expect(snapshot.failed == 0 && snapshot.dropped == 0)
        #expect(snapshot.rejected == UInt64(bad.count + dead.count))
        var unregistered = Set<String>()
        for r in collector.records where r.outcome != .accepted {
            if bad.contains(r.sequence) {
                #expect(r.outcome == .rejected(Status(http: 400, reason: "BadDeviceToken")))
            } else {
                #expect(r.outcome == .rejected(Status(http: 410, reason: "Unregistered")))
                unregistered.insert("\(r.sequence)@\(r.apnsUnregisteredAt ?? -1)")
            }
        }
        #expect(unregistered == Set(dead.map { "\($0.key)@\($0.value)" }))
        let counters = setup.simulator.counters
        #expect(counters.duplicates == 0 && counters.delivered == 100_000 - bad.count - dead.count)
        #expect(counters.goAways > 50 && counters.answers["ServiceUnavailable", default: 0] > 50 && counters.answers["TooManyRequests", default: 0] > 20)
        let stats = transport.statistics
        #expect(stats.tokensSigned == 1 && counters.providerTokens.count == 1)
        #expect(collector.records.allSatisfy { $0.apnsID?.count == 36 })
        #expect(stats.goAways == counters.goAways && stats.resentUnprocessed > 0)
        #expect(setup.server.connectionErrors.isEmpty)
    }

    @Test("a token-auth connection starts at one stream; the limit rises once a token is accepted")
    func streamLimit() async throws {
        let setup = try await TLSSimulatorSetup.start()
        defer { Task { await setup.server.stop() } }
        var c = setup.configuration()
        c.fastLaneConnection = false  // one connection's stream limit
        let transport = try HTTP2Transport(configuration: c, group: http2TestGroup)
        let (ledger, _) = try await sendAll(try alertEnvelopes(2000), through: transport)
        #expect(ledger.snapshot.accepted == 2000)
        #expect(setup.simulator.counters.delivered == 2000 && setup.server.connections == 1)
        #expect(transport.statistics.streams == 2000)
    }

    @Test("GOAWAY every ~100 requests: what APNs did not process goes out on another connection, nothing twice")
    func goAways() async throws {
        var faults = HTTP2SimulatorConfiguration.Faults()
        faults.seed = 5
        faults.goAway = 0.01
        let setup = try await TLSSimulatorSetup.start(faults: faults)
        defer { Task { await setup.server.stop() } }
        let transport = try HTTP2Transport(configuration: setup.configuration(connections: 2), group: http2TestGroup)
        let (ledger, _) = try await sendAll(try alertEnvelopes(3000), through: transport)
        let counters = setup.simulator.counters
        #expect(ledger.snapshot.accepted == 3000)
        #expect(counters.duplicates == 0 && counters.delivered == 3000 && counters.goAways > 10)
        #expect(transport.statistics.goAways == counters.goAways && transport.statistics.resentUnanswered == 0)
        #expect(setup.server.connectionErrors.isEmpty)
    }

    @Test("6 connections on 4 event loops: 4 drivers on 4 loops (2, 2, 1, 1 connections), every request accepted once, one JWT for all, figures summed")
    func connectionsSpreadOverLoops() async throws {
        let setup = try await TLSSimulatorSetup.start()
        defer { Task { await setup.server.stop() } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 4)
        defer { Task { try? await group.shutdownGracefully() } }
        var c = setup.configuration(connections: 6)
        c.fastLaneConnection = false  // the configured connections only (FastLaneConnectionTests: with it)
        let transport = try HTTP2Transport(configuration: c, group: group)
        #expect(transport.drivers.map(\.configuration.delivery.connections) == [2, 2, 1, 1])
        #expect(Set(transport.drivers.map { ObjectIdentifier($0.loop) }).count == 4)
        let (ledger, collector) = try await sendAll(try alertEnvelopes(20_000), through: transport)
        #expect(ledger.snapshot.accepted == 20_000 && ledger.snapshot.isBalanced)
        #expect(Set(collector.records.map(\.sequence)).count == 20_000)
        let counters = setup.simulator.counters
        #expect(counters.duplicates == 0 && counters.delivered == 20_000)
        #expect(counters.providerTokens.count == 1 && transport.statistics.tokensSigned == 1)
        let stats = transport.statistics
        #expect(stats.connections == 6 && setup.server.connections == 6 && stats.handshakes == 6)
        #expect(stats.streams == 20_000)
        // Every driver carried a share: the batches went to whichever held fewest.
        #expect(transport.drivers.allSatisfy { $0.published.withLock { $0.delivery.streams } > 0 })
        #expect(transport.health == .ready)
        let p = await transport.latencyPercentiles()
        #expect(p.p50 > 0 && p.max >= p.p99)
    }

    @Test("IPv6: the same over ::1, slow answers included")
    func ipv6() async throws {
        let setup = try await TLSSimulatorSetup.start(answerDelay: .milliseconds(30), host: "::1")
        defer { Task { await setup.server.stop() } }
        let transport = try HTTP2Transport(configuration: setup.configuration(), group: http2TestGroup)
        let (ledger, _) = try await sendAll(try alertEnvelopes(300), through: transport)
        #expect(ledger.snapshot.accepted == 300 && setup.simulator.counters.delivered == 300)
        let latency = await transport.latencyPercentiles()
        #expect(latency.p50 >= 25 && latency.p50 < 5000)
    }

    @Test("certificate authentication: the provider certificate (PEM, or the .p12) is the credential; without one the handshake is refused and every request fails with the TLS reason")
    func certificateAuth() async throws {
        let setup = try await TLSSimulatorSetup.start(certificateAuth: true)
        defer { Task { await setup.server.stop() } }
        let certs = sharedCertificates
        for identity in [TLSIdentity.pem(certificate: certs.clientCertificate, key: certs.clientKey),
                         .pkcs12(certs.clientP12, password: .file(certs.passphraseFile))] {
            var config = setup.configuration()
            config.providerToken = nil
            config.tls = .client(identity: identity, trust: .caFile(certs.caCertificate))
            let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
            let (ledger, _) = try await sendAll(try alertEnvelopes(200), through: transport)
            #expect(ledger.snapshot.accepted == 200, "\(identity)")
            #expect(transport.statistics.tokensSigned == 0)
        }
        var anonymous = setup.configuration()
        anonymous.providerToken = nil
        anonymous.delivery.maxOutage = .seconds(2)  // in TLS 1.3 the refusal may only show after the handshake
        let refused = try HTTP2Transport(configuration: anonymous, group: http2TestGroup)
        let (ledger, collector) = try await sendAll(try alertEnvelopes(5), through: refused)
        #expect(ledger.snapshot.failed == 5)
        #expect(collector.records.allSatisfy { if case .failed(let why) = $0.outcome { why.code == .tlsRefused || why.code == .gatewayUnreachable } else { false } })
        #expect(setup.simulator.counters.delivered == 400)
    }

    @Test("a server that never answers: every request times out, is resent, and fails after its attempts; nothing hangs")
    func silentServer() async throws {
        var faults = HTTP2SimulatorConfiguration.Faults()
        faults.lostAnswer = 1
        let setup = try await TLSSimulatorSetup.start(faults: faults)
        defer { Task { await setup.server.stop() } }
        var config = setup.configuration()
        config.delivery.requestTimeout = .milliseconds(200)
        config.delivery.maxAttempts = 2
        let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
        let (ledger, collector) = try await sendAll(try alertEnvelopes(20), through: transport)
        #expect(ledger.snapshot.isBalanced && ledger.snapshot.failed == 20)
        #expect(collector.records.allSatisfy { if case .failed = $0.outcome { true } else { false } })
        #expect(transport.statistics.timeouts >= 20)
    }

    @Test("the wrong CA: the connection is refused once, with the TLS reason, and every request fails with it")
    func untrustedServer() async throws {
        let setup = try await TLSSimulatorSetup.start()
        defer { Task { await setup.server.stop() } }
        let other = try ThrowawayCertificates.make(in: temporaryDirectory())
        var config = setup.configuration()
        config.tls = .client(identity: nil, trust: .caFile(other.caCertificate))
        let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
        let (ledger, collector) = try await sendAll(try alertEnvelopes(5), through: transport)
        #expect(ledger.snapshot.failed == 5)
        #expect(collector.records.allSatisfy { "\($0.outcome)".contains("unknown CA") || "\($0.outcome)".contains("certificate") })
    }
    @Test("a request prepared on the sending task: its header block in the transport's order and indexing, authorization last, and its body; taken by the first send only")
    func preparedRequest() throws {
        let request = APNsRequest(method: "POST", path: "/3/device/" + String(repeating: "ab", count: 32), headers: [
            .init("apns-push-type", "alert"), .init("apns-id", "6F5C3B1E-2D4A-4B8C-9E7F-0A1B2C3D4E5F"), .init("apns-topic", "com.example.app"),
        ], body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        let prepared = PreparedRequest(request, authority: "api.push.apple.com", allocator: ByteBufferAllocator())
        #expect(PreparedRequest.of(prepared) === prepared && PreparedRequest.of(ByteBufferAllocatorBox()) == nil && PreparedRequest.of(nil) == nil)
        let taken = prepared.headers.take()
        var headers = try #require(taken)
        headers.add(name: "authorization", value: "bearer x.y.z")
        let expected: [(String, String, HPACKIndexing)] = [
            (":method", "POST", .indexable), (":scheme", "https", .indexable), (":path", request.path, .nonIndexable),
            (":authority", "api.push.apple.com", .indexable), ("apns-push-type", "alert", .indexable),
            ("apns-id", "6F5C3B1E-2D4A-4B8C-9E7F-0A1B2C3D4E5F", .nonIndexable), ("apns-topic", "com.example.app", .indexable),
            ("authorization", "bearer x.y.z", .indexable),
        ]
        #expect(headers.map { "\($0.name)=\($0.value)=\($0.indexable)" } == expected.map { "\($0.0)=\($0.1)=\($0.2)" })
        #expect(prepared.body.map { Array($0.readableBytesView) } == request.body)
        #expect(prepared.headers == nil, "taken: a send again builds its own")
        #expect(PreparedRequest(APNsRequest(method: "POST", path: "/3/device/00", headers: [], body: []), authority: "a", allocator: ByteBufferAllocator()).body == nil)
    }

    @Test("an answer's :status is three digits, nothing else")
    func statusValue() {
        #expect(HTTP2ConnectionHandler.status("200") == 200 && HTTP2ConnectionHandler.status("410") == 410)
        for bad in ["", "20", "2000", "+20", "2a0", " 200", "0x1"] { #expect(HTTP2ConnectionHandler.status(bad) == nil, "\(bad)") }
    }
}

/// An object that is not a ``PreparedRequest``.
final class ByteBufferAllocatorBox: Sendable {}
