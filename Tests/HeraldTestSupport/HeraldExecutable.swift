import Foundation
import Synchronization

/// The repository's root directory (where Package.swift is).
public func repositoryRoot() -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// The `herald` executable built next to the tests (`swift test` builds it).
public func heraldExecutable() throws -> URL {
    try builtExecutable("herald")
}

/// One of the package's executables (`herald`, `herald-strings`, `ShopNotifierExample`), built next to the tests: the
/// debug build, or with `HERALD_TEST_EXECUTABLES=release` the release build (`.ci/run` runs the
/// tests bounding a worker's pauses against the build operators run), or with a folder there
/// (a path with a `/`), that folder's (`.ci/run` builds release in a scratch folder of its own).
public func builtExecutable(_ name: String) throws -> URL {
    let root = repositoryRoot()
    var candidates = [".build/debug/\(name)", ".build/release/\(name)"]
    let chosen = ProcessInfo.processInfo.environment["HERALD_TEST_EXECUTABLES"] ?? "debug"
    if chosen == "release" { candidates.reverse() }
    if chosen.contains("/") { candidates.insert((chosen as NSString).appendingPathComponent(name), at: 0) }
    for candidate in candidates {
        let url = candidate.hasPrefix("/") ? URL(fileURLWithPath: candidate) : root.appendingPathComponent(candidate)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw HeraldExecutableMissing(root: root.path, name: name)
}

/// The tests could not find a built executable.
public struct HeraldExecutableMissing: Error, CustomStringConvertible {
    public let root: String
    public var name = "herald"
    public var description: String { "no \(name) executable under \(root)/.build; run `swift build` first" }
}

/// Runs the built `herald` with `arguments` and returns its exit status, standard output and standard error.
/// With `timeout`, a run still going after that many seconds is killed (a test expecting the
/// program to refuse to start then fails instead of waiting forever).
public func runHeraldBlocking(
    _ arguments: [String], timeout: Double? = nil, environment: [String: String] = [:]
) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProcessBlocking(try heraldExecutable(), arguments, timeout: timeout, environment: environment)
}

/// `runHerald` from a task: the wait happens on a thread of its own (`offPool`). `environment`:
/// variables set for the run, over this process's.
public func runHerald(
    _ arguments: [String], timeout: Double? = nil, environment: [String: String] = [:]
) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await offPool { try runHeraldBlocking(arguments, timeout: timeout, environment: environment) }
}

/// `runProcess` from a task: the wait happens on a thread of its own (`offPool`).
public func runProcess(_ executable: URL, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await offPool { try runProcessBlocking(executable, arguments) }
}

/// Runs `executable` with `arguments` and returns its exit status, standard output and standard error.
/// It blocks its thread until the program ends: from a task, call `runProcess`.
public func runProcessBlocking(
    _ executable: URL, _ arguments: [String], timeout: Double? = nil, environment: [String: String] = [:]
) throws -> (status: Int32, stdout: String, stderr: String) {
    let p = Process()
    p.executableURL = executable
    p.arguments = arguments
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let (out, err) = try startPiped(p)
    if let timeout {
        let pid = p.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { if p.isRunning { kill(pid, SIGKILL) } }
    }
    // Standard error on a thread of its own, so the child never blocks on a full pipe.
    let errorText = Mutex("")
    let reader = Thread { errorText.withLock { $0 = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) } }
    reader.start()
    let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    while !reader.isFinished { usleep(1000) }
    return (p.terminationStatus, stdout, errorText.withLock { $0 })
}
