import Foundation
import HeraldTestSupport
import Testing

/// Outcomes that cannot be written are never lost silently (issue 12, item 4).
@Suite("herald send when outcomes cannot be written", .serialized)
struct OutcomeWriteFailureTests {
    static func requests(_ n: Int) throws -> String {
        try temporaryFile((0..<n).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n\#($0)"}"# }.joined(separator: "\n") + "\n")
    }

    @Test("--outcomes /dev/full: exit 4, the error named, the summary counts what was not written")
    func fullDisk() async throws {
        let (status, _, stderr) = try await runHerald(["send", "--outcomes", "/dev/full", try Self.requests(200)])
        #expect(status == 4, "\(stderr)")
        #expect(stderr.contains("/dev/full") && stderr.contains("No space left on device"))
        #expect(stderr.contains(#""outcomes_written":0"#) && stderr.contains(#""outcomes_not_written":"#))
    }

    @Test("standard output closed early (| head -1): no death by SIGPIPE; exit 4 with a summary")
    func closedPipe() async throws {
        let requests = try Self.requests(50_000)
        let (reason, status, first, stderr) = try await offPool { try Self.closePipeEarly(requests) }
        #expect(reason == .exit, "killed by a signal")
        #expect(status == 4, "\(stderr)")
        #expect(first.contains(#""outcome":"accepted""#))
        #expect(stderr.contains("Broken pipe") && stderr.contains(#""summary""#) && stderr.contains(#""balanced":true"#))
    }

    /// Runs `herald send` on `requests`, reads one line and closes its standard output; how it
    /// ended, its first line and its standard error. Blocks its thread.
    static func closePipeEarly(_ requests: String) throws -> (Process.TerminationReason, Int32, String, String) {
        let p = Process()
        p.executableURL = try heraldExecutable()
        p.arguments = ["send", requests]
        let (out, err) = try startPiped(p)
        // Read one line, then close our end, as `head -1` does.
        let reader = out.fileHandleForReading
        var first: [UInt8] = []
        while let d = try reader.read(upToCount: 1), let b = d.first, b != 0x0A { first.append(b) }
        try reader.close()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationReason, p.terminationStatus, String(decoding: first, as: UTF8.self), stderr)
    }
}
