import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Debian's PgBouncer in front of a test cluster, on a port of its own (as `nobody` when root:
/// PgBouncer refuses to run as root), until ``stop()``. Every database of the cluster is reachable
/// through it as user `postgres` (trust), in `poolMode`, with at most `poolSize` server sessions per
/// database, so clients share them.
public final class PgBouncer: Sendable {
    public static let binary: String? = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].first { FileManager.default.isExecutableFile(atPath: $0) }
    public static let absent = "needs PgBouncer (apt-get install pgbouncer)"

    public let port: Int
    let directory: String

    public init(before cluster: PostgresCluster, poolMode: String = "transaction", poolSize: Int = 2) throws {
        guard let binary = Self.binary else { throw ExternalServerError(message: Self.absent) }
        directory = "/tmp/herald-pgbouncer-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\"postgres\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        let nobody = geteuid() == 0 ? getpwnam("nobody") : nil
        var lastError = ""
        for _ in 0..<5 {
            let port = try freePort()
            try """
                [databases]
                * = host=\(cluster.host) port=\(cluster.port)
                [pgbouncer]
                listen_addr = 127.0.0.1
                listen_port = \(port)
                unix_socket_dir =
                auth_type = trust
                auth_file = \(directory)/users.txt
                pool_mode = \(poolMode)
                default_pool_size = \(poolSize)
                max_client_conn = 500
                logfile = \(directory)/pgbouncer.log
                pidfile = \(directory)/pgbouncer.pid
                """.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
            if let nobody {
                for name in ["", "/users.txt", "/pgbouncer.ini"] { _ = chown(directory + name, nobody.pointee.pw_uid, nobody.pointee.pw_gid) }
            }
            let output = directory + "/start.out"
            let pid = nobody != nil
                ? try spawnWithSignalsUnblocked("/usr/sbin/runuser", ["-u", "nobody", "--", binary, "-d", directory + "/pgbouncer.ini"], output: output)
                : try spawnWithSignalsUnblocked(binary, ["-d", directory + "/pgbouncer.ini"], output: output)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // Daemonized: listening once its pid file is there and a connection is taken.
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if FileManager.default.fileExists(atPath: directory + "/pgbouncer.pid"), canConnect(port) {
                    self.port = port
                    return
                }
                usleep(20_000)
            }
            lastError = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: directory + "/pgbouncer.log", encoding: .utf8)) ?? "")
        }
        throw ExternalServerError(message: "PgBouncer did not start in \(directory): \(lastError.suffix(2000))")
    }

    /// Stops it (SIGTERM to the daemon) and removes its directory.
    public func stop() {
        if let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8),
           let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            kill(pid, SIGTERM)
            for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Its log so far (for a failing test's message).
    public var log: String { (try? String(contentsOfFile: directory + "/pgbouncer.log", encoding: .utf8)) ?? "" }
}
