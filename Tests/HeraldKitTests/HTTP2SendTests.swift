import Foundation
import HeraldTestSupport
import Testing

@Suite("herald send over HTTP/2: the in-memory simulator, and herald simulate --http2 over TLS")
struct HTTP2SendTests {
    @Test("a .p8 key signs the JWT the simulator verifies; outcome lines carry status, reason, apnsId and 410's timestamp; the 410 reaches the token store")
    func send() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/AuthKey.p8"])
        let good = String(repeating: "ab", count: 32), bad = String(repeating: "cd", count: 32), gone = String(repeating: "ef", count: 32)
        try #"""
        {"outcomes":"outcomes.jsonl","tokens":{"path":"tokens.db"},
         "transport":{"type":"http2-simulator","bundleID":"com.example.app","connections":2,
                      "providerToken":{"keyFile":"AuthKey.p8","keyID":"KEY1234567","teamID":"TEAM123456"},
                      "invalidTokens":["\#(bad)"],"unregisteredTokens":["\#(gone)"],
                      "faults":{"seed":3,"goAway":0.01,"unavailable":0.01}}}
        """#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        var lines = (0..<200).map { #"{"id":\#($0),"token":"\#(good)","topic":"com.example.app","alert":"hi \#($0)"}"# }
        lines.append(#"{"id":900,"token":"\#(bad)","topic":"com.example.app","alert":"x"}"#)
        lines.append(#"{"id":901,"token":"\#(gone)","topic":"com.example.app","alert":"x"}"#)
        lines.append(#"{"id":902,"token":"\#(good)","topic":"com.example.app","content-available":1,"priority":10,"push-type":"background"}"#)
        // Size: the HTTP/2 profile (4096) without a configured one; VoIP pushes up to 5120.
        func body(_ n: Int) -> String { String(repeating: "x", count: n) }
        lines.append(#"{"id":903,"token":"\#(good)","topic":"com.example.app","alert":"\#(body(3000))"}"#)
        lines.append(#"{"id":904,"token":"\#(good)","topic":"com.example.app","alert":"\#(body(4200))"}"#)
        lines.append(#"{"id":905,"token":"\#(good)","topic":"com.example.app","push-type":"voip","alert":"\#(body(4500))"}"#)
        lines.append(#"{"id":906,"token":"\#(good)","topic":"com.example.app","push-type":"voip","alert":"\#(body(5300))"}"#)
        // HTTP/2 takes tokens of any length: the binary interface's 32-byte rule (its framer) is not applied.
        lines.append(#"{"id":907,"token":"\#(String(repeating: "5a", count: 100))","topic":"com.example.app","alert":"long token"}"#)
        try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/in.jsonl", atomically: true, encoding: .utf8)
        let (status, _, stderr) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
        #expect(status == 0, "rejections are outcomes, not failures: \(stderr)")
        let outcomes = try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(outcomes.count == 208)
        #expect(outcomes.filter { $0.contains(#""outcome":"accepted""#) && $0.contains(#""apnsId":""#) }.count == 203)
        for (id, outcome) in [(903, "accepted"), (904, "dropped"), (905, "accepted"), (906, "dropped"), (907, "accepted")] {
            #expect(outcomes.contains { $0.contains(#""id":\#(id),"#) && $0.contains(#""outcome":"\#(outcome)""#) }, "id \(id)")
        }
        #expect(outcomes.contains { $0.contains(#""id":904,"#) && $0.contains("over the limit of 4096") })
        #expect(outcomes.contains { $0.contains(#""id":906,"#) && $0.contains("over the limit of 5120") })
        #expect(outcomes.contains { $0.contains(#""id":900"#) && $0.contains(#""status":400,"reason":"BadDeviceToken""#) })
        #expect(outcomes.contains { $0.contains(#""id":901"#) && $0.contains(#""status":410,"reason":"Unregistered""#) && $0.contains(#""timestamp":"#) })
        #expect(outcomes.contains { $0.contains(#""id":902"#) && $0.contains(#""outcome":"dropped""#) })
        // The 410 is in the store under the request's topic, with APNs' time and its source.
        let (listed, store, listError) = try await runHerald(["tokens", "export", "--config", dir + "/herald.json"])
        #expect(listed == 0, "\(listError)")
        #expect(store.contains(gone) && store.contains(#""topic":"com.example.app""#) && store.contains(#""unregisteredSource":"http-410""#))
        #expect(!store.contains(good))
        for secret in [try String(contentsOfFile: dir + "/AuthKey.p8", encoding: .utf8), "eyJ"] {
            #expect(!stderr.contains(secret), "no key or JWT in the output")
        }
    }

    @Test("over TLS: herald send with transport http2 to herald simulate --http2; the 410 reaches the token store, and the next run suppresses it")
    func sendOverTLS() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = sharedCertificates
        _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/AuthKey.p8"])
        let good = String(repeating: "ab", count: 32), bad = String(repeating: "cd", count: 32), gone = String(repeating: "ef", count: 32)
        let simulator = try await ExternalServer.start(try heraldExecutable().path, [
            "simulate", "--http2", "--certs", certs.directory, "--token-key", dir + "/AuthKey.p8", "--key-id", "KEY1234567",
            "--team-id", "TEAM123456", "--bad-token", bad, "--unregistered-token", gone, "--go-away", "0.01", "--max-streams", "10",
        ])
        let port = simulator.ready["port"] as! Int
        try #"""
        {"outcomes":"outcomes.jsonl","tokens":{"path":"tokens.db"},
         "transport":{"type":"http2","host":"127.0.0.1","port":\#(port),"serverName":"localhost","caFile":"\#(certs.caCertificate)",
                      "topic":"com.example.app","connections":2,
                      "providerToken":{"keyFile":"AuthKey.p8","keyID":"KEY1234567","teamID":"TEAM123456"}}}
        """#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        var lines = (0..<300).map { #"{"id":\#($0),"token":"\#(good)","alert":"hi \#($0)"}"# }
        lines += [#"{"id":900,"token":"\#(bad)","alert":"x"}"#, #"{"id":901,"token":"\#(gone)","alert":"x"}"#]
        try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/in.jsonl", atomically: true, encoding: .utf8)

        let (status, _, stderr) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
        #expect(status == 0, "\(stderr)")
        let first = try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(first.count == 302)
        #expect(first.filter { $0.contains(#""outcome":"accepted""#) }.count == 300)
        #expect(first.contains { $0.contains(#""id":900"#) && $0.contains(#""status":400,"reason":"BadDeviceToken""#) })
        #expect(first.contains { $0.contains(#""id":901"#) && $0.contains(#""status":410,"reason":"Unregistered""#) && $0.contains(#""timestamp":"#) })

        // The same requests again: the dead token is suppressed before it reaches the wire.
        let (again, _, stderr2) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
        #expect(again == 0, "\(stderr2)")
        let second = try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(second.contains { $0.contains(#""id":901"#) && $0.contains(#""outcome":"suppressed""#) })
        #expect(second.filter { $0.contains(#""outcome":"accepted""#) }.count == 300)
        // (Seconds are the store's unit: a registration in the same second as the unregistration does not lift it.)
        let later = String(Int(Date().timeIntervalSince1970) + 2)
        // The app registered again after the 410: the token goes out again.
        let (registered, _, registerError) = try await runHerald(["tokens", "register", "--config", dir + "/herald.json", "--token", gone, "--topic", "com.example.app", "--at", later])
        #expect(registered == 0, "\(registerError)")
        let (third, _, stderr3) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
        #expect(third == 0, "\(stderr3)")
        let thirdLines = try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(thirdLines.contains { $0.contains(#""id":901"#) && $0.contains(#""status":410"#) })
        let summary = await simulator.stop(interrupt: true)
        #expect(summary["delivered"] as? Int == 900 && summary["duplicates"] as? Int == 0 && summary["provider_tokens"] as? Int == 3)
        for secret in [try String(contentsOfFile: dir + "/AuthKey.p8", encoding: .utf8), "eyJ"] {
            #expect(!stderr.contains(secret) && !stderr2.contains(secret), "no key or JWT in the output")
        }
    }

    @Test("broadcast channels over TLS: herald channels create, list, read and delete against herald simulate --http2; broadcasts go out to a live channel and are rejected once it is deleted")
    func broadcastOverTLS() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = sharedCertificates
        _ = try await runCommand("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/AuthKey.p8"])
        let simulator = try await ExternalServer.start(try heraldExecutable().path, [
            "simulate", "--http2", "--certs", certs.directory, "--token-key", dir + "/AuthKey.p8", "--key-id", "KEY1234567", "--team-id", "TEAM123456",
        ])
        let port = simulator.ready["port"] as! Int
        try #"""
        {"outcomes":"outcomes.jsonl",
         "transport":{"type":"http2","host":"127.0.0.1","port":\#(port),"serverName":"localhost","caFile":"\#(certs.caCertificate)",
                      "topic":"com.example.app","providerToken":{"keyFile":"AuthKey.p8","keyID":"KEY1234567","teamID":"TEAM123456"}}}
        """#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        func channels(_ arguments: [String]) async throws -> (Int32, [[String: Any]], String) {
            let (status, stdout, stderr) = try await runHerald(["channels"] + arguments + ["--config", dir + "/herald.json"])
            let lines = stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            return (status, lines, stderr)
        }
        let (s1, created, e1) = try await channels(["create", "--storage-policy", "1"])
        let (s2, second, _) = try await channels(["create"])
        #expect(s1 == 0 && s2 == 0, "\(e1)")
        let live = try #require(created.first?["channelId"] as? String), other = try #require(second.first?["channelId"] as? String)
        #expect(created.first?["created"] as? Bool == true && live != other)
        await #expect(try channels(["list"]).1.compactMap { $0["channelId"] as? String } == [live, other])
        let read = try await channels(["read", "--channel-id", live]).1.first
        #expect(read?["storagePolicy"] as? Int == 1 && read?["pushType"] as? String == "LiveActivity")

        func send(_ ids: ClosedRange<Int>, to channel: String) async throws -> [Substring] {
            let lines = ids.map { #"{"id":\#($0),"channel-id":"\#(channel)","event":"update","content-state":{"score":\#($0)},"timestamp":1700000000}"# }
            try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/in.jsonl", atomically: true, encoding: .utf8)
            let (status, _, stderr) = try await runHerald(["send", "--config", dir + "/herald.json", "--overwrite-outcomes", dir + "/in.jsonl"])
            #expect(status == 0, "\(stderr)")
            return try String(contentsOfFile: dir + "/outcomes.jsonl", encoding: .utf8).split(separator: "\n")
        }
        let first = try await send(1...50, to: live)
        #expect(first.count == 50 && first.allSatisfy { $0.contains(#""outcome":"accepted""#) && $0.contains(#""channelId":"\#(live)""#) && !$0.contains("token") })

        let (deleted, gone, _) = try await channels(["delete", "--channel-id", live])
        #expect(deleted == 0 && gone.first?["deleted"] as? Bool == true)
        let (readStatus, _, readError) = try await channels(["read", "--channel-id", live])
        #expect(readStatus != 0 && readError.contains("ChannelNotRegistered"))
        await #expect(try channels(["list"]).1.compactMap { $0["channelId"] as? String } == [other])
        let after = try await send(51...52, to: live)
        #expect(after.count == 2 && after.allSatisfy { $0.contains(#""status":400,"reason":"ChannelNotRegistered""#) })

        let summary = await simulator.stop(interrupt: true)
        #expect(summary["broadcasts"] as? Int == 50 && summary["channels"] as? Int == 1 && summary["duplicates"] as? Int == 0)
    }
}
