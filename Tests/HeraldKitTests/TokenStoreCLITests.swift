import Foundation
import HeraldTestSupport
import Testing

/// The token store's files and commands as an operator meets them (issue 34, item 6).
@Suite("herald tokens: owner-only files, read-only commands that create nothing, --full-tokens", .serialized)
struct TokenStoreCLITests {
    static func mode(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int
    }

    @Test("list, export and stats on a missing store fail naming it and create nothing; a store made by import is 0600 with its -wal and -shm; a 0644 store is narrowed; list --full-tokens keeps the suppressed field")
    func storeFiles() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = dir + "/missing.db"
        for command in ["list", "export", "stats"] {
            let r = try await runHerald(["tokens", command, "--store", missing])
            #expect(r.status != 0 && r.stderr.contains("missing.db") && r.stderr.contains("no token store"), "\(command): \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: missing), "\(command) created the store")
        }

        let store = dir + "/tokens.db"
        let dead = String(repeating: "cd", count: 32)
        let export = try temporaryFile(#"{"token":"\#(dead)","topic":"com.example.app","unregistered":1700000000}"# + "\n")
        let imported = try await runHerald(["tokens", "import", "--store", store, export])
        #expect(imported.status == 0, "\(imported.stderr)")
        for file in [store, store + "-wal", store + "-shm"] where FileManager.default.fileExists(atPath: file) {
            #expect(Self.mode(file) == 0o600, "\(file): \(String(Self.mode(file) ?? -1, radix: 8))")
        }

        let full = try await runHerald(["tokens", "list", "--store", store, "--full-tokens"])
        #expect(full.status == 0 && full.stdout.contains(dead) && full.stdout.contains(#""suppressed":true"#), "\(full.stdout)")
        let short = try await runHerald(["tokens", "list", "--store", store])
        #expect(!short.stdout.contains(dead) && short.stdout.contains(#""suppressed":true"#), "\(short.stdout)")

        // A store someone made readable by everyone is narrowed when Herald opens it.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: store)
        let stats = try await runHerald(["tokens", "stats", "--store", store])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(Self.mode(store) == 0o600)
    }
}
