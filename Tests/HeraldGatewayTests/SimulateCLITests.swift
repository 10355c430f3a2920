import Foundation
import HeraldTestSupport
import Synchronization
import Testing

/// Collects a process's output as it comes.
final class OutputCollector: Sendable {
    let data = Mutex<Data>(Data())
    init(_ pipe: Pipe) {
        pipe.fileHandleForReading.readabilityHandler = { [self] h in
            let chunk = h.availableData
            data.withLock { $0.append(chunk) }
        }
    }
    var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
    var lines: [String] { text.split(separator: "\n").map(String.init) }
}

@Suite("herald certs, herald simulate, herald send over TLS", .serialized)
struct SimulateCLITests {
    func run(_ arguments: [String]) async throws -> (Int32, String, String) {
        let r = try await runHerald(arguments)
        return (r.status, r.stdout, r.stderr)
    }

    @Test("certs makes a set; simulate prints its ports, serves TLS to herald send, and stops on SIGINT with its counters")
    func endToEnd() async throws {
        let dir = temporaryDirectory() + "/certs"
        let (status, out, _) = try await run(["certs", dir])
        #expect(status == 0 && out.contains(#""client_p12":"\#(dir)/client.p12""#))

        let bad = String(repeating: "ee", count: 32)
        let sim = Process()
        sim.executableURL = try heraldExecutable()
        let gone = String(repeating: "9a", count: 32)
        sim.arguments = ["simulate", "--certs", dir, "--invalid-token", bad, "--uninstalled-token", gone]
        sim.standardError = FileHandle.nullDevice
        let simOut = try startPiping(\.standardOutput, of: sim)
        let collected = OutputCollector(simOut)
        defer { if sim.isRunning { sim.terminate() } }
        try await waitUntil(seconds: 20) { !collected.lines.isEmpty }
        let ready = try JSONSerialization.jsonObject(with: Data(collected.lines[0].utf8)) as! [String: Any]
        let port = ready["gateway_port"] as! Int
        let feedbackPort = ready["feedback_port"] as! Int
        #expect(port > 0 && feedbackPort > 0 && ready["host"] as? String == "127.0.0.1")

        let config = dir + "/gateway.json"
        try """
        {"transport": {"type": "gateway", "host": "127.0.0.1", "port": \(port), "serverName": "localhost",
          "feedbackHost": "127.0.0.1", "feedbackPort": \(feedbackPort),
          "p12": "\(dir)/client.p12", "passphraseFile": "\(dir)/passphrase.txt", "caFile": "\(dir)/ca.pem"},
         "tokens": {"path": "\(dir)/tokens.db"}}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let requests = dir + "/requests.jsonl"
        let lines = (0..<30).map { i -> String in
            let token = i == 12 ? bad : i == 20 ? gone : String(repeating: "0\(i % 10)", count: 32)
            return #"{"id":\#(i),"token":"\#(token)","alert":"n\#(i)"}"#
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: requests, atomically: true, encoding: .utf8)
        let (sendStatus, outcomes, summary) = try await run(["send", "--config", config, requests])
        #expect(sendStatus == 0, "\(summary)")
        let outcomeLines = outcomes.split(separator: "\n")
        #expect(outcomeLines.count == 30)
        #expect(outcomeLines.filter { $0.contains(#""outcome":"accepted""#) }.count == 29)
        #expect(outcomeLines.contains { $0.contains(#""id":12"#) && $0.contains(#""outcome":"rejected","status":8"#) })
        #expect(summary.contains(#""balanced":true"#))

        // The feedback loop: the uninstalled app's token was accepted, so the feedback service lists it;
        // `herald feedback` writes it to the token store and the next send suppresses it.
        let (feedbackStatus, tuples, feedbackSummary) = try await run(["feedback", "--config", config])
        #expect(feedbackStatus == 0, "\(feedbackSummary)")
        #expect(tuples.split(separator: "\n").count == 1 && tuples.contains(#"{"token":"\#(gone)","timestamp":"#), "\(tuples)")
        let (_, again, againSummary) = try await run(["send", "--config", config, requests])
        #expect(again.split(separator: "\n").contains { $0.contains(#""id":20"#) && $0.contains(#""outcome":"suppressed""#) })
        // The token rejected with status 8 in the first run is suppressed too (the rejection fed the same store).
        #expect(again.split(separator: "\n").contains { $0.contains(#""id":12"#) && $0.contains(#""outcome":"suppressed""#) })
        #expect(againSummary.contains(#""accepted":28,"rejected":0,"dropped":0,"suppressed":2"#), "\(againSummary)")
        #expect(againSummary.contains(#""balanced":true"#), "\(againSummary)")
        let (_, empty, _) = try await run(["feedback", "--config", config])
        #expect(empty.isEmpty, "the feedback service empties its list once read")

        // (Seconds are the store's unit: a registration in the same second as the unregistration does not lift it.)
        let later = String(Int(Date().timeIntervalSince1970) + 2)
        // The app registered again: `herald tokens register` lifts the suppression for that token only.
        let (registered, _, registerError) = try await run(["tokens", "register", "--config", config, "--token", gone, "--at", later])
        #expect(registered == 0, "\(registerError)")
        let (_, third, thirdSummary) = try await run(["send", "--config", config, requests])
        #expect(third.split(separator: "\n").contains { $0.contains(#""id":20"#) && $0.contains(#""outcome":"accepted""#) })
        #expect(third.split(separator: "\n").contains { $0.contains(#""id":12"#) && $0.contains(#""outcome":"suppressed""#) })
        #expect(thirdSummary.contains(#""accepted":29,"rejected":0,"dropped":0,"suppressed":1"#), "\(thirdSummary)")

        sim.interrupt()
        try await waitUntil(seconds: 10) { !sim.isRunning }
        #expect(sim.terminationStatus == 0)
        try await waitUntil(seconds: 5) { collected.lines.count >= 2 }
        #expect(collected.lines.last?.contains(#""accepted":86"#) == true, "\(collected.lines)")
    }

    @Test("simulate refuses to listen beyond loopback")
    func loopbackOnly() async throws {
        let (status, _, err) = try await run(["simulate", "--certs", temporaryDirectory(), "--host", "0.0.0.0"])
        #expect(status != 0 && err.contains("loopback only"))
    }
}
