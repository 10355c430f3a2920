import Foundation
import HeraldTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `examples/ShopNotifier`, a Hummingbird 2 app sending through
/// `HeraldClient`, run as its README says: against `herald simulate --http2`
/// over TLS with a provider token, a request per order, then SIGTERM.
///
/// The app is the package's own build of it (`ShopNotifierExample`, from the
/// same source file), so its dependencies are compiled once; its package
/// (examples/ShopNotifier/Package.swift), copied to a temporary folder, is
/// loaded against this checkout (`swift package show-dependencies`: every product it
/// names from Herald must exist). `HERALD_PLUGIN_SAMPLE=0` skips it with the
/// plugin sample (the nested SwiftPM run resolves Herald's dependencies again).
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["HERALD_PLUGIN_SAMPLE"] != "0", "HERALD_PLUGIN_SAMPLE=0"))
struct ExampleAppTests {
    @Test(.timeLimit(.minutes(20)))
    func shopNotifierSendsAPushPerRequest() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("herald-example-app-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let package = folder.appendingPathComponent("ShopNotifier"), scratch = folder.appendingPathComponent("scratch")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: repositoryRoot().appendingPathComponent("examples/ShopNotifier"), to: package)
        try? FileManager.default.removeItem(at: package.appendingPathComponent(".build"))
        let start = ContinuousClock.now
        let loaded = try await runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["HERALD_PATH=\(repositoryRoot().path)", "swift", "package", "--package-path", package.path, "--scratch-path", scratch.path, "show-dependencies"])
        print("ShopNotifier: swift package show-dependencies exited \(loaded.status) after \(ContinuousClock.now - start)")
        try #require(loaded.status == 0 && loaded.stdout.contains("hummingbird"), "\((loaded.stdout + loaded.stderr).suffix(4000))")

        // The simulator over TLS, with token authentication, one token it calls bad and one it calls unregistered.
        let dir = folder.path
        let herald = try heraldExecutable().path
        _ = try await runCommand(herald, ["certs", dir + "/certs"])
        _ = try await runCommand("/bin/sh", ["-c", "openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", dir + "/AuthKey.p8"])
        chmod(dir + "/AuthKey.p8", 0o600)
        let good = String(repeating: "0a", count: 32), bad = String(repeating: "bd", count: 32), gone = String(repeating: "9e", count: 32)
        let simulator = try await ExternalServer.start(herald, [
            "simulate", "--http2", "--port", "0", "--certs", dir + "/certs", "--token-key", dir + "/AuthKey.p8",
            "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--bad-token", bad, "--unregistered-token", gone,
        ])
        let simulatorPort = simulator.ready["port"] as! Int
        try """
            {"transport": {"type": "http2", "host": "127.0.0.1", "port": \(simulatorPort), "serverName": "localhost", "caFile": "certs/ca.pem",
                           "topic": "com.example.app",
                           "providerToken": {"keyFile": "AuthKey.p8", "keyID": "KEY1234567", "teamID": "TEAM123456"}}}
            """.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)

        let app = try await ExternalServer.start(try builtExecutable("ShopNotifierExample").path, [dir + "/herald.json", "0"])
        let port = app.ready["port"] as! Int
        func shipped(_ order: Int, _ device: String) async throws -> [String: Any] {
            let body = #"{"device":"\#(device)"}"#
            let r = try await rawHTTP(port: port, """
                POST /orders/\(order)/shipped HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n\
                Content-Length: \(body.utf8.count)\r\n\r\n\(body)
                """, timeout: 30)
            #expect(r.status == 200, "\(r.text)")
            return (try? JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any]) ?? [:]
        }
        let accepted = try await shipped(42, good)
        #expect(accepted["outcome"] as? String == "accepted" && (accepted["apnsId"] as? String)?.count == 36 && accepted["order"] as? String == "42", "\(accepted)")
        let refused = try await shipped(43, bad)
        #expect(refused["outcome"] as? String == "rejected" && refused["forget"] as? String == "true", "\(refused)")
        let dead = try await shipped(44, gone)
        #expect(dead["outcome"] as? String == "rejected" && dead["reason"] as? String == "Unregistered" && dead["forget"] as? String == "true", "\(dead)")
        let again = try await shipped(45, gone)
        #expect(again["outcome"] as? String == "suppressed" && again["forget"] as? String == "true", "the 410 was learned: \(again)")

        kill(app.processIdentifier, SIGTERM)
        await app.stop()
        let counters = await simulator.stop(interrupt: true)
        #expect(counters["delivered"] as? Int == 1, "one delivered: \(counters)")
    }
}
