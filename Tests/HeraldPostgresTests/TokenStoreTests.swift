import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(
    "The token store on PostgreSQL: the SQLite store's rules, shared by every worker",
    .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct PostgresTokenStoreTests {
    let token = DeviceToken(bytes: [UInt8](repeating: 0xC4, count: 32))
    let other = DeviceToken(bytes: [UInt8](repeating: 0x5E, count: 32))

    @Test("times only move forward, per token and topic; a tie suppresses; the rows are in the database after flush, with their sources")
    func rules() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db)
        let store = try await PostgresTokenStore(queue: queue).start()
        store.unregistered(token, topic: "com.a", at: 100, source: .gone)
        #expect(store.isSuppressed(token, topic: "com.a") && !store.isSuppressed(token, topic: "com.b"))
        store.registered(token, topic: "com.a", at: 150, source: .registration)
        #expect(!store.isSuppressed(token, topic: "com.a"))
        store.unregistered(token, topic: "com.a", at: 120, source: .feedback)  // older than the registration: it stays deliverable
        #expect(!store.isSuppressed(token, topic: "com.a"))
        store.unregistered(other, topic: nil, at: 200, source: .feedback)
        store.registered(other, topic: nil, at: 200, source: .registration)  // same second: suppressed, as in the SQLite store
        #expect(store.isSuppressed(other, topic: nil))
        await store.flush()
        #expect(store.failure == nil)
        let rows = try await cluster.psql(
            db, "SELECT encode(token, 'hex') || '|' || topic || '|' || registered_at || '|' || unregistered_at || '|' || unregistered_source FROM herald_tokens ORDER BY topic")
        #expect(rows.split(separator: "\n").map(String.init) == [
            "\(other.hex)||200|200|feedback", "\(token.hex)|com.a|150|120|feedback",
        ], "\(rows)")
        #expect(await store.close() == 0)
        await queue.close()
    }

    @Test("shared: what one worker learns, another suppresses after its refresh; a reopened store loads it; a registration elsewhere lifts it")
    func sharedBetweenWorkers() async throws {
        let (cluster, db) = try await freshDatabase()
        let qa = try await openQueue(cluster, db, owner: "a"), qb = try await openQueue(cluster, db, owner: "b")
        let a = try await PostgresTokenStore(queue: qa, refreshInterval: .seconds(60)).start()
        let b = try await PostgresTokenStore(queue: qb, refreshInterval: .seconds(60)).start()
        // b knows the token registered for com.b, a learns it is dead for com.a.
        b.registered(token, topic: "com.b", at: 500, source: .registration)
        await b.flush()
        a.unregistered(token, topic: "com.a", at: 300, source: .gone)
        await a.flush()
        try await b.refresh()
        #expect(b.isSuppressed(token, topic: "com.a") && !b.isSuppressed(token, topic: "com.b"))
        // a read back every topic of the token it learned was dead: com.b's later registration included.
        #expect(!a.isSuppressed(token, topic: "com.b"))

        let reopened = try await PostgresTokenStore(queue: qa).start()
        #expect(reopened.rowsLoaded == 2 && reopened.isSuppressed(token, topic: "com.a"))
        await reopened.close()

        b.registered(token, topic: "com.a", at: 400, source: .registration)
        await b.flush()
        try await a.refresh()
        #expect(!a.isSuppressed(token, topic: "com.a"))
        let leftA = await a.close(), leftB = await b.close()
        #expect(leftA == 0 && leftB == 0)
        await qa.close()
        await qb.close()
    }

    @Test("a write that fails is kept and written once the database answers again; failure names the database while it lasts")
    func writeFailureIsRetried() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db)
        let store = try await PostgresTokenStore(queue: queue).start()
        _ = try await cluster.psql(db, "ALTER TABLE herald_tokens RENAME TO herald_tokens_away")
        store.unregistered(token, topic: nil, at: 42, source: .feedback)
        #expect(store.isSuppressed(token, topic: nil), "in memory at once")
        let deadline = ContinuousClock.now + .seconds(20)
        while store.failure == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect("\(store.failure.map { "\($0)" } ?? "none")".contains(db))
        _ = try await cluster.psql(db, "ALTER TABLE herald_tokens_away RENAME TO herald_tokens")
        await store.flush()
        #expect(store.failure == nil)
        await #expect(try cluster.psql(db, "SELECT unregistered_at FROM herald_tokens") == "42")
        #expect(await store.close() == 0)
        await queue.close()
    }
}
