import Foundation
import HeraldTestSupport
import Testing

/// Runs `herald` with `arguments` and `stdin` on a thread of its own; returns exit status, stdout, stderr.
func runHerald(_ arguments: [String], stdin: String) async throws -> (Int32, String, String) {
    try await offPool { try runHeraldBlocking(arguments, stdin: stdin) }
}

/// Runs `herald` with `arguments` and `stdin`; returns exit status, stdout, stderr. Blocks its thread.
func runHeraldBlocking(_ arguments: [String], stdin: String?) throws -> (Int32, String, String) {
    let p = Process()
    p.executableURL = try heraldExecutable()
    p.arguments = arguments
    let (out, err, input) = try startProcess {
        let out = Pipe(), err = Pipe(), input = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try p.run()
        return (out, err, input)
    }
    if let stdin {
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
    }
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

@Suite("herald frame and herald decode", .serialized)
struct FrameDecodeCLITests {
    static let token = String(repeating: "ab", count: 32)
    static let request = #"{"id":7,"token":"\#(token)","alert":"hi","expiry":1700000000,"priority":5}"#

    @Test("frame: the exact bytes, in each format, from the request's id, expiry and priority")
    func frame() async throws {
        let payload = "7b22617073223a7b22616c657274223a226869227d7d"  // {"aps":{"alert":"hi"}}, 22 bytes
        let (status, out, _) = try await runHerald(["frame", "--format", "frame", "-"], stdin: Self.request + "\n")
        #expect(status == 0)
        #expect(out == "02" + "0000004e" + "010020" + Self.token + "020016" + payload
            + "03000400000007" + "0400046553f100" + "05000105" + "\n")
        let (_, enhanced, _) = try await runHerald(["frame", "--format", "enhanced", "-"], stdin: Self.request + "\n")
        #expect(enhanced == "01" + "00000007" + "6553f100" + "0020" + Self.token + "0016" + payload + "\n")
        let (_, simple, _) = try await runHerald(["frame", "--format", "simple", "-"], stdin: Self.request + "\n")
        #expect(simple == "00" + "0020" + Self.token + "0016" + payload + "\n")
    }

    @Test("frame: a configuration's transport options are not its business; its payload limit is")
    func frameWithConfiguration() async throws {
        let config = try temporaryFile(#"{"payload":{"limit":20},"transport":{"type":"simulator","invalidTokens":[],"faults":{"seed":1}}}"#, suffix: ".json")
        let (status, out, err) = try await runHerald(["frame", "--config", config, "-"], stdin: Self.request + "\n")
        #expect(status == 1 && out.isEmpty)
        #expect(err.contains("over the limit of 20"))
    }

    @Test("frame: a request that cannot be framed prints no frame, its reason on stderr, exit 1")
    func frameErrors() async throws {
        let (status, out, err) = try await runHerald(["frame", "-"], stdin: Self.request + "\n" + #"{"token":"zz","alert":"x"}"# + "\n")
        #expect(status == 1)
        #expect(out.split(separator: "\n").count == 1)
        #expect(err.contains(#""line":2,"outcome":"dropped""#))
    }

    @Test("decode: frames, error responses and feedback tuples to JSON Lines; garbage is reported")
    func decode() async throws {
        let (_, frames, _) = try await runHerald(["frame", "--format", "frame", "-"], stdin: Self.request + "\n")
        let input = frames + "08 08 0000002a\n" + "6553f100 0020 " + Self.token + "\n" + "0700\n"
        let (status, out, _) = try await runHerald(["decode", "-"], stdin: input)
        #expect(status == 1)
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0] == #"{"type":"notification","format":"frame","command":2,"identifier":7,"expiry":1700000000,"priority":5,"token":"\#(Self.token)","payload_bytes":22,"payload":{"aps":{"alert":"hi"}}}"#)
        #expect(lines[1] == #"{"type":"error-response","status":8,"reason":"invalid token","identifier":42}"#)
        #expect(lines[2] == #"{"type":"feedback","timestamp":1700000000,"token":"\#(Self.token)"}"#)
        // 07 is no command, so in auto mode a feedback tuple, cut short.
        #expect(lines[3].hasPrefix(#"{"type":"error","line":4,"offset":0,"code":"truncated","command":7"#))
        let (_, strict, _) = try await runHerald(["decode", "--kind", "notification", "-"], stdin: "0700\n")
        #expect(strict.hasPrefix(#"{"type":"error","line":1,"offset":0,"code":"unknown command","command":7"#))
    }
}
