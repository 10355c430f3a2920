import Foundation
import HeraldCore
import HeraldHTTP2Transport
import HeraldOpenSSL
import HeraldTestSupport
import Testing

@testable import HeraldHTTP2

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - herald simulate --http2 against a Python HTTP/2 client (PyPI h2)

/// A fresh provider token key, as Apple hands it out: a P-256 key in a PKCS#8 PEM `.p8` file.
private func makeTokenKey(in directory: String, name: String) async throws -> String {
    let path = directory + "/" + name
    _ = try await runCommand("/bin/sh", ["-c", "openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", path])
    return path
}

/// Runs `body` with `herald simulate --http2` serving token authentication for `key`;
/// stops it (SIGINT) whatever `body` does and returns what `body` returned and the simulator's last line.
private func withHTTP2Simulator<T>(
    tokenKey key: String, extra: [String] = [], _ body: (_ port: Int) async throws -> T
) async throws -> (T, summary: [String: Any]) {
    let certs = sharedCertificates
    let simulator = try await ExternalServer.start(try heraldExecutable().path, [
        "simulate", "--http2", "--certificate", certs.serverCertificate, "--key", certs.serverKey, "--client-ca", certs.caCertificate,
        "--token-key", key, "--key-id", "KEY1234567", "--team-id", "TEAM123456",
    ] + extra)
    let result: Result<T, any Error>
    do { result = .success(try await body(simulator.ready["port"] as? Int ?? -1)) } catch { result = .failure(error) }
    let summary = await simulator.stop(interrupt: true)
    return (try result.get(), summary)
}

/// Runs `Tests/Interop/h2_client.py` and returns its JSON line.
private func runH2Client(python: String, port: Int, key: String, count: Int, extra: [String] = []) async throws -> [String: Any] {
    let script = repositoryRoot().appendingPathComponent("Tests/Interop/h2_client.py").path
    let output = try await runCommand(python, [
        script, "--host", "127.0.0.1", "--port", "\(port)", "--server-name", "localhost", "--ca", sharedCertificates.caCertificate,
        "--key-file", key, "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--topic", "com.example.app",
        "--count", "\(count)", "--timeout", "120",
    ] + extra)
    let line = output.split(separator: "\n").last.map(String.init) ?? ""
    return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "h2_client.py printed \(output)")
}

private func int(_ value: Any?) -> Int? { (value as? NSNumber)?.intValue }

@Suite("herald simulate --http2 against a Python HTTP/2 client (PyPI h2)", .serialized,
       .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct H2ClientInteropTests {
    @Test("500 requests from h2: a BadDeviceToken, an Unregistered with its timestamp, the rest 200 with their apns-id; the stream limit rises from 1; nothing twice")
    func fiveHundred() async throws {
        let python = try await interopPython()
        let dir = temporaryDirectory()
        let key = try await makeTokenKey(in: dir, name: "AuthKey_KEY1234567.p8")
        let bad = String(repeating: "ba", count: 32), dead = String(repeating: "de", count: 32)
        let started = Int(Date().timeIntervalSince1970 * 1000)
        let (report, summary) = try await withHTTP2Simulator(tokenKey: key, extra: ["--bad-token", bad, "--unregistered-token", dead]) { port in
            try await runH2Client(python: python, port: port, key: key, count: 500, extra: ["--token-at", "100:\(bad)", "--token-at", "400:\(dead)"])
        }
        let finished = Int(Date().timeIntervalSince1970 * 1000)

        #expect(int(report["sent"]) == 500 && int(report["answered"]) == 500 && int(report["unanswered"]) == 0, "\(report)")
        #expect(report["statuses"] as? [String: Int] == ["200": 498, "400": 1, "410": 1], "\(report)")
        #expect(report["reasons"] as? [String: Int] == ["BadDeviceToken": 1, "Unregistered": 1], "\(report)")
        #expect(report["apns_ids"] as? [String: Int] == ["echoed": 500, "missing": 0, "mismatched": 0], "\(report)")
        let errors = report["errors"] as? [[String: Any]] ?? []
        #expect(errors.count == 2, "\(errors)")
        if errors.count == 2 {
            #expect(int(errors[0]["index"]) == 100 && errors[0]["token"] as? String == bad)
            #expect(int(errors[0]["status"]) == 400 && errors[0]["reason"] as? String == "BadDeviceToken")
            #expect(errors[0]["timestamp"] is NSNull)
            #expect(int(errors[1]["index"]) == 400 && errors[1]["token"] as? String == dead)
            #expect(int(errors[1]["status"]) == 410 && errors[1]["reason"] as? String == "Unregistered")
            // In milliseconds: the simulator marks the token dead when it starts.
            let timestamp = int(errors[1]["timestamp"]) ?? -1
            #expect(timestamp >= started - 1000 && timestamp <= finished, "410 timestamp \(timestamp), run \(started)...\(finished)")
        }
        // One stream until the token was accepted, then the announced limit, honoured.
        let limits = (report["limits"] as? [Any] ?? []).compactMap(int)
        #expect(limits.first == 1 && (limits.max() ?? 0) > 1 && report["limit_rose"] as? Bool == true, "\(report)")
        #expect(int(report["max_in_flight_at_limit_1"]) == 1 && (int(report["max_in_flight"]) ?? 0) > 1, "\(report)")
        #expect(int(report["connections"]) == 1 && int(report["goaways"]) == 0 && int(report["resent"]) == 0, "\(report)")

        #expect(int(summary["requests"]) == 500 && int(summary["delivered"]) == 498 && int(summary["duplicates"]) == 0, "\(summary)")
        #expect(int(summary["connections"]) == 1 && int(summary["provider_tokens"]) == 1 && int(summary["errors"]) == 0, "\(summary)")
    }

    @Test("a token signed by another key: 403 InvalidProviderToken, one stream at a time, nothing delivered")
    func otherKey() async throws {
        let python = try await interopPython()
        let dir = temporaryDirectory()
        let key = try await makeTokenKey(in: dir, name: "AuthKey_KEY1234567.p8")
        let other = try await makeTokenKey(in: dir, name: "other.p8")
        let (report, summary) = try await withHTTP2Simulator(tokenKey: key) { port in
            try await runH2Client(python: python, port: port, key: other, count: 3)
        }
        #expect(int(report["answered"]) == 3 && report["statuses"] as? [String: Int] == ["403": 3], "\(report)")
        #expect(report["reasons"] as? [String: Int] == ["InvalidProviderToken": 3], "\(report)")
        #expect((report["limits"] as? [Any] ?? []).compactMap(int) == [1] && int(report["max_in_flight"]) == 1, "\(report)")
        #expect(int(summary["requests"]) == 3 && int(summary["delivered"]) == 0 && int(summary["provider_tokens"]) == 0, "\(summary)")
    }
}

// MARK: - The HTTP/2 transport against nginx

private struct NginxError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// nginx (Debian's package), started by a test as a plain HTTP/2 server over
/// TLS: its own configuration and prefix in a temporary directory, one
/// process (`master_process off`, `daemon off`), `return 200` for everything,
/// echoing `apns-id`, and an access log of method, path, `apns-id`, status,
/// connection and the request's number on it. It runs under `timeout`, so it
/// goes away even if the test process dies; ``stop()`` ends it sooner.
final class NginxServer: @unchecked Sendable {
    // @unchecked: `stopped` is only touched by the one test that owns the server.
    static let executable: String? = {
        if FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") { return "/usr/sbin/nginx" }
        return ExternalServer.which("nginx")
    }()

    var pid: pid_t = 0
    let directory: String
    let port: Int
    var stopped = false
    var exited = false
    var accessLog: String { directory + "/access.log" }
    var errorLog: String { directory + "/error.log" }

    init(keepaliveRequests: Int) throws {
        guard let nginx = Self.executable else { throw NginxError("no nginx") }
        directory = temporaryDirectory()
        port = try freePort()
        let certs = sharedCertificates
        let d = directory
        // HERALD_NGINX_LOG_LEVEL=debug: every frame nginx reads and writes, in error.log (Debian builds nginx --with-debug).
        let level = ProcessInfo.processInfo.environment["HERALD_NGINX_LOG_LEVEL"] ?? "notice"
        let config = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(d)/nginx.pid;
            error_log \(d)/error.log \(level);
            events { worker_connections 64; }
            http {
                client_body_temp_path \(d)/client_body;
                proxy_temp_path \(d)/proxy;
                fastcgi_temp_path \(d)/fastcgi;
                uwsgi_temp_path \(d)/uwsgi;
                scgi_temp_path \(d)/scgi;
                log_format apns '$request_method $uri $http_apns_id $status $connection $connection_requests';
                access_log \(d)/access.log apns;
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(certs.serverCertificate);
                    ssl_certificate_key \(certs.serverKey);
                    keepalive_requests \(keepaliveRequests);
                    location / {
                        add_header apns-id $http_apns_id always;
                        return 200;
                    }
                }
            }

            """
        try config.write(toFile: d + "/nginx.conf", atomically: true, encoding: .utf8)
        let arguments = ["-p", d, "-c", d + "/nginx.conf", "-e", d + "/error.log"]
        if let timeout = ExternalServer.which("timeout") {
            pid = try spawnWithSignalsUnblocked(timeout, ["--signal=TERM", "--kill-after=5", "600", nginx] + arguments)
        } else {
            pid = try spawnWithSignalsUnblocked(nginx, arguments)
        }
        let deadline = Date().addingTimeInterval(10)
        while true {
            // Listening, and nginx is what listens (a port taken meanwhile by another test ends nginx at once).
            if canConnect(port) {
                usleep(50_000)
                if isRunning && !bindFailed { break }
            }
            if !isRunning || bindFailed || Date() > deadline {
                stop()
                let log = (try? String(contentsOfFile: d + "/error.log", encoding: .utf8)) ?? ""
                throw NginxError("nginx did not start on port \(port): \(log)")
            }
            usleep(20_000)
        }
    }

    /// nginx could not listen (it says so at once, then tries four more times before it gives up).
    var bindFailed: Bool {
        ((try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? "").contains("bind() to")
    }

    /// Whether the process is still there (reaps it when it is not).
    var isRunning: Bool {
        guard !exited else { return false }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid || (r < 0 && errno == ECHILD) { exited = true }
        return !exited
    }

    /// Ends nginx (SIGTERM: a fast shutdown, `timeout` passes it on), at most once.
    func stop() {
        guard !stopped else { return }
        stopped = true
        if isRunning { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while isRunning && Date() < deadline { usleep(10_000) }
        if isRunning {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
    }

    deinit { stop() }
}


@Suite("HTTP/2 transport against nginx", .serialized,
       .enabled(if: NginxServer.executable != nil, "needs nginx (apt-get install nginx)"))
struct NginxInteropTests {
    struct Run {
        var snapshot: LedgerSnapshot
        var statistics: HTTP2TransportStatistics
        var records: [OutcomeRecord]
        /// The access log's POST lines to /3/device/: apns-id → times, and the most requests nginx took on one connection.
        var logged: [String: Int]
        var posts: Int
        var mostOnOneConnection: Int
        /// nginx's directory (configuration, access.log, error.log), for a look after a failure.
        var directory: String
    }

    /// nginx on a free port; tried again on another if one was taken between choosing and binding it.
    static func startNginx(keepaliveRequests: Int) throws -> NginxServer {
        var attempt = 1
        while true {
            do { return try NginxServer(keepaliveRequests: keepaliveRequests) } catch where attempt < 3 { attempt += 1 }
        }
    }

    static func run(count: Int, keepaliveRequests: Int) async throws -> Run {
        let nginx = try startNginx(keepaliveRequests: keepaliveRequests)
        defer { nginx.stop() }
        var config = HTTP2TransportConfiguration(
            host: "127.0.0.1", port: nginx.port, tls: .client(identity: nil, trust: .caFile(sharedCertificates.caCertificate)))
        config.serverName = "localhost"
        config.defaultTopic = "com.example.app"
        config.delivery.connections = 1
        config.fastLaneConnection = false  // one connection: the tests below count on it
        // Debug builds of swift-nio check their ring buffers' invariants on every change (O(n)).
        config.maxStreamsPerConnection = 10
        config.delivery.backoff = BackoffPolicy(initial: .milliseconds(20), maximum: .milliseconds(200))
        // A loaded CI machine (`swift test --parallel` on two cores) must not turn slow answers into resends.
        config.delivery.requestTimeout = .seconds(60)
        // The drain's deadline counts from the last enqueue, with up to maxQueued (16,384) requests still
        // to go: on a loaded machine that took more than 120 s once. A stall still fails the run: the
        // request timeout fires and `timeouts == 0` below does not hold.
        config.drainTimeout = .seconds(900)
        let transport = try HTTP2Transport(configuration: config, group: http2TestGroup)
        let (ledger, collector) = try await sendAll(try alertEnvelopes(count), through: transport)
        nginx.stop()  // writes out the access log

        var logged: [String: Int] = [:]
        var posts = 0, most = 0
        let log = try String(contentsOfFile: nginx.accessLog, encoding: .utf8)
        for line in log.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: false)
            guard f.count == 6, f[0] == "POST", f[1].hasPrefix("/3/device/") else { continue }
            posts += 1
            logged[String(f[2]), default: 0] += 1
            most = max(most, Int(f[5]) ?? 0)
        }
        return Run(snapshot: ledger.snapshot, statistics: transport.statistics, records: collector.records,
                   logged: logged, posts: posts, mostOnOneConnection: most, directory: nginx.directory)
    }

    /// What holds for every run: all accepted, each request in nginx's log exactly once under its apns-id.
    static func checkDelivered(_ r: Run, count: Int) {
        #expect(r.snapshot.isBalanced && r.snapshot.entered == UInt64(count), "\(r.snapshot)")
        #expect(r.snapshot.accepted == UInt64(count), "\(r.snapshot); \(r.records.first { $0.outcome != .accepted }.map { "\($0.outcome)" } ?? "")")
        #expect(r.posts == count, "nginx logged \(r.posts) POSTs to /3/device/")
        let ids = Set(r.records.compactMap(\.apnsID))
        #expect(ids.count == count && r.records.allSatisfy { $0.apnsID?.count == 36 })
        #expect(Set(r.logged.keys) == ids, "the apns-ids nginx logged are the ones sent")
        #expect(r.logged.values.allSatisfy { $0 == 1 }, "\(r.logged.filter { $0.value > 1 }.count) apns-ids logged more than once")
        #expect(r.statistics.timeouts == 0 && r.statistics.connectFailures == 0, "\(r.statistics); nginx's logs in \(r.directory)")
    }

    @Test("20,000 requests at full speed on one connection: all 200, each in nginx's log once")
    func oneConnection() async throws {
        let count = 20_000
        let r = try await HeavyTestGate.shared.run { try await Self.run(count: count, keepaliveRequests: 100_000) }
        Self.checkDelivered(r, count: count)
        #expect(r.statistics.connections == 1 && r.statistics.goAways == 0, "\(r.statistics)")
        #expect(r.statistics.streams == count && r.mostOnOneConnection == count, "\(r.statistics)")
        #expect(r.statistics.resentUnanswered == 0 && r.statistics.resentUnprocessed == 0, "\(r.statistics)")
    }

    @Test("20,000 requests with keepalive_requests 1000: nginx's GOAWAY after every 1,000, the transport moves on, nothing lost or twice")
    func goAwayEveryThousand() async throws {
        let count = 20_000
        let r = try await HeavyTestGate.shared.run { try await Self.run(count: count, keepaliveRequests: 1000) }
        Self.checkDelivered(r, count: count)
        #expect(r.statistics.goAways >= count / 1000 - 1, "\(r.statistics)")
        #expect(r.statistics.connections >= count / 1000, "\(r.statistics)")
        #expect(r.mostOnOneConnection == 1000, "nginx took at most keepalive_requests on a connection")
        // Streams above the GOAWAY's last id go again as unprocessed. Nothing nginx took was left
        // unanswered, so nothing counts as a possible duplicate: sends the delivery machine decided in
        // the read that also closed the connection were never written and come back unprocessed.
        #expect(r.statistics.resentUnanswered == 0, "\(r.statistics)")
    }
}
