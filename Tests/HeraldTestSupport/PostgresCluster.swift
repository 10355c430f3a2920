import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL server for tests: `initdb` in a temporary
/// directory (trust authentication, user `postgres`), listening on a free
/// port on 127.0.0.1 with its socket in that directory, started with
/// `pg_ctl -w` and stopped (`-m immediate`) when the test process exits.
/// Never a mock: the queue's tests run against the real thing.
///
/// `initdb` refuses to run as root: as root, the binaries run as `nobody`
/// (`runuser`), in a directory `nobody` owns. One server per test process
/// (``shared``); each test makes its own database (``createDatabase()``). A
/// server left behind by a test process that died is stopped by the next one.
/// Tests are skipped, saying why, only when the binaries are absent
/// (`apt-get install postgresql`; `.ci/run` installs it).
public final class PostgresCluster: Sendable {
    /// The folder with initdb, pg_ctl, postgres and psql: `HERALD_PG_BIN`, or Debian's newest.
    public static let binaries: String? = {
        if let dir = ProcessInfo.processInfo.environment["HERALD_PG_BIN"] { return dir }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for v in versions.reversed() where FileManager.default.isExecutableFile(atPath: "\(root)/\(v)/bin/initdb") {
            return "\(root)/\(v)/bin"
        }
        return nil
    }()

    /// Why tests that need a server are skipped.
    public static let absent = "needs PostgreSQL's server binaries (apt-get install postgresql, or HERALD_PG_BIN)"

    public let directory: String
    public let port: Int
    public let host = "127.0.0.1"
    public let user = "postgres"
    let bin: String
    let stopped = Mutex(false)
    /// Server settings beyond the defaults (`-c name=value …`), kept for ``restart(downFor:)``.
    let extraOptions: String

    /// The server of this test process, started on first use.
    public static var shared: PostgresCluster {
        get throws { try sharedResult.get() }
    }
    static let sharedResult: Result<PostgresCluster, any Error> = Result {
        let cluster = try PostgresCluster()
        atexit { try? PostgresCluster.sharedResult.get().stop() }
        return cluster
    }

    static var asRoot: Bool { geteuid() == 0 }

    /// A new server. `prepare` runs after `initdb`, before the start, with the data
    /// directory (to write `pg_hba.conf`, certificates…; as root, what it writes is then
    /// given to `nobody`); `extraOptions` are added to the server's command line.
    public init(extraOptions: String = "", prepare: (_ dataDirectory: String) throws -> Void = { _ in }) throws {
        guard let bin = Self.binaries else { throw ExternalServerError(message: Self.absent) }
        self.bin = bin
        self.extraOptions = extraOptions
        Self.stopAbandoned()
        directory = "/tmp/herald-pg-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        if Self.asRoot {
            guard let nobody = getpwnam("nobody") else { throw ExternalServerError(message: "no user nobody to run PostgreSQL as") }
            guard chown(directory, nobody.pointee.pw_uid, nobody.pointee.pw_gid) == 0 else {
                throw ExternalServerError(message: "chown \(directory) to nobody: errno \(errno)")
            }
        }
        try Self.run(bin, "initdb", ["-D", directory + "/data", "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
        try prepare(directory + "/data")
        if Self.asRoot, let nobody = getpwnam("nobody") {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory + "/data") {
                _ = chown(directory + "/data/" + name, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
            }
        }
        // A port taken between freePort and the server's bind fails the start: try another.
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freePort()
            do {
                try Self.run(bin, "pg_ctl", Self.startArguments(directory, port: port, extraOptions: extraOptions))
                self.port = port
                return
            } catch {
                lastError = error
            }
        }
        let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
        throw ExternalServerError(message: "PostgreSQL did not start in \(directory): \(lastError.map { "\($0)" } ?? "") \(log.suffix(2000))")
    }

    /// `pg_ctl`'s arguments to start the server in `directory` on `port` (and wait until it listens).
    static func startArguments(_ directory: String, port: Int, extraOptions: String) -> [String] {
        [
            "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "30", "-o",
            "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \(extraOptions)",
            "start",
        ]
    }

    /// Runs one of the server's programs (as `nobody` when root); throws with its output when it fails.
    /// Not with `Process`: the server `pg_ctl` starts would inherit what `Process` watches for the
    /// program's end (and other tests' pipes), and keep it open for ever.
    static func run(_ bin: String, _ program: String, _ arguments: [String]) throws {
        let path = "\(bin)/\(program)"
        let output = "/tmp/herald-pg-output-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let pid = asRoot
            ? try spawnWithSignalsUnblocked("/usr/sbin/runuser", ["-u", "nobody", "--", path] + arguments, output: output)
            : try spawnWithSignalsUnblocked(path, arguments, output: output)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7F) == 0, code = (status >> 8) & 0xFF
        guard exited && code == 0 else {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            throw ExternalServerError(message: "\(program) \(arguments.joined(separator: " ")) ended with status \(status): \(text)")
        }
    }

    /// Stops servers whose test process is gone (killed before its `atexit` ran).
    static func stopAbandoned() {
        guard let bin = binaries, let names = try? FileManager.default.contentsOfDirectory(atPath: "/tmp") else { return }
        for name in names where name.hasPrefix("herald-pg-") {
            let dir = "/tmp/\(name)"
            guard let text = try? String(contentsOfFile: dir + "/owner.pid", encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            _ = try? run(bin, "pg_ctl", ["-D", dir + "/data", "-m", "immediate", "-w", "stop"])
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// Takes the server away as an outage does, then brings it back on the same port:
    /// a fast shutdown (every session is ended, open transactions roll back), `downFor`
    /// with nothing listening, then a start. `pg_ctl` runs on a thread of its own.
    public func restart(downFor: Duration) async throws {
        let (bin, port, directory, extraOptions) = (bin, port, directory, extraOptions)
        try await offPool { try Self.run(bin, "pg_ctl", ["-D", directory + "/data", "-m", "fast", "-w", "-t", "30", "stop"]) }
        try await Task.sleep(for: downFor)
        try await offPool { try Self.run(bin, "pg_ctl", Self.startArguments(directory, port: port, extraOptions: extraOptions)) }
    }

    /// Stops the server (at once: nothing in it is kept) and removes its directory.
    public func stop() {
        guard stopped.withLock({ s in defer { s = true }; return !s }) else { return }
        _ = try? Self.run(bin, "pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs SQL with psql on `database`; returns its unaligned, tuples-only output (`|` between columns).
    @discardableResult
    public func psqlBlocking(_ database: String, _ sql: String) throws -> String {
        try psqlBlocking(database, commands: [sql])
    }

    /// Runs each command in turn in one psql session (one `-c` each: SQL, or one backslash command
    /// such as `\! sleep 60`, during which a transaction begun before stays open, idle).
    @discardableResult
    public func psqlBlocking(_ database: String, commands: [String]) throws -> String {
        let r = try runProcessBlocking(
            URL(fileURLWithPath: "\(bin)/psql"),
            ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", host, "-p", "\(port)", "-U", user, "-d", database] + commands.flatMap { ["-c", $0] })
        guard r.status == 0 else { throw ExternalServerError(message: "psql on \(database): \(commands.joined(separator: "; ").prefix(200)): \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `psql` from a task: psql runs on a thread of its own.
    @discardableResult
    public func psql(_ database: String, _ sql: String) async throws -> String {
        try await offPool { try self.psqlBlocking(database, sql) }
    }

    /// `psql(_:commands:)` from a task.
    @discardableResult
    public func psql(_ database: String, commands: [String]) async throws -> String {
        try await offPool { try self.psqlBlocking(database, commands: commands) }
    }

    /// Runs `script` (pgbench's script language) with `pgbench` on `clients` connections, each
    /// `transactions` times, on a thread of its own; returns the transactions a second pgbench
    /// reports. (A count, not `-T`: pgbench ends a timed run on SIGALRM, which a test process may
    /// block, and its children inherit that: the run never ended.)
    public func pgbench(_ database: String, script: String, clients: Int, transactions: Int) async throws -> Double {
        try await offPool {
            let file = "/tmp/herald-pgbench-\(UUID().uuidString).sql"
            try script.write(toFile: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: file) }
            let r = try runProcessBlocking(
                URL(fileURLWithPath: "\(self.bin)/pgbench"),
                ["-n", "-f", file, "-c", "\(clients)", "-j", "\(min(clients, 2))", "-t", "\(transactions)", "-h", self.host, "-p", "\(self.port)", "-U", self.user, database])
            guard r.status == 0, let tps = r.stdout.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") })?.split(separator: " ").dropFirst(2).first.flatMap({ Double($0) })
            else { throw ExternalServerError(message: "pgbench on \(database): \(r.stderr) \(r.stdout.suffix(300))") }
            return tps
        }
    }

    /// `createDatabase` from a task.
    public func createDatabase() async throws -> String {
        try await offPool { try self.createDatabaseBlocking() }
    }

    /// A new, empty database named `t_<random>`.
    public func createDatabaseBlocking() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        try psqlBlocking("postgres", "CREATE DATABASE \(name)")
        return name
    }
}
