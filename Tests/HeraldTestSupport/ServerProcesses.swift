import Foundation
#if canImport(Glibc)
import Glibc
private let streamSocket = Int32(SOCK_STREAM.rawValue)
#else
import Darwin
private let streamSocket = SOCK_STREAM
#endif

/// A TCP port on 127.0.0.1 nobody listens on right now (another process may take it before the caller does).
public func freePort() throws -> Int {
    let fd = socket(AF_INET, streamSocket, 0)
    guard fd >= 0 else { throw ExternalServerError(message: "socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw ExternalServerError(message: "bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
public func canConnect(_ port: Int) -> Bool {
    let fd = socket(AF_INET, streamSocket, 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// Starts a test's process: `start` makes its pipes, sets them and calls `run()`, under the one lock
/// every process a test starts is started under; returns what `start` returns (its pipes).
///
/// Foundation's `Process.run()` closes in the child only the descriptors up to the highest it saw
/// open in /proc/self/fd when it looked, just before spawning; a pipe, or the socket pair by which
/// `Process` learns that its child ended, made by another thread in between reaches that child and
/// stays open as long as it runs: a short program's output, or its end, waits for a long one started
/// beside it. A psql query started at the same moment as another psql that ran `\! sleep 62` took
/// 62 s (`BusyDatabaseTests.idleWriter`, in a CI run). (Outside tests, 4 of 400 `echo` runs
/// took over a second beside `sleep 3`s started every 20 ms; none under the lock.) Descriptors other
/// code opens meanwhile (a client's socket) can still reach a child.
public func startProcess<T>(_ start: () throws -> T) rethrows -> T {
    processStart.lock()
    defer { processStart.unlock() }
    return try start()
}

private let processStart = NSLock()

/// Starts `process` with one of its standard streams (`\.standardInput`, `\.standardOutput`,
/// `\.standardError`) on a new pipe, returned (``startProcess(_:)``).
public func startPiping(_ stream: ReferenceWritableKeyPath<Process, Any?>, of process: Process) throws -> Pipe {
    try startProcess {
        let pipe = Pipe()
        process[keyPath: stream] = pipe
        try process.run()
        return pipe
    }
}

/// Starts `process` with its standard output and standard error each on a new pipe (``startProcess(_:)``).
public func startPiped(_ process: Process) throws -> (output: Pipe, error: Pipe) {
    try startProcess {
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        return (output, error)
    }
}

/// Starts `executable` with standard input from /dev/null and every signal
/// unblocked and handled by default. `Process` would pass on the signal mask
/// of the thread that starts it: a Dispatch worker thread (where tests run)
/// blocks SIGTERM, SIGINT and the others, and nginx, which does not unblock
/// them when it runs as a single process, would never see a SIGTERM. With
/// `output`, its standard output and error go to that file.
public func spawnWithSignalsUnblocked(_ executable: String, _ arguments: [String], output: String? = nil) throws -> pid_t {
    #if canImport(Darwin)
    var attributes: posix_spawnattr_t? = nil
    var actions: posix_spawn_file_actions_t? = nil
    #else
    var attributes = posix_spawnattr_t()
    var actions = posix_spawn_file_actions_t()
    #endif
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if let output {
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for sig in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2] { sigaddset(&defaults, sig) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    // posix_spawn passes on every descriptor not marked close-on-exec: pipes and listening sockets
    // other tests opened meanwhile would live on in nginx (a test server never seeing EOF on its
    // standard input, a port still taken after its server closed). A Python shim closes them all
    // before it becomes the program (exec keeps the pid this function returns).
    let shim = "import os, sys; os.closerange(3, 1 << 16); os.execv(sys.argv[1], sys.argv[1:])"
    guard let python = ExternalServer.which("python3") else { throw ExternalServerError(message: "python3 is needed to start \(executable) with no inherited descriptors") }
    let shimArgv: [UnsafeMutablePointer<CChar>?] = ([python, "-c", shim, executable] + arguments).map { strdup($0) } + [nil]
    defer { for a in shimArgv { free(a) } }
    var pid: pid_t = 0
    let r = posix_spawn(&pid, python, &actions, &attributes, shimArgv, environ)
    guard r == 0 else { throw ExternalServerError(message: "cannot start \(executable): \(String(cString: strerror(r)))") }
    return pid
}
