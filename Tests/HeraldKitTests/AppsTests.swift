import Foundation
import HeraldCore
import HeraldHTTP2
import HeraldJSON
import HeraldKit
import HeraldSimulator
import HeraldTestSupport
import HeraldTesting
import Testing

/// Several apps in one pipeline (issue 30): routing by app and topic, one
/// JWT per team, one app's refused credential kept to that app.
@Suite("apps: several apps, each with its own endpoint and credentials")
struct AppsTests {
    static let teamA = (key: "KEYAAAAAAA", team: "TEAMAAAAAA")
    static let teamB = (key: "KEYBBBBBBB", team: "TEAMBBBBBB")

    /// Two simulator servers over TLS: "production" takes provider tokens of teams A (chat and
    /// widgets) and B (news), each team's for its own topics only; "sandbox" takes only
    /// connections with a client certificate from the test CA (legacy).
    struct Endpoints {
        let production: HTTP2SimulatorServer
        let sandbox: HTTP2SimulatorServer
        let dir: String

        static func start() async throws -> Endpoints {
            let dir = temporaryDirectory()
            for name in ["a", "b", "a-other"] {
                _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(dir)/\(name).p8"])
            }
            let a = try ProviderTokenKey(p8File: dir + "/a.p8", keyID: teamA.key, teamID: teamA.team)
            let b = try ProviderTokenKey(p8File: dir + "/b.p8", keyID: teamB.key, teamID: teamB.team)
            var p = HTTP2SimulatorConfiguration()
            p.teams = [
                .init(keyID: a.keyID, teamID: a.teamID, publicKeyPEM: a.publicKeyPEM, topics: ["com.a.chat", "com.a.widgets"]),
                .init(keyID: b.keyID, teamID: b.teamID, publicKeyPEM: b.publicKeyPEM, topics: ["com.b.news"]),
            ]
            p.recordsRequests = true
            let certs = sharedCertificates
            let production = try await HTTP2SimulatorServer.start(
                simulator: try HTTP2Simulator(configuration: p),
                tls: .server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: nil))
            var s = HTTP2SimulatorConfiguration()
            s.bundleID = "com.c.legacy"
            s.recordsRequests = true
            let sandbox = try await HTTP2SimulatorServer.start(
                simulator: try HTTP2Simulator(configuration: s),
                tls: .server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: .caFile(certs.caCertificate)))
            return Endpoints(production: production, sandbox: sandbox, dir: dir)
        }

        func stop() async {
            await production.stop()
            await sandbox.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }

        /// The configuration: four apps, two of team A sharing its key.
        func configuration(newsKey: String = "b.p8") -> String {
            let certs = sharedCertificates
            func endpoint(_ server: HTTP2SimulatorServer) -> String {
                #""host":"127.0.0.1","port":\#(server.port),"serverName":"localhost","caFile":"\#(certs.caCertificate)","maxStreams":10"#
            }
            func token(_ file: String, _ t: (key: String, team: String)) -> String {
                #""providerToken":{"keyFile":"\#(dir)/\#(file)","keyID":"\#(t.key)","teamID":"\#(t.team)"}"#
            }
            return #"""
            {"apps":[
              {"name":"chat","topics":["com.a.chat"],"transport":{"type":"http2",\#(endpoint(production)),\#(token("a.p8", teamA)),"connections":2}},
              {"name":"widgets","topics":["com.a.widgets"],"transport":{"type":"http2",\#(endpoint(production)),\#(token("a.p8", teamA))}},
              {"name":"news","topics":["com.b.news"],"transport":{"type":"http2",\#(endpoint(production)),\#(token(newsKey, teamB)),"connections":2}},
              {"name":"legacy","topics":["com.c.legacy"],"transport":{"type":"http2",\#(endpoint(sandbox)),
                "certificate":"\#(certs.clientCertificate)","key":"\#(certs.clientKey)"}}
            ]}
            """#
        }
    }

    static func configuration(_ text: String, in dir: String) throws -> HeraldConfiguration {
        let path = dir + "/herald-\(UUID().uuidString).json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try HeraldConfiguration.load(path: path)
    }

    /// Envelopes as the stages leave them (payload built), for `topics[i % topics.count]`.
    static func envelopes(_ range: Range<Int>, topics: [String?], app: (Int) -> String? = { _ in nil }) -> [Envelope] {
        range.map { i in
            var r = NotificationRequest(token: DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &+ i) }), id: UInt32(i))
            r.topic = topics[i % topics.count]
            r.app = app(i)
            r.aps.alert = Alert(body: "hello \(i)")
            var e = Envelope(sequence: UInt64(i), request: r)
            e.payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
            return e
        }
    }

    /// Hands `batch` to `transport` and waits until every one of it has its outcome.
    static func deliver(_ batch: [Envelope], _ transport: any Transport, _ ledger: OutcomeLedger) async throws {
        let before = ledger.snapshot.ended
        ledger.enter(batch.map(\.sequence), count: batch.count)
        try await transport.send(batch, outcomes: ledger)
        let deadline = ContinuousClock.now + .seconds(60)
        while ledger.snapshot.ended < before + UInt64(batch.count) {
            guard ContinuousClock.now < deadline else { throw AppsError("\(ledger.snapshot.ended - before) of \(batch.count) decided in 60 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("four apps (teams A and B with provider tokens, one certificate; production and sandbox): each request reaches its app's endpoint with its app's credentials, one JWT per team; revoking team B's key fails only news, with the reason")
    func threeTeamsTwoEndpoints() async throws {
        let endpoints = try await Endpoints.start()
        let assembly = try HeraldAssembly.configured(try Self.configuration(endpoints.configuration(), in: endpoints.dir))
        let transport = try #require(try assembly.transport() as? AppsTransport)
        #expect(transport.apps.map(\.name) == ["chat", "widgets", "news", "legacy"])
        let collector = OutcomeCollector()
        let ledger = OutcomeLedger(observers: [collector])

        // Routed by topic (the chat app's VoIP topic too), by app name alone, or to no app.
        let topics: [String?] = ["com.a.chat", "com.a.widgets", "com.b.news", "com.c.legacy", nil, "com.z.unknown"]
        let first = Self.envelopes(0..<600, topics: topics) { i in i % 6 == 4 ? ["chat", "news", "legacy", "nope"][(i / 6) % 4] : nil }
        try await Self.deliver(first, transport, ledger)
        let records = Dictionary(uniqueKeysWithValues: collector.records.map { ($0.sequence, $0) })
        #expect(records.count == 600)
        for e in first {
            let r = try #require(records[e.sequence])
            let expected: String? = switch e.request.topic {
            case "com.a.chat": "chat"
            case "com.a.widgets": "widgets"
            case "com.b.news": "news"
            case "com.c.legacy": "legacy"
            case nil: e.request.app == "nope" ? nil : e.request.app
            default: nil
            }
            if let expected {
                #expect(r.outcome == .accepted, "\(e.sequence) \(r.outcome)")
                #expect(r.app == expected)
            } else {
                guard case .dropped(let why) = r.outcome else { Issue.record("\(e.sequence): \(r.outcome)"); continue }
                #expect(why.code == .unknownApp)
                #expect(why.message.contains("nope") || why.message.contains("com.z.unknown"), "\(why.message)")
            }
        }
        // One outcome line names its app.
        #expect(String(decoding: try #require(records[0]).jsonLine, as: UTF8.self).contains(#""app":"chat""#))

        let production = endpoints.production.simulator, sandbox = endpoints.sandbox.simulator
        // Production saw teams A and B only, each on its own topics (else 400 TopicDisallowed): one JWT a team.
        #expect(production.counters.providerTokens.count == 2)
        #expect(Set(production.deliveredRequests.compactMap { $0[header: "apns-topic"] }) == ["com.a.chat", "com.a.widgets", "com.b.news"])
        let deliveredInProduction = production.deliveredRequests.count
        #expect(deliveredInProduction == 350)  // 100 a topic, and 25 each by name (chat, news)
        // The sandbox took certificate connections only (it requires one), for legacy alone.
        #expect(sandbox.deliveredRequests.count == 125)
        #expect(Set(sandbox.deliveredRequests.compactMap { $0[header: "apns-topic"] }) == ["com.c.legacy"])
        #expect(endpoints.sandbox.connections >= 1 && endpoints.sandbox.connectionErrors.isEmpty)

        // Team B's key is revoked: news fails with APNs' reason; the other apps go on.
        production.revokeKey(Self.teamB.key)
        let second = Self.envelopes(1000..<1400, topics: ["com.a.chat", "com.a.widgets", "com.b.news", "com.c.legacy"])
        try await Self.deliver(second, transport, ledger)
        await transport.finish(outcomes: ledger)
        let later = collector.records.filter { $0.sequence >= 1000 }
        #expect(later.count == 400)
        for r in later {
            if r.app == "news" {
                guard case .failed(let why) = r.outcome else { Issue.record("news \(r.sequence): \(r.outcome)"); continue }
                #expect(why.code == .credentialRejected && why.message.contains("InvalidProviderToken"), "\(why.message)")
            } else {
                #expect(r.outcome == .accepted, "\(r.app ?? "-") \(r.sequence): \(r.outcome)")
            }
        }
        #expect(later.filter { $0.app == "news" }.count == 100)
        let health = Dictionary(uniqueKeysWithValues: transport.appHealth.map { ($0.app, $0.health) })
        #expect(health["chat"] == .ready && health["legacy"] == .ready)
        if case .unavailable(let why)? = health["news"] { #expect(why.contains("InvalidProviderToken"), "\(why)") } else { Issue.record("news: \(String(describing: health["news"]))") }
        #expect(transport.health == .ready, "one app's credential does not take the others out of service")
        #expect(ledger.snapshot.isBalanced)
        await endpoints.stop()
    }

    @Test("a configuration error names the key: apps with transport, a shared topic, a binary transport, one key id with two keys, no topics")
    func configurationErrors() async throws {
        let endpoints = try await Endpoints.start()
        defer { Task { await endpoints.stop() } }
        let dir = endpoints.dir
        func failure(_ text: String) throws -> String {
            do {
                let c = try Self.configuration(text, in: dir)
                _ = try HeraldAssembly.configured(c).transport()
                return "no error"
            } catch { return "\(error)" }
        }
        let sim = #""transport":{"type":"http2-simulator"}"#
        #expect(try failure(#"{"transport":{"type":"simulator"},"apps":[{"name":"a","topics":["t"],\#(sim)}]}"#).contains("not both"))
        #expect(try failure(#"{"apps":[{"name":"a","topics":["t"],\#(sim)},{"name":"b","topics":["t"],\#(sim)}]}"#).contains("topic \"t\" belongs to both"))
        #expect(try failure(#"{"apps":[{"name":"a","topics":["t"],\#(sim)},{"name":"a","topics":["u"],\#(sim)}]}"#).contains("two apps are named"))
        #expect(try failure(#"{"apps":[{"name":"a","topics":["t"],"transport":{"type":"simulator"}}]}"#).contains("speaks HTTP/2"))
        #expect(try failure(#"{"apps":[{"name":"a b","topics":["t"],\#(sim)}]}"#).contains("apps[0].name"))
        #expect(try failure(#"{"apps":[{"name":"a",\#(sim)}]}"#).contains("apps[0].topics"))
        #expect(try failure(#"{"apps":[{"name":"a","topics":["t"]}]}"#).contains("apps[0].transport"))
        // Team B's key id given again with another key's file.
        #expect(try failure(endpoints.configuration(newsKey: "a-other.p8").replacingOccurrences(of: "KEYAAAAAAA", with: "KEYBBBBBBB").replacingOccurrences(of: "TEAMAAAAAA", with: "TEAMBBBBBB"))
            .contains("another .p8 file"))
    }

    @Test("herald send with two in-memory apps: outcome lines name the app; a request for no app is dropped with the reason; the rest carries on")
    func sendWithApps() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #"""
        {"outcomes":"outcomes.jsonl","apps":[
          {"name":"chat","topics":["com.a.chat"],"transport":{"type":"http2-simulator","bundleID":"com.a.chat"}},
          {"name":"news","topics":["com.b.news"],"transport":{"type":"http2-simulator","bundleID":"com.b.news"}}]}
        """#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        let token = String(repeating: "ab", count: 32)
        let lines = [
            #"{"id":1,"token":"\#(token)","topic":"com.a.chat","alert":"one"}"#,
            #"{"id":2,"token":"\#(token)","app":"news","alert":"two"}"#,
            #"{"id":3,"token":"\#(token)","topic":"com.z.other","alert":"three"}"#,
            #"{"id":4,"token":"\#(token)","app":"bad name","alert":"four"}"#,
            #"{"id":5,"token":"\#(token)","topic":"com.b.news","alert":"five"}"#,
        ]
        try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/in.jsonl", atomically: true, encoding: .utf8)
        let (status, _, stderr) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
        #expect(status == 0, "\(stderr)")
        let out = try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(out.count == 5)
        func line(_ id: Int) -> String { out.first { $0.contains(#""id":\#(id),"#) } ?? "" }
        #expect(line(1).contains(#""outcome":"accepted""#) && line(1).contains(#""app":"chat""#))
        #expect(line(2).contains(#""outcome":"accepted""#) && line(2).contains(#""app":"news""#))
        #expect(line(3).contains(#""outcome":"dropped""#) && line(3).contains("no app has topic") && line(3).contains(#""code":"unknown-app""#))
        #expect(line(4).contains(#""outcome":"dropped""#) && line(4).contains("app's name"))
        #expect(line(5).contains(#""outcome":"accepted""#) && line(5).contains(#""app":"news""#))
    }

    @Test("herald serve with apps: GET /v1/notifications/{id} names the app; /metrics counts each app's outcomes from the first scrape")
    func serveWithApps() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bearer = "an-apps-test-token-0123456789"
        try (bearer + "\n").write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens"},"apps":[
          {"name":"chat","topics":["com.a.chat"],"transport":{"type":"http2-simulator","bundleID":"com.a.chat"}},
          {"name":"news","topics":["com.b.news"],"transport":{"type":"http2-simulator","bundleID":"com.b.news"}}]}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
        defer { server.stopInBackground(interrupt: true) }
        let port = server.ready["port"] as! Int
        func request(_ method: String, _ path: String, body: String? = nil) async throws -> RawExchange {
            var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer \(bearer)\r\n"
            if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
            return try await rawHTTP(port: port, head + "\r\n" + (body ?? ""))
        }
        let first = try await request("GET", "/metrics")
        for app in ["chat", "news"] {
            #expect(first.body.contains(#"herald_app_outcomes_total{app="\#(app)",outcome="accepted"} 0"#), "\(first.body)")
        }
        let token = String(repeating: "ab", count: 32)
        let posted = try await request("POST", "/v1/notifications", body: #"""
            [{"token":"\#(token)","topic":"com.a.chat","alert":"a"},{"token":"\#(token)","app":"news","alert":"b"},
             {"token":"\#(token)","topic":"com.b.news","alert":"c"},{"token":"\#(token)","topic":"com.z.none","alert":"d"}]
            """#)
        #expect(posted.status == 202, "\(posted.text)")
        var metrics = ""
        for _ in 0..<200 {
            metrics = try await request("GET", "/metrics").body
            if metrics.contains(#"herald_outcomes_total{outcome="dropped"} 1"#) && metrics.contains(#"herald_outcomes_total{outcome="accepted"} 3"#) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(metrics.contains(#"herald_app_outcomes_total{app="chat",outcome="accepted"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"herald_app_outcomes_total{app="news",outcome="accepted"} 2"#), "\(metrics)")
        #expect(metrics.contains(#"herald_outcome_reasons_total{outcome="dropped",reason="unknown-app"} 1"#), "\(metrics)")
        // The ids the POST answered, in order: the first is chat's.
        let ids = posted.body.components(separatedBy: #""notification":"#).dropFirst().map { String($0.prefix(while: \.isNumber)) }
        let one = try await request("GET", "/v1/notifications/\(try #require(ids.first))")
        #expect(one.body.contains(#""app":"chat""#), "\(one.text)")
    }

    @Test("routing: a push type's topic suffix routes to its bundle's app; no topic and no app with one app goes to it")
    func routing() throws {
        final class Nowhere: Transport {
            func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {}
            func finish(outcomes: OutcomeLedger) async {}
            func shutdownRequested() {}
            func abandon(_ reason: String) {}
        }
        let two = try AppsTransport(apps: [.init(name: "chat", topics: ["com.a.chat"], transport: Nowhere()),
                                           .init(name: "news", topics: ["com.b.news"], transport: Nowhere())])
        var r = NotificationRequest(token: DeviceToken(bytes: [1]))
        r.topic = "com.a.chat.voip"
        #expect(try two.route(r).get() == 0)
        r.topic = "com.b.news.push-type.liveactivity"
        #expect(try two.route(r).get() == 1)
        r.topic = nil
        #expect((try? two.route(r).get()) == nil)
        let one = try AppsTransport(apps: [.init(name: "chat", topics: ["com.a.chat"], transport: Nowhere())])
        #expect(try one.route(r).get() == 0)
        #expect(PushType.bundleID(ofTopic: "com.a.chat.voip-ptt") == "com.a.chat")
        #expect(PushType.bundleID(ofTopic: "com.a.chat") == "com.a.chat")
        #expect(PushType.bundleID(ofTopic: ".voip") == ".voip")
    }
}
