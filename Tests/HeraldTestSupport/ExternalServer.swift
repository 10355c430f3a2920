import Foundation

/// A server written outside this project (a Python script, `herald simulate`…),
/// started by a test: it prints one JSON line when it listens, keeps running
/// while its standard input is open, and prints a last JSON line when it stops.
/// The pipe on its standard input ends it even if the test process dies.
public final class ExternalServer: @unchecked Sendable {
    // @unchecked: `process` and the pipes are set in `init` and only read afterwards;
    // `stop()` is called once, by the test that started the server.
    let process: Process
    let input: Pipe
    let output: Pipe
    /// The first line the server printed, parsed.
    public let ready: [String: Any]
    /// The server's process id (to signal it).
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Blocks until the server prints its first line: from a task, call ``start(_:_:)``.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        (input, output) = try startProcess { [process] in
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            return (input, output)
        }
        let line = Self.readLine(output.fileHandleForReading)
        guard let data = line.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            process.terminate()
            throw ExternalServerError(message: "\(executable) did not start: its first line was \(line.debugDescription)")
        }
        ready = object
    }

    /// Finds `name` on the PATH.
    public static func which(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// Starts the server from a task: waiting for its first line happens on a thread of its own.
    /// `environment`: variables set for the server, over this process's.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> ExternalServer {
        try await offPool { try ExternalServer(executable, arguments, environment: environment) }
    }

    /// `stop` from a task: the wait for the server's end happens on a thread of its own.
    @discardableResult
    public func stop(interrupt: Bool = false) async -> [String: Any] {
        (try? await offPool { self.stopBlocking(interrupt: interrupt) }) ?? [:]
    }

    /// Closes the server's standard input (and sends SIGINT if `interrupt`),
    /// waits for it to exit and returns its last line, parsed.
    @discardableResult
    public func stopBlocking(interrupt: Bool = false) -> [String: Any] {
        try? input.fileHandleForWriting.close()
        if interrupt { process.interrupt() }
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let last = String(decoding: rest, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]) ?? [:]
    }

    /// `stopBlocking` on a thread of its own, not waited for: for a `defer` in a
    /// test, which cannot await and must not hold a thread of the concurrency
    /// pool while the server drains.
    public func stopInBackground(interrupt: Bool = false) {
        Thread { self.stopBlocking(interrupt: interrupt) }.start()
    }

    static func readLine(_ handle: FileHandle) -> String {
        var bytes: [UInt8] = []
        while true {
            let d = handle.readData(ofLength: 1)
            if d.isEmpty || d.first == 10 { break }
            bytes.append(d.first!)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

public struct ExternalServerError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// `runCommand` from a task: the wait happens on a thread of its own (`offPool`).
public func runCommand(_ executable: String, _ arguments: [String]) async throws -> String {
    try await offPool { try runCommandBlocking(executable, arguments) }
}

/// `interopPython` from a task: `setup.sh` runs on a thread of its own.
public func interopPython() async throws -> String {
    try await offPool { try interopPythonBlocking() }
}

/// `runServeClient` from a task: the client runs on a thread of its own.
public func runServeClient(port: Int, tokenFile: String, _ extra: [String]) async throws -> [String: Any] {
    try await offPool { try runServeClientBlocking(port: port, tokenFile: tokenFile, extra) }
}

/// Runs a command and returns its standard output; throws when it fails.
public func runCommandBlocking(_ executable: String, _ arguments: [String]) throws -> String {
    let r = try runProcessBlocking(URL(fileURLWithPath: executable), arguments)
    guard r.status == 0 else {
        throw ExternalServerError(message: "\(executable) \(arguments.joined(separator: " ")) exited with \(r.status): \(r.stderr)")
    }
    return r.stdout
}

/// The Python of the interop virtual environment (with `apns3`), made by
/// `Tests/Interop/setup.sh` if it is not there yet (pip, from PyPI).
public func interopPythonBlocking() throws -> String {
    let setup = repositoryRoot().appendingPathComponent("Tests/Interop/setup.sh").path
    return try runCommandBlocking("/bin/bash", [setup]).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Whether the interop venv exists or can be made: `Tests/Interop/setup.sh`
/// needs a `python3` with `venv` and `ensurepip`. Only their absence skips the
/// interop tests; a venv that can be made but not filled (PyPI unreachable) fails them.
public let interopVenvPossible: Bool = {
    let env = ProcessInfo.processInfo.environment
    let venv = env["HERALD_INTEROP_VENV"].map { $0.hasPrefix("/") ? $0 : repositoryRoot().appendingPathComponent($0).path }
        ?? repositoryRoot().appendingPathComponent(".build/interop-venv").path
    if FileManager.default.isExecutableFile(atPath: venv + "/bin/python") { return true }
    guard let python = ExternalServer.which(env["HERALD_INTEROP_PYTHON"] ?? "python3") else { return false }
    return (try? runProcessBlocking(URL(fileURLWithPath: python), ["-c", "import venv, ensurepip"]))?.status == 0
}()

/// Runs `Tests/Interop/serve_client.py` (a client of `herald serve` written with Python's standard
/// library) against 127.0.0.1:`port` with the bearer token in `tokenFile`; the JSON object it prints last.
public func runServeClientBlocking(port: Int, tokenFile: String, _ extra: [String]) throws -> [String: Any] {
    let script = repositoryRoot().appendingPathComponent("Tests/Interop/serve_client.py").path
    let out = try runCommandBlocking(try interopPythonBlocking(), [script, "--port", String(port), "--token-file", tokenFile] + extra)
    let line = out.split(separator: "\n").last.map(String.init) ?? ""
    guard let report = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        throw ExternalServerError(message: "serve_client.py printed \(out.prefix(500))")
    }
    return report
}

