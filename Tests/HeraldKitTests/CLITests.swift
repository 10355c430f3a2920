import Foundation
import HeraldTestSupport
import Testing

@Suite("herald executable", .serialized)
struct CLITests {
    @Test("send: one outcome line per request, a balanced summary, exit 0")
    func send() async throws {
        let lines = (0..<50).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n\#($0)"}"# } + ["not json"]
        let input = try temporaryFile(lines.joined(separator: "\n") + "\n")
        let (status, stdout, summary) = try await runHerald(["send", input])
        #expect(status == 0)
        let outcomes = stdout.split(separator: "\n")
        #expect(outcomes.count == 51)
        #expect(outcomes.filter { $0.contains(#""outcome":"accepted""#) }.count == 50)
        #expect(outcomes.contains { $0.contains(#""line":51,"outcome":"dropped""#) && $0.contains(#""code":"invalid-request""#) })
        #expect(summary.contains(#""entered":51,"accepted":50,"rejected":0,"dropped":1"#))
        #expect(summary.contains(#""balanced":true"#))
    }

    @Test("send: a setup error (bad configuration) exits non-zero naming the file and key")
    func setupError() async throws {
        let config = try temporaryFile(#"{"payload":{"policy":"sometimes"}}"#, suffix: ".json")
        let (status, _, stderr) = try await runHerald(["send", "--config", config, "/dev/null"])
        #expect(status != 0)
        #expect(stderr.contains("\(config): payload.policy: must be one of"))
    }

    @Test("SIGINT while streaming from a pipe: the run drains and every request that entered has exactly one outcome")
    func interruptDrains() async throws {
        let p = Process()
        p.executableURL = try heraldExecutable()
        p.arguments = ["send", "-"]
        let (input, out, err) = try startProcess {
            let input = Pipe(), out = Pipe(), err = Pipe()
            p.standardInput = input
            p.standardOutput = out
            p.standardError = err
            try p.run()
            return (input, out, err)
        }
        // Collect output on threads of their own, so the child never blocks on a full pipe
        // and no thread of the concurrency pool blocks on a read.
        let stdoutTask = readAllOnThread(out.fileHandleForReading)
        let stderrTask = readAllOnThread(err.fileHandleForReading)
        let writer = input.fileHandleForWriting
        let chunk = Data((0..<1000).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"x"}"# + "\n" }.joined().utf8)
        // 2 MB into a 64 KB pipe waits for herald to read it: on a thread of its own, not the pool's.
        try await offPool { for _ in 0..<20 { try writer.write(contentsOf: chunk) } }
        // Wait until outcomes flow, then interrupt while the pipe is still open:
        // the source must stop on the signal, not on end of input.
        try await Task.sleep(for: .milliseconds(500))
        p.interrupt()
        let deadline = ContinuousClock.now + .seconds(20)
        while p.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!p.isRunning, "herald did not stop on SIGINT while its input pipe was open")
        try? writer.close()
        let stdout = await stdoutTask.value
        let stderr = String(decoding: await stderrTask.value, as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(stderr)")
        #expect(stderr.contains("shutting down"))
        let outcomeCount = String(decoding: stdout, as: UTF8.self).split(separator: "\n").count
        #expect(stderr.contains(#""entered":\#(outcomeCount),"#), "\(outcomeCount) outcome lines; \(stderr)")
        #expect(stderr.contains(#""balanced":true"#))
        #expect(outcomeCount > 0)
    }
}

/// Reads a handle to its end on a dedicated thread.
func readAllOnThread(_ handle: FileHandle) -> Task<Data, Never> {
    let box = ResultBox()
    let thread = Thread {
        box.set(handle.readDataToEndOfFile())
    }
    thread.start()
    return Task { await box.value() }
}

final class ResultBox: @unchecked Sendable {
    let lock = NSLock()
    var data: Data?
    var waiter: CheckedContinuation<Data, Never>?
    func set(_ d: Data) {
        lock.lock()
        if let w = waiter { waiter = nil; lock.unlock(); w.resume(returning: d); return }
        data = d
        lock.unlock()
    }
    func value() async -> Data {
        await withCheckedContinuation { c in
            lock.lock()
            if let d = data { lock.unlock(); c.resume(returning: d); return }
            waiter = c
            lock.unlock()
        }
    }
}

@Suite("Configuration paths")
struct ConfigurationPathTests {
    @Test("relative paths in a configuration file are relative to its folder, not to where herald runs (issue 12, item 8)")
    func relativeToConfigurationFile() async throws {
        let dir = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
        try #"{"outcomes":"state/outcomes.jsonl","tokens":{"path":"state/tokens.db"}}"#.write(toFile: dir + "/herald.json", atomically: true, encoding: .utf8)
        let input = try temporaryFile(#"{"id":1,"token":"\#(goodToken)","alert":"hi"}"# + "\n")
        let (status, _, stderr) = try await runHerald(["send", "--config", dir + "/herald.json", input])
        #expect(status == 0, "\(stderr)")
        #expect(FileManager.default.fileExists(atPath: dir + "/state/tokens.db"))
        let outcomes = try String(contentsOfFile: dir + "/state/outcomes.jsonl", encoding: .utf8)
        #expect(outcomes.contains(#""outcome":"accepted""#))
        #expect(!FileManager.default.fileExists(atPath: "state/outcomes.jsonl"))
    }
}

/// Issue 12, item 9: the small things a hostile user found.
@Suite("herald send and certs: small things")
struct SmallThingsTests {
    @Test("a byte-order mark before line 1 does not drop it")
    func byteOrderMark() async throws {
        let input = try temporaryFile("\u{FEFF}" + #"{"id":1,"token":"\#(goodToken)","alert":"hi"}"# + "\n")
        let (status, stdout, _) = try await runHerald(["send", input])
        #expect(status == 0 && stdout.contains(#""line":1,"token""#) && stdout.contains(#""outcome":"accepted""#))
    }

    @Test("a badge beyond the integer range says so; a token that is not 32 bytes is dropped before the wire")
    func rangesAndSizes() async throws {
        let lines = [#"{"id":1,"token":"\#(goodToken)","badge":99999999999999999999999}"#,
                     #"{"id":2,"token":"\#(String(repeating: "ab", count: 16))","alert":"short token"}"#]
        let (status, stdout, _) = try await runHerald(["send", try temporaryFile(lines.joined(separator: "\n") + "\n")])
        #expect(status == 0)
        #expect(stdout.contains("out of range"), "\(stdout)")
        #expect(stdout.contains("binary interface takes 32"), "\(stdout)")
    }

    @Test("a directory as input is named as such")
    func directoryInput() async throws {
        let (status, _, stderr) = try await runHerald(["send", FileManager.default.temporaryDirectory.path])
        #expect(status == 1 && stderr.contains("Is a directory") && stderr.contains(FileManager.default.temporaryDirectory.path.split(separator: "/").last.map(String.init) ?? "tmp"))
    }

    @Test("herald certs does not overwrite a CA key without --force")
    func certsKeepsTheCAKey() async throws {
        let dir = temporaryDirectory() + "/certs"
        #expect(try await runHerald(["certs", dir]).status == 0)
        let key = try String(contentsOfFile: dir + "/ca-key.pem", encoding: .utf8)
        let again = try await runHerald(["certs", dir])
        #expect(again.status != 0 && again.stderr.contains("does not overwrite"))
        #expect(try String(contentsOfFile: dir + "/ca-key.pem", encoding: .utf8) == key)
        #expect(try await runHerald(["certs", dir, "--force"]).status == 0)
    }
}

@Suite("herald validate")
struct ValidateCLITests {
    @Test("reports the requests that would be dropped or truncated, and why; sends nothing; exit 3")
    func reports() async throws {
        let long = String(repeating: "x", count: 3000)
        let lines = [#"{"id":1,"token":"\#(goodToken)","alert":"fine"}"#, "not json",
                     #"{"id":3,"token":"\#(goodToken)","alert":"\#(long)"}"#]
        let input = try temporaryFile(lines.joined(separator: "\n") + "\n")
        let config = try temporaryFile(#"{"payload":{"policy":"truncate"}}"#, suffix: ".json")
        let (status, stdout, stderr) = try await runHerald(["validate", "--config", config, input])
        #expect(status == 3)
        let out = stdout.split(separator: "\n")
        #expect(out.count == 2)
        #expect(out.contains { $0.contains(#""line":2,"outcome":"dropped""#) })
        #expect(out.contains { $0.contains(#""line":3,"id":3,"outcome":"truncated","from":"#) && $0.contains(#""to":2048"#) })
        #expect(stderr.contains(#"{"validate":{"requests":3,"ok":1,"dropped":1,"truncated":1}}"#))
        let clean = try await runHerald(["validate", try temporaryFile(lines[0] + "\n")])
        #expect(clean.status == 0 && clean.stdout.isEmpty)
    }

    @Test("with catalogs: a plural value missing a form its language needs is a warning naming the file and key; the requests are checked as before")
    func catalogProblems() async throws {
        let dir = temporaryDirectory()
        for (language, forms) in [("en", "<key>one</key><string>%d message</string><key>other</key><string>%d messages</string>"),
                                  ("ru", "<key>one</key><string>%d сообщение</string><key>other</key><string>%d сообщения</string>")] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(language).lproj", withIntermediateDirectories: true)
            let plist = """
                <?xml version="1.0" encoding="UTF-8"?>
                <plist version="1.0"><dict><key>UNREAD</key><dict>
                <key>NSStringLocalizedFormatKey</key><string>%#@n@</string>
                <key>n</key><dict><key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>
                <key>NSStringFormatValueTypeKey</key><string>d</string>\(forms)</dict>
                </dict></dict></plist>
                """
            try Data(plist.utf8).write(to: URL(fileURLWithPath: "\(dir)/\(language).lproj/Localizable.stringsdict"))
        }
        let request = #"{"id":1,"token":"\#(goodToken)","language":"ru","alert":{"loc-key":"UNREAD","loc-args":["5"]}}"#
        let (status, stdout, stderr) = try await runHerald(["validate", "--catalogs", dir, try temporaryFile(request + "\n")])
        #expect(status == 0 && stdout.isEmpty, "\(stdout)\(stderr)")
        #expect(stderr.contains("herald: warning: catalog: \(dir)/ru.lproj/Localizable.stringsdict: UNREAD"), "\(stderr)")
        #expect(stderr.contains("few, many") && stderr.contains("[missing-plural-form]"), "\(stderr)")
        #expect(!stderr.contains("en.lproj"), "English has its forms: \(stderr)")
        #expect(stderr.contains(#"{"validate":{"requests":1,"ok":1,"dropped":0,"truncated":0,"catalog_problems":1}}"#), "\(stderr)")
    }
}
