import HeraldTestSupport
import Logging
import PostgresNIO

/// Another client's connection pool on a test server: it keeps `sessions` sessions open (and
/// opens again any that ends or was refused) until ``stop()``, as an application's pool does.
/// (Its own file: importing PostgresNIO beside swift-testing's macros broke their expansion.)
final class SessionHog: Sendable {
    private let client: PostgresClient
    private let running: Task<Void, Never>

    init(_ cluster: PostgresCluster, _ database: String, user: String, sessions: Int) {
        var c = PostgresClient.Configuration(host: cluster.host, port: cluster.port, username: user, password: nil, database: database, tls: .disable)
        c.options.minimumConnections = sessions
        c.options.maximumConnections = sessions
        let client = PostgresClient(configuration: c, backgroundLogger: Logger(label: "hog", factory: { _ in SwiftLogNoOpLogHandler() }))
        self.client = client
        running = Task { await client.run() }
    }

    /// One integer the SQL answers, through one of the pool's sessions.
    func ask(_ sql: String) async throws -> Int {
        var n = 0
        for try await v in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { n = v }
        return n
    }

    /// Closes every session.
    func stop() async {
        running.cancel()
        await running.value
    }
}
