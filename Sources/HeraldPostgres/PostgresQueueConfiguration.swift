import Foundation
import HeraldCore
import NIOSSL
import PostgresNIO

/// Where the queue is and how a worker uses it: the configuration's `queue`
/// section.
///
/// ```json
/// { "queue": { "type": "postgres", "host": "127.0.0.1", "port": 5432, "user": "herald",
///              "database": "herald", "passwordEnv": "HERALD_PG_PASSWORD", "lease": 30, "batch": 2000 } }
/// ```
///
/// The password comes from a file (`passwordFile`) or an environment variable
/// (`passwordEnv`), never inline, and is never printed: ``description`` leaves it out.
///
/// `tls`: `"verify-full"` (TLS required; the server's certificate verified against
/// `caFile`, or the system's roots without it, and its name against `serverName`, or
/// `host`) or `"disable"` (plain TCP). Without the key: `"disable"` when `host` is a
/// loopback address, `"verify-full"` anywhere else.
public struct PostgresQueueConfiguration: Sendable, CustomStringConvertible {
    public var host = "127.0.0.1"
    public var port = 5432
    public var user = "herald"
    public var database = "herald"
    public var password: String?
    /// How long a claimed row stays leased without renewal; workers renew every third of it.
    public var lease: Duration = .seconds(30)
    /// Rows claimed at a time. Each claim and outcome write has a cost of its own besides its
    /// rows': at 2,000 rather than 1,000, one worker draining 200,000 rows took 15% less time
    /// and the database 15-25% less CPU. Fewer rows spread a small burst over more workers.
    public var batch = 2000
    /// The longest an idle worker waits for a `NOTIFY` before it looks at the table anyway
    /// (after a claim that found nothing it looks again after 5 ms, doubling up to this). Rows
    /// that an application inserts itself send no `NOTIFY` (schema 10): they wait this long at
    /// most. An idle look costs the database about 0.5 ms of CPU: 0.2% of a core at 0.25 s.
    public var poll: Duration = .milliseconds(250)
    /// Outcomes written back per statement, at most.
    public var writeBatch = 5000
    /// How long a connection attempt may take; a server unreachable for about this long fails what waits for it.
    public var connectTimeout: Duration = .seconds(10)
    /// How long a statement may go without an answer before it is given up as on a lost
    /// connection (and retried where the caller retries).
    public var answerTimeout: Duration = .seconds(60)
    /// How the connection is protected.
    public var tls: TLSMode = .disable
    /// The CA certificates (PEM) the server's certificate must chain to; `nil`: the system's roots.
    public var caFile: String?
    /// The name the server's certificate must carry; `nil`: `host`.
    public var serverName: String?
    /// Both pools keep all their connections open from the start, rather than opening them as
    /// statements need them (`herald bench queue` measures workers already running).
    package var connectionsKeptOpen = false

    /// How the connection to PostgreSQL is protected.
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP: for loopback or a private network.
        case disable
        /// TLS required; certificate and host name verified.
        case verifyFull = "verify-full"
    }

    /// Whether a connection is a session of its own (`session`: PostgreSQL itself, or a pooler such
    /// as PgBouncer in session pooling) or only lasts a transaction (`transaction`: PgBouncer in
    /// transaction pooling, where consecutive statements may run on different server sessions).
    public enum Pooling: String, Sendable, CaseIterable {
        case session
        case transaction
    }

    /// With `transaction`, nothing relies on a session: the claim and the outcome write are sent as
    /// unnamed statements (planned on every run, not once per connection), no session setting is
    /// sent at connection, and workers do not `LISTEN` (they look every `poll`; docs/scale-out.md,
    /// "Behind PgBouncer").
    public var pooling = Pooling.session

    public init() {}

    /// Reads the `queue` node: `type` (`"postgres"`, required), `host`, `port`, `user`,
    /// `database`, `passwordFile` or `passwordEnv`, `lease`, `poll`, `connectTimeout` and `answerTimeout` (seconds), `batch`, `writeBatch`,
    /// `tls`, `caFile`, `serverName`, `pooling`.
    public static func load(_ node: ConfigNode) throws(ConfigError) -> PostgresQueueConfiguration {
        guard try node.string("type", oneOf: ["postgres"]) != nil else {
            throw node.error("type", "required: \"postgres\" (the queue is a PostgreSQL table)")
        }
        var c = PostgresQueueConfiguration()
        c.host = try node.string("host") ?? c.host
        c.port = try node.int("port", in: 1...65535) ?? c.port
        c.user = try node.string("user") ?? c.user
        c.database = try node.string("database") ?? c.database
        if let secret = try node.secret(fileKey: "passwordFile", environmentKey: "passwordEnv") {
            // A file's last newline is not part of the password.
            var text = secret.text
            while text.last == "\n" || text.last == "\r" { text.removeLast() }
            c.password = text
        }
        c.lease = try seconds(node, "lease", in: 1...86_400) ?? c.lease
        c.poll = try seconds(node, "poll", in: 0.01...3_600) ?? c.poll
        c.connectTimeout = try seconds(node, "connectTimeout", in: 0.1...600) ?? c.connectTimeout
        c.answerTimeout = try seconds(node, "answerTimeout", in: 1...3_600) ?? c.answerTimeout
        c.batch = try node.int("batch", in: 1...65_536) ?? c.batch
        c.writeBatch = try node.int("writeBatch", in: 1...65_536) ?? c.writeBatch
        let loopback = c.host == "::1" || c.host == "localhost" || c.host.hasPrefix("127.")
        c.tls = try node.string("tls", oneOf: TLSMode.allCases.map(\.rawValue)).flatMap(TLSMode.init(rawValue:))
            ?? (loopback ? .disable : .verifyFull)
        c.caFile = try node.path("caFile")
        c.serverName = try node.string("serverName")
        c.pooling = try node.string("pooling", oneOf: Pooling.allCases.map(\.rawValue)).flatMap(Pooling.init(rawValue:)) ?? c.pooling
        if let ca = c.caFile {
            guard c.tls == .verifyFull else { throw node.error("caFile", "is for \"tls\": \"verify-full\"") }
            guard FileManager.default.isReadableFile(atPath: ca) else { throw node.error("caFile", "cannot read \(ca)") }
        }
        return c
    }

    static func seconds(_ node: ConfigNode, _ key: String, in range: ClosedRange<Double>) throws(ConfigError) -> Duration? {
        guard let s = try node.double(key) else { return nil }
        guard range.contains(s) else { throw node.error(key, "must be from \(range.lowerBound) to \(range.upperBound) seconds, got \(s)") }
        return .milliseconds(Int64((s * 1000).rounded()))
    }

    /// `postgres://user@host:port/database` (no password).
    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// The TLS client settings for `verify-full`: the chain verified against `caFile` (or the
    /// system's roots) and the name against `serverName` or `host`.
    var tlsConfiguration: TLSConfiguration {
        var t = TLSConfiguration.makeClientConfiguration()
        t.certificateVerification = .fullVerification
        if let caFile { t.trustRoots = .file(caFile) }
        return t
    }

    /// The client's configuration.
    var client: PostgresClient.Configuration {
        var c = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database,
            tls: tls == .verifyFull ? .require(tlsConfiguration) : .disable)
        c.options.maximumConnections = 4
        // (The planned pool, a copy of this one, keeps its connections open likewise.)
        if connectionsKeptOpen { c.options.minimumConnections = c.options.maximumConnections }
        c.options.connectTimeout = connectTimeout
        c.options.tlsServerName = serverName
        c.options.additionalStartupParameters = sessionStartupParameters
        return c
    }

    /// The session settings every connection starts with (none with `pooling` "transaction", see
    /// ``plannedStartupParameters``): no JIT compilation. Herald's statements each touch a few
    /// rows, but a plan's cost estimate follows the table's size: once `notifications` holds a
    /// million rows (one `COPY`), the claim's row read and the outcome write are estimated past
    /// `jit_above_cost` (100,000) and PostgreSQL compiled 273 expressions for each, 300-600 ms a
    /// statement against a millisecond's work: a 1,000,000-row drain ran 1,530 rows a second.
    var sessionStartupParameters: [(String, String)] {
        pooling == .session ? [("jit", "off")] : []
    }

    /// The client for the claim and the outcome write, the two statements run for every batch, both
    /// prepared: five connections (two claims, two writes and the fast lane's look run at once), whose sessions plan a
    /// prepared statement once (`plan_cache_mode` `force_generic_plan`). Left to choose, the server
    /// planned the outcome write anew on every run, since its arrays' lengths make each custom plan
    /// look cheaper than a generic one: planning took as long as running it.
    var plannedClient: PostgresClient.Configuration {
        var c = client
        c.options.maximumConnections = 5
        c.options.additionalStartupParameters = plannedStartupParameters
        return c
    }

    /// The session settings the planned pool's connections start with: ``sessionStartupParameters``,
    /// `plan_cache_mode` and `enable_bitmapscan` off; none with `pooling` "transaction": PgBouncer
    /// refuses startup parameters it does not know ("unsupported startup parameter"), and a pooler
    /// would not keep them for the session anyway (docs/scale-out.md, "Behind PgBouncer", says to
    /// set `jit` off for the worker's role there).
    ///
    /// No bitmap scans: a generic plan cannot see how many rows a lease's range holds; with
    /// statistics made before a large `COPY`, the claim's row read estimated a few hundred thousand
    /// rows and read its 2,000 through a bitmap and a sort, 20-60 ms a claim, against a few
    /// milliseconds in index order (the claim's functions carry the same setting, migration 14).
    var plannedStartupParameters: [(String, String)] {
        pooling == .session ? sessionStartupParameters + [("plan_cache_mode", "force_generic_plan"), ("enable_bitmapscan", "off")] : []
    }

    /// One connection's configuration (for migrations: they fail at once when the server cannot be
    /// reached), with the planned pool's startup parameters, so that a set-up that refuses them
    /// (PgBouncer without `pooling` "transaction") fails there, at start, with a clear message.
    var connection: PostgresConnection.Configuration {
        get throws {
            let mode: PostgresConnection.Configuration.TLS = tls == .verifyFull ? .require(try NIOSSLContext(configuration: tlsConfiguration)) : .disable
            var c = PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: mode)
            c.options.connectTimeout = TimeAmount(connectTimeout)
            c.options.tlsServerName = serverName
            c.options.additionalStartupParameters = plannedStartupParameters
            return c
        }
    }
}
