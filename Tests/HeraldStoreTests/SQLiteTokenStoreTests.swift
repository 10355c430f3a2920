import Foundation
import GRDB
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

func token(_ i: Int) -> DeviceToken {
    DeviceToken(bytes: (0..<32).map { $0 < 8 ? UInt8(truncatingIfNeeded: i >> (8 * $0)) : UInt8($0) })
}

func storePath(_ dir: String) -> String { dir + "/tokens.db" }

@Suite("Token store on SQLite")
struct SQLiteTokenStoreTests {
    @Test("what one process learns survives into the next: per topic, with sources; a later registration wins")
    func persists() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let store = try SQLiteTokenStore(path: storePath(dir))
            store.unregistered(token(1), topic: nil, at: 100, source: .feedback)  // every topic
            store.unregistered(token(2), topic: "com.a", at: 100, source: .gone)
            store.registered(token(2), topic: "com.a", at: 150, source: .registration)  // registered again after
            store.unregistered(token(3), topic: "com.a", at: 300, source: .gone)
            store.registered(token(4), topic: "com.a", at: 50, source: .registration)  // never dead: database only
            #expect(store.failure == nil)
        }
        let store = try SQLiteTokenStore(path: storePath(dir))
        #expect(store.isSuppressed(token(1), topic: "com.a") && store.isSuppressed(token(1), topic: nil))
        #expect(!store.isSuppressed(token(2), topic: "com.a"))
        #expect(store.isSuppressed(token(3), topic: "com.a") && !store.isSuppressed(token(3), topic: "com.b"))
        #expect(store.isSuppressed(token(3), topic: nil), "a request with no topic weighs every topic of the token")
        #expect(!store.isSuppressed(token(4), topic: "com.a") && !store.isSuppressed(token(5), topic: nil))
        #expect(store.startup.rowsLoaded == 3, "only tokens with an unregistration are held in memory")
        var rows: [TokenRecord] = []
        try store.forEach { rows.append($0) }
        #expect(rows.count == 4)
        let second = try #require(rows.first { $0.token == token(2) })
        #expect(second.registeredAt == 150 && second.registeredSource == "registration" && second.unregisteredSource == "http-410" && !second.isSuppressed)
        let stats = try store.statistics()
        #expect(stats.rows == 4 && stats.suppressed == 2)
    }

    @Test("a registration for one topic lifts an any-topic unregistration for that topic only, even when the token came into memory later")
    func topicOverridesAny() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteTokenStore(path: storePath(dir))
        store.registered(token(7), topic: "com.a", at: 200, source: .registration)  // not in memory yet
        store.unregistered(token(7), topic: nil, at: 100, source: .feedback)  // brings the token's rows in
        #expect(!store.isSuppressed(token(7), topic: "com.a"))
        #expect(store.isSuppressed(token(7), topic: "com.b"))
        store.unregistered(token(7), topic: nil, at: 300, source: .feedback)
        #expect(store.isSuppressed(token(7), topic: "com.a"))
        #expect(try store.forget(token(7), topic: nil) == 2)
        #expect(!store.isSuppressed(token(7), topic: "com.b"))
        #expect(try SQLiteTokenStore(path: storePath(dir)).startup.rowsLoaded == 0)
    }

    @Test("refused, never changed: not SQLite, an old JSON Lines journal, another application's database, a newer schema, a corrupt file, a corrupt copy in rollback-journal mode (what VACUUM INTO makes: opening it for writing would switch it to WAL)", arguments: [
        "garbage", "journal", "other database", "newer", "corrupt", "corrupt copy",
    ])
    func refuses(kind: String) throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = storePath(dir)
        let expected: String
        switch kind {
        case "garbage":
            try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: URL(fileURLWithPath: path))
            expected = "not an SQLite database"
        case "journal":
            try #"{"token":"abab","dead":5}"#.write(toFile: path, atomically: true, encoding: .utf8)
            expected = "herald tokens import"
        case "other database":
            let q = try DatabaseQueue(path: path)
            try q.write { try $0.execute(sql: "CREATE TABLE t (x)") }
            try q.close()
            expected = "not a Herald token store"
        case "newer":
            do {
                let store = try SQLiteTokenStore(path: path)
                store.unregistered(token(1), topic: nil, at: 5, source: .feedback)
            }
            let q = try DatabaseQueue(path: path)
            try q.writeWithoutTransaction { try $0.execute(sql: "PRAGMA user_version = 99") }
            try q.close()
            expected = "newer Herald (schema 99"
        default:
            let original = kind == "corrupt" ? path : dir + "/original.sqlite"
            do {
                let store = try SQLiteTokenStore(path: original)
                store.apply((0..<5000).map { TokenEvent(token: token($0), topic: "com.a", kind: .unregistered, time: 9, source: .gone) })
            }
            if kind == "corrupt copy" {
                let q = try DatabaseQueue(path: original)
                try q.writeWithoutTransaction { try $0.execute(sql: "VACUUM INTO ?", arguments: [path]) }
                try q.close()
                let header = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(20)
                #expect(header[18] == 1 && header[19] == 1, "VACUUM INTO writes a rollback-journal database")
            }
            // Checkpointed into the main file by the last close; now scribble over its pages, past the header.
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(bytes.count > 16384)
            for i in stride(from: 4096, to: bytes.count, by: 97) { bytes[i] = 0xA5 }
            try bytes.write(to: URL(fileURLWithPath: path))
            expected = "corrupt"
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            _ = try SQLiteTokenStore(path: path)
            Issue.record("opened a \(kind) file")
        } catch {
            #expect(error.description.hasPrefix("token store \(path): ") && error.description.contains(expected), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file is left as it was")
    }

    @Test("a store another process holds locked: an error naming the file after the busy timeout, not a wait forever")
    func locked() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try SQLiteTokenStore(path: storePath(dir))
        let holder = try DatabaseQueue(path: storePath(dir))
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            let started = ContinuousClock.now
            do {
                _ = try SQLiteTokenStore(path: storePath(dir), busyTimeout: .seconds(1))
                Issue.record("opened a locked store")
            } catch {
                #expect("\(error)".contains("another process holds the store"), "\(error)")
            }
            #expect(ContinuousClock.now - started < .seconds(10))
            try db.execute(sql: "ROLLBACK")
        }
    }

    @Test("a full disk: the write fails with SQLite's reason and the file's name, the run keeps what it learned in memory, the store opens again")
    func fullDisk() async throws {
        guard getuid() == 0 else {
            // Mounting a small filesystem needs root (CI runs as root); the failure path itself is also covered by `readOnly`.
            return
        }
        let dir = temporaryDirectory()
        defer {
            _ = try? runCommandBlocking("/usr/bin/umount", [dir])
            try? FileManager.default.removeItem(atPath: dir)
        }
        _ = try await runCommand("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=160k", "tmpfs", dir])
        let store = try SQLiteTokenStore(path: storePath(dir))
        var batch = 0
        while store.failure == nil && batch < 100 {
            store.apply((0..<2000).map { TokenEvent(token: token(batch * 2000 + $0), topic: "com.a", kind: .unregistered, time: 9, source: .gone) })
            batch += 1
        }
        let failure = try #require(store.failure, "160 KiB never filled")
        #expect("\(failure)".contains(storePath(dir)) && "\(failure)".contains("disk is full"), "\(failure)")
        // The batch that failed is still suppressed in this process.
        #expect(store.isSuppressed(token((batch - 1) * 2000 + 5), topic: "com.a"))
        // Room again: the store opens, with every batch committed before the failure.
        _ = try await runCommand("/usr/bin/mount", ["-o", "remount,size=8m", dir])
        let reopened = try SQLiteTokenStore(path: storePath(dir))
        #expect(reopened.startup.rowsLoaded == (batch - 1) * 2000)
    }

    @Test("a store on a read-only file: opening works for reading, a change fails with a clear error and holds in memory")
    func readOnly() throws {
        guard getuid() != 0 else { return }  // root writes through file permissions; fullDisk covers the failure path there
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try SQLiteTokenStore(path: storePath(dir))
        chmod(storePath(dir), 0o444)
        let store = try SQLiteTokenStore(path: storePath(dir))
        store.unregistered(token(1), topic: nil, at: 5, source: .feedback)
        #expect(store.failure != nil && store.isSuppressed(token(1), topic: nil))
    }

    @Test("killed with SIGKILL in the middle of an import: the store opens, every committed batch is whole, none is half there")
    func killedMidImport() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let input = dir + "/big.jsonl"
        // 400,000 lines made on a thread of their own: seconds in a debug build, not the pool's to give.
        try await offPool {
            var text = ""
            for i in 0..<400_000 { text += #"{"token":"\#(token(i).hex)","topic":"com.a","unregistered":\#(1000 + i % 7)}"# + "\n" }
            try text.write(toFile: input, atomically: false, encoding: .utf8)
        }
        let child = Process()
        child.executableURL = try heraldExecutable()
        child.arguments = ["tokens", "import", "--store", storePath(dir), input]
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try startProcess { try child.run() }
        // Wait until some batches are committed (read through SQLite, as another process would), then kill.
        let deadline = ContinuousClock.now + .seconds(60)
        var seen = 0
        while seen < 30_000 && ContinuousClock.now < deadline && child.isRunning {
            if FileManager.default.fileExists(atPath: storePath(dir)),
                let q = try? DatabaseQueue(path: storePath(dir), configuration: { var c = Configuration(); c.readonly = true; c.busyMode = .timeout(1); return c }()) {
                seen = (try? await q.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM tokens") ?? 0 }) ?? 0
                try? q.close()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let killed = child.isRunning
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(killed, "the import finished before it could be killed (\(seen) rows seen)")
        let store = try SQLiteTokenStore(path: storePath(dir))
        let rows = try store.statistics().rows
        #expect(rows >= seen && rows % 10_000 == 0 && rows < 400_000, "\(rows) rows after the kill, \(seen) seen before it")
        #expect(store.startup.rowsLoaded == rows && store.isSuppressed(token(rows - 1), topic: "com.a") && !store.isSuppressed(token(rows), topic: "com.a"))
    }
}
