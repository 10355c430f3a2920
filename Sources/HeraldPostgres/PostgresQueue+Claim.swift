import HeraldCore
import PostgresNIO
import Synchronization

extension PostgresQueue {
    /// A claimed row: its id, its request line, its lease (the claim that holds it) and how many
    /// times it was claimed (more than once: another worker had it).
    public struct Claimed: Sendable, Hashable {
        public var id: Int64
        public var body: String
        public var lease: Int64
        public var attempts: Int
    }

    /// What a claim took: rows, and the leases it took over whose rows were all finished already
    /// (their holder wrote every outcome, then lost the lease before releasing it): the caller
    /// drops those with ``dropLeases(_:)``.
    public struct Claim: Sendable {
        public var rows: [Claimed]
        public var emptyLeases: [Int64]
    }

    /// Claims up to `limit` new rows, oldest first, in a lease of their own, and takes over a few
    /// leases whose time ran out: under another worker, or under this one when it no longer has
    /// them in flight (`inFlight`, lease ids: their outcome write was lost or given up), so a
    /// worker alone on the queue takes those back too. Of a lease taken over, only the rows with
    /// no outcome yet come back, their attempt counted.
    ///
    /// New rows are taken in batches (`herald_cursor`, schema 9): a batch is every row of the
    /// transactions that committed between two snapshots, so a row is claimable as soon as its
    /// transaction commits, whatever else is still open, and one that commits late falls in a
    /// later batch. Each lane has a cursor of its own (schema 12), and a claim takes the fast
    /// lane's rows first, the bulk lane keeping a tenth of the claim while it has rows waiting.
    /// Rows are never updated; a claim inserts a lease row per lane it takes rows from.
    ///
    /// The lease is marked with `token` (``nextClaimToken()``): if the claim's answer is lost,
    /// ``recoverClaims(_:)`` finds it again, so this worker sends its rows once instead of
    /// claiming them twice when the lease runs out.
    public func claim(limit: Int, inFlight: [Int64] = [], token: Int64 = 0) async throws(QueueError) -> Claim {
        try await claim(limit: limit, token: token, inFlight: { inFlight }, leased: { _ in })
    }

    /// ``claim(limit:inFlight:token:)`` for a worker whose leases change while it waits for its
    /// turn: `inFlight` is read once the claim's turn has come, and `leased` is told the leases the
    /// claim took before the next claim's turn, so that no claim of this queue's takes over a
    /// lease another of its claims took just before (one that waited through an outage longer
    /// than a lease found it run out, took it over and sent its rows a second time). Without `bulk`,
    /// no new rows of the bulk lane; without `fast`, none of the fast lane's while the bulk lane
    /// has rows waiting (the worker's looker takes those, ``lookFast(limit:token:seen:)``).
    package func claim(
        limit: Int, token: Int64, bulk: Bool = true, fast: Bool = true, inFlight: @Sendable () -> [Int64], leased: @Sendable ([Int64]) -> Void
    ) async throws(QueueError) -> Claim {
        // Two statements: the first (its own transaction) takes the leases and commits, holding the
        // cursor only for that, one at a time from this queue (`leaseTurn`); the second reads their
        // rows. A failure between them leaves the leases under `token`, where recoverClaims(_:)
        // finds them.
        await leaseTurn.acquire(1)
        let leasing = ClaimStatement(
            owner: owner, lease: configuration.lease.inSeconds, token: token, inFlight: inFlight(), limit: Int64(limit), bulk: bulk, fast: fast)
        let leases: (fresh: [Int64], taken: [Int64])
        do {
            leases = try await named("claiming rows") { [self] in
                var fresh: [Int64] = [], taken: [Int64] = []
                for try await (lease, isNew) in try await prepared(leasing) {
                    if isNew { fresh.append(lease) } else { taken.append(lease) }
                }
                return (fresh, taken)
            }
        } catch {
            leaseTurn.remove(1)
            throw error
        }
        leased(leases.fresh + leases.taken)
        leaseTurn.remove(1)
        guard !leases.fresh.isEmpty || !leases.taken.isEmpty else { return Claim(rows: [], emptyLeases: []) }
        let reading = ClaimedRowsStatement(owner: owner, fresh: leases.fresh, taken: leases.taken)
        let claim = try await named("reading the rows of claimed leases") { [self] in
            try await Self.claimed(try await prepared(reading), capacity: limit)
        }
        if Self.takeOne(loseClaimAnswers) { throw QueueError("PostgreSQL \(configuration): claiming rows: the answer was lost (a test's fault)", isOutage: true) }
        return claim
    }

    /// A look for the fast lane's new rows, in one statement (`herald_look_fast`, migration 17):
    /// unless the lane's newest committed row is still `seen` (its transaction's id, as the last
    /// look answered; nil: whatever it is), a lease of up to `limit` of its new rows under
    /// `token`, and those rows. Takes over no lease that ran out (the worker's claims do), so it
    /// takes no turn (``claim(limit:token:bulk:fast:inFlight:leased:)``). If its answer is lost,
    /// ``recoverClaims(_:)`` finds its lease by `token`.
    package func lookFast(limit: Int, token: Int64, seen: Int64?) async throws(QueueError) -> (newest: Int64, claim: Claim) {
        let look = FastLookStatement(owner: owner, lease: configuration.lease.inSeconds, token: token, limit: Int64(limit), seen: seen ?? -1)
        return try await named("looking for the fast lane's rows") { [self] in
            var newest: Int64 = 0
            var leases: [ClaimRow] = []
            for try await (n, lease, attempts, ids, bodies) in try await prepared(look) {
                newest = n
                if let lease { leases.append((lease, attempts ?? 1, ids, bodies)) }
            }
            return (newest, Self.claimed(leases, capacity: leases.reduce(0) { $0 + ($1.2?.count ?? 0) }))
        }
    }

    struct FastLookStatement: PostgresPreparedStatement {
        static let sql = "SELECT newest, lease, attempts, ids, bodies FROM herald_look_fast($1, $2, $3, $4, $5)"
        static let bindingDataTypes: [PostgresDataType] = [.text, .float8, .int8, .int8, .int8]
        typealias Row = (Int64, Int64?, Int?, [Int64]?, [String]?)

        var owner: String
        var lease: Double
        var token: Int64
        var limit: Int64
        var seen: Int64

        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 5)
            b.append(owner)
            b.append(lease)
            b.append(token)
            b.append(limit)
            b.append(seen)
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// Takes one from `counter` if it is above zero (the tests' lost answers).
    static func takeOne(_ counter: borrowing Atomic<Int>) -> Bool {
        var n = counter.load(ordering: .relaxed)
        while n > 0 {
            let (done, seen) = counter.compareExchange(expected: n, desired: n - 1, ordering: .relaxed)
            if done { return true }
            n = seen
        }
        return false
    }

    /// A token for the next claim, unique to this queue.
    public func nextClaimToken() -> Int64 { claimTokens.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The rows of the leases that claims with these tokens gave this worker and that it still
    /// holds (a claim whose answer was lost: it may have committed), their leases renewed. Leases
    /// another worker took since are not among them.
    public func recoverClaims(_ tokens: [Int64]) async throws(QueueError) -> Claim {
        guard !tokens.isEmpty else { return Claim(rows: [], emptyLeases: []) }
        let lease = configuration.lease.inSeconds
        return try await named("finding the rows of \(tokens.count) unanswered claims") { [self] in
            let result = try await client.query(
                """
                WITH got AS (
                    UPDATE herald_leases SET expires = now() + make_interval(secs => \(lease))
                    WHERE owner = \(owner) AND claim_token = ANY(\(tokens)::bigint[])
                    RETURNING *
                )
                \(unescaped: Self.unfinishedRows(of: "got"))
                """, logger: logger)
            return try await Self.claimed(result, capacity: 0)
        }
    }

    /// A `SELECT` answering, for each lease of the CTE `leases` (rows of `herald_leases`), one row as
    /// ``claimed(_:capacity:)`` reads it: its rows with no outcome yet, ids and bodies as arrays
    /// (null when none is left). For leases taken over or found again: some of their rows may be done.
    static func unfinishedRows(of leases: String) -> String {
        """
        SELECT l.lease, l.attempts, array_agg(n.id ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL),
               array_agg(n.body ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL)
        FROM \(leases) l
        LEFT JOIN LATERAL (
            -- Outcomes of a lease's rows are written under that lease.
            SELECT u.id FROM \(leaseRows(of: "l")) AS u(id)
            EXCEPT SELECT unnest(o.ids) FROM herald_outcomes o WHERE o.lease = l.lease
        ) r ON true
        LEFT JOIN notifications n ON n.id = r.id
        GROUP BY l.lease, l.attempts
        """
    }

    /// The rows of the lease `lease` (a row of `herald_leases`, or of a CTE returning its columns),
    /// whichever way it names them: its ids, its place in its lane's batch (schemas 9, 12) or its
    /// range (`herald_lease_rows`).
    package static func leaseRows(of lease: String) -> String {
        "herald_lease_rows(\(lease).ids, \(lease).lo_xid, \(lease).lo_id, \(lease).hi_xid, \(lease).hi_id, \(lease).lo_snap, \(lease).hi_snap, \(lease).lane)"
    }

    /// Rows no claim has taken yet, committed ones (`herald_unclaimed`, schema 9), at most `limit` (all: nil).
    package static func unclaimed(limit: Int? = nil) -> String {
        "herald_unclaimed(\(limit.map(String.init) ?? "NULL"))"
    }

    /// Rows of one lane (an SQL expression naming it) no claim has taken yet, first first.
    package static func unclaimed(limit: Int, lane: String) -> String {
        "herald_unclaimed(\(limit), \(lane))"
    }

    /// Claimed rows from a statement's answer: a row per lease (`lease, attempts, ids, bodies`; a
    /// lease with no row left comes with null arrays), so that a claim's thousand rows cost one
    /// row's decoding, not a thousand. Oldest first.
    static func claimed(_ result: PostgresRowSequence, capacity: Int) async throws -> Claim {
        try await claimed(result.decode(ClaimRow.self), capacity: capacity)
    }

    /// A row of a claim's answer: `lease, attempts, ids, bodies`.
    typealias ClaimRow = (Int64, Int, [Int64]?, [String]?)

    static func claimed<Rows: AsyncSequence>(_ result: Rows, capacity: Int) async throws -> Claim where Rows.Element == ClaimRow {
        var leases: [ClaimRow] = []
        for try await lease in result { leases.append(lease) }
        return claimed(leases, capacity: capacity)
    }

    /// ``claimed(_:capacity:)`` of an answer already read.
    static func claimed(_ leases: [ClaimRow], capacity: Int) -> Claim {
        var rows: [Claimed] = []
        rows.reserveCapacity(capacity)
        var empty: [Int64] = []
        for (lease, attempts, ids, bodies) in leases {
            var any = false
            if let ids, let bodies {
                for (id, body) in zip(ids, bodies) {
                    rows.append(Claimed(id: id, body: body, lease: lease, attempts: attempts))
                    any = true
                }
            }
            if !any { empty.append(lease) }
        }
        rows.sort { $0.id < $1.id }
        return Claim(rows: rows, emptyLeases: empty.sorted())
    }
}

extension PostgresQueue {
    /// The rows of the new lease `lease` (a row of `herald_leases` whose claim just inserted it:
    /// none of its rows finished yet), as one row `ids, bodies`, both arrays built in one pass over
    /// the rows so that `ids[k]` is `bodies[k]`'s row; unsorted (the worker puts them in order).
    package static func newRows(of lease: String) -> String {
        """
        SELECT array_agg(b.id) AS ids, array_agg(b.body) AS bodies
        FROM herald_batch(\(lease).lo_snap, \(lease).hi_snap, \(lease).lo_xid, \(lease).lo_id, \(lease).hi_xid, \(lease).hi_id, NULL, \(lease).lane) b
        """
    }

    /// The first half of a claim (``PostgresQueue/claim(limit:inFlight:token:)``), its own
    /// transaction: up to two leases whose time ran out taken over, then new leases of up to `$5`
    /// rows in all (`herald_claim_lease`, schemas 11 and 12), committed; answers each lease's id
    /// and whether it is new. The fast lane's rows come first: a lease of up to `$5` of them, less
    /// a tenth kept for the bulk lane while it has rows waiting (its minimum share), then one of
    /// the bulk lane's for the rest (none when `$6` is false). While the bulk lane has rows
    /// waiting, the fast lane's are taken only when `$7` says so (the worker's looker takes them
    /// otherwise). Prepared, on the pool of generic plans: parsed and planned
    /// once per connection. Planned anew on every claim, the claim took about 0.8 ms more of its
    /// 3-4 ms.
    struct ClaimStatement: PostgresPreparedStatement {
        static let sql = """
            WITH taken AS (
                UPDATE herald_leases l
                SET owner = $1, expires = now() + make_interval(secs => $2), attempts = l.attempts + 1, claim_token = $3
                WHERE l.lease IN (SELECT lease FROM herald_leases
                                  WHERE expires < now() AND (owner <> $1 OR NOT lease = ANY($4::bigint[]))
                                  ORDER BY expires LIMIT 2 FOR UPDATE SKIP LOCKED)
                RETURNING l.lease
            ), waiting AS (
                -- Whether the bulk lane has rows waiting (looked at once).
                SELECT $6 AND EXISTS (SELECT 1 FROM herald_unclaimed(1, 'bulk')) AS bulk
            ), fast AS (
                SELECT * FROM herald_claim_lease(
                    $1, $2, $3, (SELECT CASE WHEN NOT w.bulk THEN $5 WHEN $7 THEN $5 - $5 / 10 ELSE 0 END FROM waiting w), 'fast')
            ), bulk AS (
                -- After the fast lane's (it reads how many that took): each lane's cursor is locked in one order.
                SELECT * FROM herald_claim_lease($1, $2, $3, CASE WHEN $6 THEN $5 - coalesce((SELECT sum(taken) FROM fast), 0)::bigint ELSE 0 END, 'bulk')
            )
            -- The leases taken over first: the new leases hold their cursors until this commits.
            SELECT t.lease, false FROM taken t
            UNION ALL
            SELECT f.lease, true FROM fast f
            UNION ALL
            SELECT b.lease, true FROM bulk b
            """
        static let bindingDataTypes: [PostgresDataType] = [.text, .float8, .int8, .int8Array, .int8, .bool, .bool]
        typealias Row = (Int64, Bool)

        var owner: String
        var lease: Double
        var token: Int64
        var inFlight: [Int64]
        var limit: Int64
        var bulk: Bool
        var fast: Bool

        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 7)
            b.append(owner)
            b.append(lease)
            b.append(token)
            b.append(inFlight)
            b.append(limit)
            b.append(bulk)
            b.append(fast)
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// The second half of a claim: the rows of the leases the first took, with no lock held, one
    /// row per lease as ``claimed(_:capacity:)`` reads it: the new leases' rows (`$2`), then
    /// the rows with no outcome yet of those taken over (`$3`). A lease another worker took
    /// meanwhile (this one's ran out in between) is not among them.
    struct ClaimedRowsStatement: PostgresPreparedStatement {
        static let sql = """
            WITH taken AS (SELECT * FROM herald_leases WHERE lease = ANY($3::bigint[]) AND owner = $1)
            SELECT l.lease, l.attempts, a.ids, a.bodies
            FROM herald_leases l CROSS JOIN LATERAL (\(PostgresQueue.newRows(of: "l"))) a
            WHERE l.lease = ANY($2::bigint[]) AND l.owner = $1
            UNION ALL
            \(PostgresQueue.unfinishedRows(of: "taken"))
            """
        static let bindingDataTypes: [PostgresDataType] = [.text, .int8Array, .int8Array]
        typealias Row = ClaimRow

        var owner: String
        var fresh: [Int64]
        var taken: [Int64]

        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 3)
            b.append(owner)
            b.append(fresh)
            b.append(taken)
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
