import Foundation
import HeraldTestSupport
import Testing

/// Outcomes files are append-only logs held by one process at a time (issue 34, item 1).
@Suite("outcomes files: appended to, never emptied by a start, held by one process", .serialized)
struct OutcomeFileTests {
    static let token = "a-test-token-0123456789abcdef"

    static func writeServeConfig(_ dir: String) throws {
        try "\(token)\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"""
        {"serve":{"apiTokensFile":"api-tokens"},"transport":{"type":"simulator"},"outcomes":"outcomes.jsonl"}
        """#.write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
    }

    static func startServe(_ dir: String) async throws -> ExternalServer {
        try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
    }

    /// POSTs `ids` as a JSON array over a raw connection; the answer's status.
    static func post(port: Int, ids: [Int]) async throws -> Int? {
        let body = "[" + ids.map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n\#($0)"}"# }.joined(separator: ",") + "]"
        let request = "POST /v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        return try await rawHTTP(port: port, request).status
    }

    /// The outcome lines' caller ids, in file order; fails on a line that is not JSON (a NUL byte, a torn line).
    static func ids(_ path: String) throws -> [Int] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(!data.contains(0), "NUL bytes in \(path)")
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not an object: \(line)")
            return try #require(o["id"] as? Int, "no id: \(line)")
        }
    }

    @Test("herald serve: a second instance on the same outcomes file (another port, or the same port) is refused naming the first's pid and leaves the file as it was; a restart appends")
    func serveTwiceAndRestart() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.writeServeConfig(dir)
        let outcomes = dir + "/outcomes.jsonl"

        let first = try await Self.startServe(dir)
        let port = first.ready["port"] as! Int
        #expect(try await Self.post(port: port, ids: [1, 2, 3]) == 202)
        try await waitUntil(seconds: 10) { ((try? Self.ids(outcomes)) ?? []).count == 3 }

        // A second instance, port 0 (free): refused by the lock.
        let second = try await runHerald(["serve", "--config", dir + "/serve.json", "--port", "0"], timeout: 30)
        #expect(second.status != 0, "the second instance started: \(second.stdout)")
        #expect(second.stderr.contains("outcomes.jsonl") && second.stderr.contains("pid \(first.processIdentifier)"), "\(second.stderr)")
        // A second instance on the first one's port.
        let third = try await runHerald(["serve", "--config", dir + "/serve.json", "--port", String(port)], timeout: 30)
        #expect(third.status != 0, "\(third.stdout)")
        #expect(try Self.ids(outcomes) == [1, 2, 3])

        // The first is still serving and writing.
        #expect(try await Self.post(port: port, ids: [4]) == 202)
        let summary = await first.stop(interrupt: true)
        #expect((summary["summary"] as? [String: Any])?["balanced"] as? Bool == true, "\(summary)")
        #expect(try Self.ids(outcomes).sorted() == [1, 2, 3, 4])

        // A restart adds to the file.
        let restarted = try await Self.startServe(dir)
        #expect(try await Self.post(port: restarted.ready["port"] as! Int, ids: [5, 6]) == 202)
        await restarted.stop(interrupt: true)
        let all = try Self.ids(outcomes)
        #expect(all.count == 6 && all.suffix(2).sorted() == [5, 6] && Set(all) == Set(1...6), "\(all)")
        // Owner-only, as it holds full device tokens.
        let mode = try FileManager.default.attributesOfItem(atPath: outcomes)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("herald send --outcomes appends unless --overwrite-outcomes; a torn last line gets its newline before new lines")
    func sendAppends() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let input = try temporaryFile((1...3).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"x"}"# }.joined(separator: "\n") + "\n")
        let outcomes = dir + "/out.jsonl"
        for _ in 0..<2 {
            let r = try await runHerald(["send", input, "--outcomes", outcomes, "--quiet"])
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try Self.ids(outcomes) == [1, 2, 3, 1, 2, 3])
        let r = try await runHerald(["send", input, "--outcomes", outcomes, "--overwrite-outcomes", "--quiet"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Self.ids(outcomes) == [1, 2, 3])

        // A run killed in the middle of a line left it without its newline.
        try #"{"id":9,"outcome":"accepted"}"#.appending("\n{\"id\":10,\"outc").write(toFile: outcomes, atomically: false, encoding: .utf8)
        let after = try await runHerald(["send", input, "--outcomes", outcomes, "--quiet"])
        #expect(after.status == 0, "\(after.stderr)")
        let lines = try String(contentsOfFile: outcomes, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 5 && lines[1] == #"{"id":10,"outc"# && lines[2].hasPrefix(#"{"id":1,"#), "\(lines)")
    }

    @Test("two herald send runs on one outcomes file at once: the second is refused, naming the first's pid")
    func sendTwiceAtOnce() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outcomes = dir + "/out.jsonl"
        // The first reads its requests from a pipe that stays open: it holds the file until the pipe closes.
        let first = Process()
        first.executableURL = try heraldExecutable()
        first.arguments = ["send", "-", "--outcomes", outcomes, "--quiet"]
        first.standardError = FileHandle.nullDevice
        let input = try startPiping(\.standardInput, of: first)
        try input.fileHandleForWriting.write(contentsOf: Data((#"{"id":1,"token":"\#(goodToken)","alert":"x"}"# + "\n").utf8))
        try await waitUntil(seconds: 10) { ((try? Self.ids(outcomes)) ?? []) == [1] }
        let second = try await runHerald(["send", "--outcomes", outcomes, "--overwrite-outcomes", try temporaryFile("")], timeout: 30)
        #expect(second.status != 0 && second.stderr.contains("pid \(first.processIdentifier)"), "\(second.stderr)")
        try input.fileHandleForWriting.close()
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        #expect(try Self.ids(outcomes) == [1])
    }
}
