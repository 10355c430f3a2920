import Foundation
import HeraldTestSupport
import HeraldTesting
import Testing

// MARK: - Broadcast pushes and channel management against code not written in Swift

private func interopScript(_ name: String) -> String {
    repositoryRoot().appendingPathComponent("Tests/Interop/" + name).path
}

private func number(_ value: Any?) -> Int? { (value as? NSNumber)?.intValue }

/// `[400, "Reason"]` as the Python scripts print it, as `"400 Reason"` (`"400 nil"` without a reason).
private func outcome(_ value: Any?) -> String {
    guard let pair = value as? [Any], pair.count == 2 else { return "not a [status, reason] pair: \(String(describing: value))" }
    return "\(number(pair[0]).map(String.init) ?? "nil") \(pair[1] as? String ?? "nil")"
}

/// The JSON objects of `text`, one a line (blank lines left out).
private func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

/// What `herald channels` printed and returned, one run per step.
private typealias HeraldRun = (status: Int32, stdout: String, stderr: String)
private struct ChannelsRuns {
    var create, list, read, delete, readAgain, listAgain, otherKey: HeraldRun
}

/// A P-256 provider token key in a PKCS#8 PEM `.p8` file, as Apple hands them out.
private func makeChannelsTokenKey(in directory: String) async throws -> String {
    let path = directory + "/AuthKey_KEY1234567.p8"
    _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
    return path
}

@Suite("Broadcasts and channel management against Python h2 (PyPI): its client vs herald simulate, herald channels vs its server",
       .serialized, .enabled(if: interopVenvPossible, "needs python3 with venv (Tests/Interop/setup.sh)"))
struct BroadcastInteropTests {
    @Test("h2_channels_client.py vs herald simulate --http2: create two channels, list, read, 50 broadcasts, unknown and missing channel ids, delete, then ChannelNotRegistered")
    func pythonClientAgainstSimulator() async throws {
        let python = try await interopPython()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try await makeChannelsTokenKey(in: dir)
        let certs = sharedCertificates
        let count = 50
        let simulator = try await ExternalServer.start(try heraldExecutable().path, [
            "simulate", "--http2", "--certs", certs.directory, "--token-key", key, "--key-id", "KEY1234567",
            "--team-id", "TEAM123456", "--bundle-id", "com.example.app",
        ])
        let port = number(simulator.ready["port"]) ?? -1
        let run = await catching {
            try await runProcess(URL(fileURLWithPath: python), [
                interopScript("h2_channels_client.py"), "--host", "127.0.0.1", "--port", "\(port)", "--server-name", "localhost",
                "--ca", certs.caCertificate, "--key-file", key, "--key-id", "KEY1234567", "--team-id", "TEAM123456",
                "--bundle-id", "com.example.app", "--count", "\(count)", "--timeout", "60",
            ])
        }
        let summary = await simulator.stop(interrupt: true)
        let r = try run.get()
        #expect(r.status == 0, "h2_channels_client.py exited with \(r.status): \(r.stderr)")
        let line = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            "h2_channels_client.py printed \(r.stdout.debugDescription), stderr \(r.stderr.debugDescription)")

        // Channel management: two channels, listed in creation order, each with its storage policy.
        let created = (report["created"] as? [Any] ?? []).compactMap { $0 as? String }
        #expect(created.count == 2 && Set(created).count == 2 && created.allSatisfy { !$0.isEmpty }, "\(report)")
        #expect((report["create_statuses"] as? [Any] ?? []).compactMap(number) == [201, 201], "\(report)")
        #expect((report["listed"] as? [Any] ?? []).compactMap { $0 as? String } == created, "\(report)")
        let read = report["read"] as? [String: Any] ?? [:]
        #expect(number(read["status"]) == 200 && read["channel"] as? String == created.last, "\(read)")
        #expect(number(read["message-storage-policy"]) == 1 && read["push-type"] as? String == "LiveActivity", "\(read)")
        let readFirst = report["read_first"] as? [String: Any] ?? [:]
        #expect(number(readFirst["status"]) == 200 && number(readFirst["message-storage-policy"]) == 0, "\(readFirst)")
        #expect(outcome(report["bad_body"]) == "400 BadRequestParams", "\(report)")
        #expect(outcome(report["read_missing_id"]) == "400 MissingChannelId", "\(report)")
        #expect(outcome(report["read_bad_id"]) == "400 BadChannelId", "\(report)")
        #expect(outcome(report["other_app_channels"]) == "403 TopicMismatch", "\(report)")

        // Broadcasts: all delivered to the channel; the refused ones say why.
        #expect(number(report["broadcasts"]) == count, "\(report)")
        #expect(report["broadcast_statuses"] as? [String: Int] == ["200": count], "\(report)")
        #expect(report["unknown"] as? String == "ChannelNotRegistered" && number(report["unknown_status"]) == 400, "\(report)")
        #expect(report["missing"] as? String == "MissingChannelId" && number(report["missing_status"]) == 400, "\(report)")
        #expect(outcome(report["other_app"]) == "403 TopicMismatch", "\(report)")
        #expect(outcome(report["wrong_push_type"]) == "400 InvalidPushType", "\(report)")
        #expect(outcome(report["too_large"]) == "413 PayloadTooLarge", "\(report)")

        // After the delete: the channel is gone for broadcasts and for reads; the other one stays.
        #expect(number(report["deleted"]) == 204, "\(report)")
        #expect(report["after_delete"] as? String == "ChannelNotRegistered" && number(report["after_delete_status"]) == 400, "\(report)")
        #expect(outcome(report["read_after_delete"]) == "404 ChannelNotRegistered", "\(report)")
        #expect((report["listed_after_delete"] as? [Any] ?? []).compactMap { $0 as? String } == Array(created.suffix(1)), "\(report)")

        // Every answer carried the request's own apns-request-id back, none a device push's apns-id.
        let requests = number(report["requests"]) ?? -1
        #expect(report["request_ids_echoed"] as? Bool == true, "\(report)")
        #expect(report["request_ids"] as? [String: Int] == ["echoed": requests, "missing": 0, "mismatched": 0], "\(report)")
        #expect(number(report["answers_with_apns_id"]) == 0, "\(report)")
        // A token connection starts at one stream and opens up once the token was accepted.
        let limits = (report["limits"] as? [Any] ?? []).compactMap(number)
        #expect(limits.first == 1 && (limits.max() ?? 0) > 1, "\(report)")

        // The simulator's side: exactly the broadcasts to the live channel were delivered; one channel left.
        #expect(number(summary["broadcasts"]) == count && number(summary["delivered"]) == count, "\(summary)")
        #expect(number(summary["channels"]) == 1, "\(summary)")
        #expect(number(summary["channel_requests"]) == 12, "\(summary)")
        #expect(number(summary["requests"]) == requests && number(summary["duplicates"]) == 0, "\(summary)")
        #expect(number(summary["connections"]) == 1 && number(summary["provider_tokens"]) == 1 && number(summary["errors"]) == 0, "\(summary)")
    }

    @Test("herald channels vs h2_channels_server.py: create (policy 1), list, read, delete, read again fails ChannelNotRegistered; the server verified every JWT; another key is refused")
    func heraldChannelsAgainstPythonServer() async throws {
        let python = try await interopPython()
        let dir = temporaryDirectory()
        let otherDir = temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: otherDir)
        }
        let key = try await makeChannelsTokenKey(in: dir)
        let otherKey = try await makeChannelsTokenKey(in: otherDir)
        let certs = sharedCertificates
        let server = try await ExternalServer.start(python, [
            interopScript("h2_channels_server.py"), "--cert", certs.serverCertificate, "--key", certs.serverKey,
            "--token-key", key, "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--bundle-id", "com.example.app",
            "--host", "127.0.0.1", "--port", "0", "--max-seconds", "300",
        ])
        let port = number(server.ready["port"]) ?? -1
        func writeConfig(_ path: String, key: String) throws {
            try """
            {"transport":{"type":"http2","host":"127.0.0.1","port":\(port),"serverName":"localhost","caFile":"\(certs.caCertificate)",
                          "topic":"com.example.app",
                          "providerToken":{"keyFile":"\(key)","keyID":"KEY1234567","teamID":"TEAM123456"}}}
            """.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let config = dir + "/herald.json", otherConfig = otherDir + "/herald.json"

        let runs = await catching { () async throws -> ChannelsRuns in
            try writeConfig(config, key: key)
            try writeConfig(otherConfig, key: otherKey)
            let channels = ["channels"]
            let common = ["--config", config, "--bundle-id", "com.example.app"]
            let create = try await runHerald(channels + ["create"] + common + ["--storage-policy", "1"])
            let id = jsonLines(create.stdout).first?["channelId"] as? String ?? "missing-channel-id"
            return ChannelsRuns(
                create: create,
                list: try await runHerald(channels + ["list"] + common),
                read: try await runHerald(channels + ["read"] + common + ["--channel-id", id]),
                delete: try await runHerald(channels + ["delete"] + common + ["--channel-id", id]),
                readAgain: try await runHerald(channels + ["read"] + common + ["--channel-id", id]),
                listAgain: try await runHerald(channels + ["list"] + common),
                otherKey: try await runHerald(channels + ["list", "--config", otherConfig, "--bundle-id", "com.example.app"]))
        }
        let summary = await server.stop(interrupt: true)
        let r = try runs.get()

        #expect(r.create.status == 0, "\(r.create.stderr)")
        let created = jsonLines(r.create.stdout)
        #expect(created.count == 1 && created.first?["created"] as? Bool == true, "\(r.create.stdout)")
        let id = try #require(created.first?["channelId"] as? String, "create printed \(r.create.stdout.debugDescription)")
        #expect(!id.isEmpty && Data(base64Encoded: id) != nil, "the id is base64: \(id)")

        #expect(r.list.status == 0, "\(r.list.stderr)")
        #expect(jsonLines(r.list.stdout).compactMap { $0["channelId"] as? String } == [id], "\(r.list.stdout)")

        #expect(r.read.status == 0, "\(r.read.stderr)")
        let read = jsonLines(r.read.stdout)
        #expect(read.count == 1, "\(r.read.stdout)")
        #expect(read.first?["channelId"] as? String == id && number(read.first?["storagePolicy"]) == 1, "\(r.read.stdout)")
        #expect(read.first?["pushType"] as? String == "LiveActivity", "\(r.read.stdout)")

        #expect(r.delete.status == 0, "\(r.delete.stderr)")
        let deleted = jsonLines(r.delete.stdout)
        #expect(deleted.first?["channelId"] as? String == id && deleted.first?["deleted"] as? Bool == true, "\(r.delete.stdout)")

        #expect(r.readAgain.status != 0, "reading a deleted channel must fail: \(r.readAgain.stdout)")
        #expect(r.readAgain.stderr.contains("404") && r.readAgain.stderr.contains("ChannelNotRegistered"), "\(r.readAgain.stderr)")
        #expect(jsonLines(r.readAgain.stdout).isEmpty, "\(r.readAgain.stdout)")

        #expect(r.listAgain.status == 0 && jsonLines(r.listAgain.stdout).isEmpty, "no channel left: \(r.listAgain.stdout) \(r.listAgain.stderr)")

        #expect(r.otherKey.status != 0, "a token signed by another key must be refused: \(r.otherKey.stdout)")
        #expect(r.otherKey.stderr.contains("403") && r.otherKey.stderr.contains("InvalidProviderToken"), "\(r.otherKey.stderr)")
        for secret in ["eyJ", "BEGIN PRIVATE KEY"] {
            #expect(![r.create, r.list, r.read, r.delete, r.readAgain, r.listAgain, r.otherKey].contains { $0.stderr.contains(secret) || $0.stdout.contains(secret) },
                    "no JWT or key in herald's output")
        }

        // The server's side: every call authenticated by a JWT it verified with the key's public half,
        // each with a UUID apns-request-id; one connection per call; the channel gone at the end.
        #expect(number(summary["requests"]) == 7, "\(summary)")
        let auth = summary["auth"] as? [String: Int] ?? [:]
        #expect(auth["verified"] == 6 && auth["failures"] == 1 && auth["missing"] == 0 && auth["expired"] == 0, "\(summary)")
        #expect(summary["reasons"] as? [String: Int] == ["ChannelNotRegistered": 1, "InvalidProviderToken": 1], "\(summary)")
        #expect(summary["request_ids"] as? [String: Int] == ["uuid": 7, "missing": 0, "invalid": 0], "\(summary)")
        #expect(summary["operations"] as? [String: Int] == ["create": 1, "list": 3, "read": 2, "delete": 1], "\(summary)")
        #expect(summary["methods"] as? [String: Int] == ["POST": 1, "GET": 5, "DELETE": 1], "\(summary)")
        #expect(summary["statuses"] as? [String: Int] == ["201": 1, "200": 3, "204": 1, "404": 1, "403": 1], "\(summary)")
        #expect(number(summary["created"]) == 1 && number(summary["deleted"]) == 1 && number(summary["channels"]) == 0, "\(summary)")
        let headers = Set((summary["headers_seen"] as? [Any] ?? []).compactMap { $0 as? String })
        #expect(headers.isSuperset(of: ["authorization", "apns-request-id", "apns-channel-id"]), "\(summary)")
        #expect((summary["authorities"] as? [Any] ?? []).compactMap { $0 as? String } == ["localhost"], "\(summary)")
        #expect((summary["schemes"] as? [Any] ?? []).compactMap { $0 as? String } == ["https"], "\(summary)")
        #expect(number(summary["connections"]) == 7, "\(summary)")
        #expect(number(summary["alpn_failures"]) == 0 && number(summary["handshake_failures"]) == 0 && number(summary["protocol_errors"]) == 0, "\(summary)")
    }
}
