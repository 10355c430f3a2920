import Foundation
import HeraldPostgres
#if canImport(Glibc)
import Glibc
#endif

/// A process a benchmark runs (this executable's commands, as a user runs them): its output to a
/// log file, its exit awaited without polling, its CPU time read from `/proc` while it runs.
final class BenchProcess: Sendable {
    private let process: Process
    private let exits: AsyncStream<Int32>
    let log: String

    init(_ executable: String, _ arguments: [String], log: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        guard FileManager.default.createFile(atPath: log, contents: nil) else { throw BenchError("cannot write \(log)") }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? handle.close() }
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let (exits, ended) = AsyncStream<Int32>.makeStream(bufferingPolicy: .bufferingNewest(1))
        process.terminationHandler = { ended.yield($0.terminationStatus); ended.finish() }
        try process.run()
        (self.process, self.exits, self.log) = (process, exits, log)
    }

    var running: Bool { process.isRunning }
    var status: Int32 { process.isRunning ? -1 : process.terminationStatus }

    /// SIGTERM, if it still runs.
    func terminate() {
        if process.isRunning { process.terminate() }
    }

    /// Awaits its end (once); throws with its log's tail when it ends other than `expected`.
    func exit(expecting expected: Int32) async throws {
        var status: Int32 = -1
        for await s in exits { status = s }
        guard status == expected else {
            throw BenchError("\(process.arguments?.first ?? "") ended with status \(status), not \(expected): \(logTail())")
        }
    }

    /// The last 600 bytes of its output.
    func logTail() -> String {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return String(text.suffix(600))
    }

    /// Its user and system CPU seconds so far (0 once it has ended and been reaped).
    var cpuSeconds: Double { BenchProcess.stat(process.processIdentifier).map { $0.utime + $0.stime } ?? 0 }

    /// `herald send FILE` as its own process (outcomes to a file, as a user keeps them), run by
    /// `launcher` when given (`taskset -c 0`), with `extra` options: seconds from its start to
    /// its exit, and its CPU seconds.
    static func send(
        _ herald: String, input: String, outcomes: String, log: String, launcher: [String] = [], extra: [String] = []
    ) async throws -> (seconds: Double, cpu: Double) {
        let cpu = childrenCPUSeconds()
        let clock = ContinuousClock(), started = clock.now
        let arguments = ["send", "--quiet", "--overwrite-outcomes", "--outcomes", outcomes] + extra + [input]
        let process = try launcher.first.map { try BenchProcess($0, Array(launcher.dropFirst()) + [herald] + arguments, log: log) }
            ?? BenchProcess(herald, arguments, log: log)
        try await process.exit(expecting: 0)
        return ((clock.now - started).inSeconds, childrenCPUSeconds() - cpu)
    }

    /// This executable's path (`herald bench` runs `herald` itself).
    static func selfExecutable() throws -> String {
        let path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        guard FileManager.default.isExecutableFile(atPath: path) else { throw BenchError("cannot find this executable (\(path))") }
        return path
    }

    /// CPU seconds of this process's children that have ended and been waited for.
    static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// A process's `/proc/PID/stat` figures (Linux; `nil` when it cannot be read).
    struct Stat {
        var parent: Int32
        var utime: Double, stime: Double
        var children: Double  // cutime + cstime: its children that ended and were waited for
    }

    static let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func stat(_ pid: Int32) -> Stat? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
        let f = text[text.index(after: close)...].split(separator: " ")
        guard f.count > 14, let parent = Int32(f[1]), let u = Double(f[11]), let s = Double(f[12]), let cu = Double(f[13]), let cs = Double(f[14])
        else { return nil }
        return Stat(parent: parent, utime: u / ticks, stime: s / ticks, children: (cu + cs) / ticks)
    }
}

/// The PostgreSQL server a benchmark's queue talks to, when it runs on this machine: its
/// postmaster, found as the parent of a session's backend.
struct BenchPostgresServer: Sendable {
    let postmaster: Int32

    /// `nil` when the server is elsewhere (its backend is not a process here).
    static func find(_ queue: PostgresQueue) async throws -> BenchPostgresServer? {
        let backend = try await queue.benchBackendProcess()
        guard let stat = BenchProcess.stat(backend), stat.parent > 1,
            let comm = try? String(contentsOfFile: "/proc/\(stat.parent)/comm", encoding: .utf8), comm.hasPrefix("postgres")
        else { return nil }
        return BenchPostgresServer(postmaster: stat.parent)
    }

    /// The server's CPU seconds so far: the postmaster's own, its children's that ended (sessions
    /// closed), and those of its children running now (sessions, checkpointer, autovacuum…).
    /// A child reaped while `/proc` is scanned would be in neither part (a later reading could then
    /// come out lower than an earlier one): the scan is taken again until the postmaster's
    /// ended-children time is the same before and after it (an exited child not yet reaped still
    /// shows its times in `/proc`).
    func cpuSeconds() -> Double? {
        for _ in 0..<10 {
            guard let own = BenchProcess.stat(postmaster) else { return nil }
            var total = own.utime + own.stime + own.children
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for name in entries {
                guard let pid = Int32(name), let s = BenchProcess.stat(pid), s.parent == postmaster else { continue }
                total += s.utime + s.stime
            }
            guard let after = BenchProcess.stat(postmaster) else { return nil }
            if after.children == own.children { return total }
        }
        return nil
    }
}
