import Foundation
import HeraldTestSupport
import Testing

/// A walkthrough in the documentation: the `sh` blocks between
/// `<!-- walkthrough -->` and `<!-- /walkthrough -->`, and the lines each
/// block documents it prints (`# → …`, where `…` stands for anything).
struct Walkthrough: CustomStringConvertible {
    struct Block {
        var script: String
        var expected: [String]
    }
    let file: String
    var blocks: [Block] = []
    var description: String { file }

    init(_ file: String) throws {
        self.file = file
        let text = try String(contentsOf: repositoryRoot().appendingPathComponent(file), encoding: .utf8)
        var inside = false, current: Block?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "<!-- walkthrough -->" { inside = true; continue }
            if line == "<!-- /walkthrough -->" { inside = false; continue }
            guard inside else { continue }
            if current == nil {
                if line == "```sh" { current = Block(script: "", expected: []) }
                continue
            }
            if line == "```" {
                blocks.append(current!)
                current = nil
                continue
            }
            current!.script += line + "\n"
            if line.hasPrefix("# → ") { current!.expected.append(String(line.dropFirst(4))) }
        }
    }

    /// Whether `line` is what `expected` documents: its pieces between `…` in order.
    static func matches(_ line: Substring, _ expected: String) -> Bool {
        var rest = line[...]
        for piece in expected.components(separatedBy: "…") where !piece.isEmpty {
            guard let r = rest.range(of: piece) else { return false }
            rest = rest[r.upperBound...]
        }
        return true
    }
}

/// Issue 34, item 8: the walkthroughs in docs/ copy-paste and work. Each runs
/// as written, in a temporary directory, with the built `herald` first on the
/// `PATH`, one shell for all of a file's blocks (as a person pasting them into
/// a terminal); every `# →` line must appear in what its block (or a later
/// one, for a program it started in the background) printed.
@Suite("The documentation's walkthroughs, run as written", .serialized)
struct DocWalkthroughTests {
    @Test("every shell block of the quick starts runs and prints what the page says it prints", arguments: [
        "docs/operations.md", "docs/http2.md", "docs/service.md",
    ])
    func walkthrough(_ file: String) async throws {
        let walkthrough = try Walkthrough(file)
        #expect(walkthrough.blocks.count >= 1 && walkthrough.blocks.allSatisfy { !$0.expected.isEmpty }, "\(file): no walkthrough, or a block that documents no output")
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Background programs are stopped however the script ends.
        var script = """
            exec 2>&1
            set -eu
            cleanup() { jobs -p | xargs -r kill 2>/dev/null || true; }
            trap cleanup EXIT

            """
        for (k, block) in walkthrough.blocks.enumerated() {
            script += "printf '\\n@@block \(k)@@\\n'\n" + block.script
        }
        try script.write(toFile: dir + "/walkthrough.sh", atomically: true, encoding: .utf8)
        let bin = try heraldExecutable().deletingLastPathComponent().path
        let command = "cd \"$0\" && PATH=\"$1:$PATH\" exec timeout -k 5 120 bash walkthrough.sh"
        let (status, out, err) = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", command, dir, bin])
        #expect(status == 0, "\(file): the walkthrough exited \(status):\n\(out.suffix(3000))\(err.suffix(1000))")
        let parts = out.components(separatedBy: "\n@@block ")
        for (k, block) in walkthrough.blocks.enumerated() {
            let from = parts.firstIndex { $0.hasPrefix("\(k)@@") } ?? parts.count
            let printed = parts[min(from, parts.count)...].joined(separator: "\n").split(separator: "\n")
            for expected in block.expected {
                #expect(printed.contains { Walkthrough.matches($0, expected) }, "\(file), block \(k + 1): no line like \(expected)\nit printed:\n\(printed.joined(separator: "\n").prefix(3000))")
            }
        }
    }

    @Test("the matcher: … stands for anything, the pieces must come in order")
    func matcher() {
        #expect(Walkthrough.matches(#"{"id":1,"outcome":"accepted","apnsId":"x"}"#, #"{"id":1,…,"apnsId":"…"}"#))
        #expect(!Walkthrough.matches(#"{"id":1,"outcome":"rejected"}"#, #"{"id":1,…"outcome":"accepted"…"#))
        #expect(!Walkthrough.matches(#""b","a""#, #""a"…"b""#))
    }
}
