import HeraldCore
import PostgresNIO
import Synchronization

extension PostgresQueue {
    /// A row's outcome, to be written back.
    public struct Finished: Sendable {
        public var id: Int64
        public var lease: Int64
        public var record: OutcomeRecord
        /// The lease's claims when this worker claimed the row (nil: the lease's count when written).
        public var attempts: Int?
        public init(id: Int64, lease: Int64, record: OutcomeRecord, attempts: Int? = nil) {
            self.id = id
            self.lease = lease
            self.record = record
            self.attempts = attempts
        }
    }

    /// Whether a row with this outcome goes back to the queue instead of
    /// ending: it failed only because this process stopped (a second signal,
    /// the drain deadline), so another worker, or this one restarted, sends it.
    static func releases(_ outcome: Outcome) -> Bool {
        if case .failed(let why) = outcome { return why.code == .abandoned || why.code == .shutdownDeadline }
        return false
    }

    /// A write's rows with the same lease and the same outcome: one row of `herald_outcomes`.
    struct OutcomeGroup: Hashable {
        var lease: Int64
        var outcome: String
        /// -1: none.
        var status: Int32 = -1
        var code = ""
        var reason = ""
        var release = false
        /// The claims recorded (-1: the lease's count when written).
        var attempts: Int32 = -1
    }

    /// The groups of `rows`, in order of first appearance, each with its rows' positions in the
    /// flat arrays (ids ascending within a group, with their APNs ids, "" where none), as
    /// 1-based inclusive bounds `lo...hi`.
    static func grouped(_ rows: [Finished]) -> (groups: [OutcomeGroup], bounds: [(lo: Int32, hi: Int32)], ids: [Int64], apnsIDs: [String]) {
        var index: [OutcomeGroup: Int] = [:]
        var groups: [OutcomeGroup] = []
        var members: [[(id: Int64, apnsID: String)]] = []
        var last: (OutcomeGroup, Int)?
        for f in rows {
            let r = f.record
            var g = OutcomeGroup(
                lease: f.lease, outcome: r.outcome.kind.rawValue, release: Self.releases(r.outcome), attempts: f.attempts.map { Int32(clamping: $0) } ?? -1)
            switch r.outcome {
            case .rejected(let status):
                g.status = Int32(clamping: status.rawValue)
                g.reason = status.description
            case .dropped(let why), .failed(let why), .cancelled(let why):
                g.code = why.code.name
                g.reason = why.message
            case .accepted, .suppressed:
                break
            }
            let k: Int
            // Nearly every row is in the group of the row before it: no hashing for those.
            if let (previous, at) = last, previous == g {
                k = at
            } else if let at = index[g] {
                k = at
            } else {
                k = groups.count
                index[g] = k
                groups.append(g)
                members.append([])
            }
            last = (g, k)
            members[k].append((f.id, r.apnsID ?? ""))
        }
        var ids: [Int64] = [], apnsIDs: [String] = [], bounds: [(lo: Int32, hi: Int32)] = []
        ids.reserveCapacity(rows.count)
        apnsIDs.reserveCapacity(rows.count)
        for var m in members {
            m.sort { $0.id < $1.id }
            bounds.append((Int32(ids.count + 1), Int32(ids.count + m.count)))
            for (id, apnsID) in m {
                ids.append(id)
                apnsIDs.append(apnsID)
            }
        }
        return (groups, bounds, ids, apnsIDs)
    }

    /// Writes outcomes, appending them to `herald_outcomes` (a row per lease and outcome among
    /// them), in one statement, only for rows whose lease this worker still holds, and drops the
    /// leases in `completing` (every row of theirs is finished with this write). Rows of a lease
    /// claimed more than once are marked `possible_duplicate`. Rows that failed only because this
    /// process stopped (``releases(_:)``) go back to the queue instead, in a lease no one holds,
    /// counted in `released`.
    public func finish(_ rows: [Finished], completing: [Int64] = []) async throws(QueueError) -> (written: Int, possibleDuplicates: Int, released: Int) {
        let (groups, bounds, ids, apns) = Self.grouped(rows)
        let statement = FinishStatement(
            owner: owner, groups: groups, bounds: bounds, ids: ids,
            // No APNs ids at all (the binary interface has none): none sent.
            apnsIDs: apns.contains { !$0.isEmpty } ? apns : [],
            released: zip(groups, bounds).filter(\.0.release).flatMap { ids[Int($1.lo - 1)..<Int($1.hi)] }, completing: completing)
        return try await named("writing \(rows.count) outcomes") { [self] in
            var result = (written: 0, possibleDuplicates: 0, released: 0)
            for try await (written, duplicates, released, _) in try await prepared(statement) {
                result = (written, duplicates, released)
            }
            if Self.takeOne(loseWriteAnswers) { throw QueueError("PostgreSQL \(configuration): writing outcomes: the answer was lost (a test's fault)", isOutage: true) }
            return result
        }
    }

    /// The outcome write (``PostgresQueue/finish(_:completing:)``) as a prepared statement, on the
    /// pool of generic plans: parsed and planned once per connection, not on every write (planning
    /// took as long as running it).
    ///
    /// One statement, its own transaction: no BEGIN and COMMIT round trips. The write does not wait for
    /// the WAL to reach the disk (`synchronous_commit` off for this transaction only): an outcome
    /// a database crash loses leaves its lease in place; once it runs out its rows are taken over
    /// and marked possible_duplicate, as after a worker's crash. The claim, whose loss would not
    /// be marked, keeps the default.
    struct FinishStatement: PostgresPreparedStatement {
        static let sql = """
            WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
            mine AS (
                -- KEY SHARE: no one takes these leases over (or drops them) until this write commits,
                -- but renewing them goes on, however long the write takes.
                SELECT lease, attempts FROM herald_leases WHERE lease = ANY($2::bigint[]) AND owner = $1 FOR KEY SHARE
            ), g AS (
                -- The claims as when this worker claimed the rows: a takeover by one of its own
                -- claims since, which sent nothing twice, is not counted.
                SELECT g.*, coalesce(nullif(g.claimed, -1), m.attempts) AS attempts, ($3::bigint[])[g.lo:g.hi] AS ids,
                       CASE WHEN cardinality($4::text[]) > 0 THEN ($4::text[])[g.lo:g.hi] END AS apns
                FROM unnest($2::bigint[], $5::text[], $6::int[], $7::text[], $8::text[], $9::bool[], $10::int[], $11::int[], $14::int[])
                    AS g(lease, outcome, status, code, reason, release, lo, hi, claimed)
                JOIN mine m ON m.lease = g.lease
            ), w AS (
                INSERT INTO herald_outcomes (lease, first_id, ids, outcome, status, reason_code, reason, apns_ids, possible_duplicate, attempts, owner)
                SELECT g.lease, g.ids[1], g.ids, g.outcome, NULLIF(g.status, -1), NULLIF(g.code, ''), NULLIF(g.reason, ''), g.apns,
                       g.attempts > 1, g.attempts, $1
                FROM g WHERE NOT g.release
                -- Already there: this write was sent before and committed, its answer lost.
                ON CONFLICT (lease, first_id) DO NOTHING
                RETURNING cardinality(ids) AS n, possible_duplicate
            ), earlier AS (
                -- Groups this worker wrote already: this write was sent before and committed, its
                -- answer lost (its lease may be gone since). Counted as written, not as lost. One
                -- look-up per group by (lease, first_id), its unique index: the LIMIT keeps the
                -- planner from making it a join, which a plan made while the table looked empty
                -- (the statement is prepared once per session) did as a full scan of every outcome
                -- row on every write: quadratic in a campaign's small writes (docs/scale-out.md).
                SELECT o.ids, o.possible_duplicate
                FROM unnest($2::bigint[], $10::int[]) AS a(lease, lo)
                CROSS JOIN LATERAL (
                    SELECT ids, possible_duplicate FROM herald_outcomes
                    WHERE lease = a.lease AND first_id = ($3::bigint[])[a.lo] AND owner = $1 LIMIT 1
                ) o
            ), back AS (
                -- Only rows the lease still holds: sent again after a lost answer, a release that
                -- committed finds its rows gone from the lease, and gives back nothing twice. (One
                -- INTERSECT per group: the lease's rows are listed once, not once per row given back.)
                INSERT INTO herald_leases (ids, owner, expires, attempts)
                SELECT array_agg(k.x ORDER BY k.x), '', '-infinity', max(g.attempts)
                FROM g JOIN herald_leases l ON l.lease = g.lease
                CROSS JOIN LATERAL (SELECT unnest(g.ids) INTERSECT SELECT y FROM \(PostgresQueue.leaseRows(of: "l")) AS y) AS k(x)
                WHERE g.release
                HAVING count(*) > 0
                RETURNING cardinality(ids) AS n
            ), trimmed AS (
                -- Read by nothing: a data-modifying CTE runs to completion all the same.
                -- A range lease becomes a lease of the ids left.
                UPDATE herald_leases l
                SET ids = ARRAY(SELECT x FROM \(PostgresQueue.leaseRows(of: "l")) AS x WHERE NOT x = ANY($12::bigint[])),
                    lo_xid = NULL, lo_id = NULL, hi_xid = NULL, hi_id = NULL, lo_snap = NULL, hi_snap = NULL
                WHERE cardinality($12::bigint[]) > 0 AND l.lease IN (SELECT lease FROM mine) AND l.owner = $1 AND NOT l.lease = ANY($13::bigint[])
                  AND EXISTS (SELECT 1 FROM \(PostgresQueue.leaseRows(of: "l")) AS x WHERE x = ANY($12::bigint[]))
            ), dropped AS (
                DELETE FROM herald_leases WHERE lease = ANY($13::bigint[]) AND owner = $1 AND lease IN (SELECT lease FROM mine)
            )
            SELECT coalesce((SELECT sum(n) FROM w), 0)::bigint + coalesce((SELECT sum(cardinality(ids)) FROM earlier), 0)::bigint,
                   coalesce((SELECT sum(n) FROM w WHERE possible_duplicate), 0)::bigint
                       + coalesce((SELECT sum(cardinality(ids)) FROM earlier WHERE possible_duplicate), 0)::bigint,
                   coalesce((SELECT sum(n) FROM back), 0)::bigint, (SELECT set_config FROM durability)
            """
        static let bindingDataTypes: [PostgresDataType] = [
            .text, .int8Array, .int8Array, .textArray, .textArray, .int4Array, .textArray, .textArray, .boolArray, .int4Array, .int4Array,
            .int8Array, .int8Array, .int4Array,
        ]
        typealias Row = (Int, Int, Int, String)

        var owner: String
        var groups: [OutcomeGroup]
        var bounds: [(lo: Int32, hi: Int32)]
        var ids: [Int64]
        var apnsIDs: [String]
        var released: [Int64]
        var completing: [Int64]

        /// In the order of `bindingDataTypes`: the groups' columns as arrays, one element per group.
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 14)
            b.append(owner)
            b.append(groups.map(\.lease))
            b.append(ids)
            b.append(apnsIDs)
            b.append(groups.map(\.outcome))
            b.append(groups.map(\.status))
            b.append(groups.map(\.code))
            b.append(groups.map(\.reason))
            b.append(groups.map(\.release))
            b.append(bounds.map(\.lo))
            b.append(bounds.map(\.hi))
            b.append(released)
            b.append(completing)
            b.append(groups.map(\.attempts))
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
