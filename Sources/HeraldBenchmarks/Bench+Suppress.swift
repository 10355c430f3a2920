import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldStore

/// `herald bench suppress`: the suppression stage's question against a large
/// persistent token store.
struct BenchSuppress: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suppress",
        abstract: "Token store look-ups per second against millions of stored tokens; start-up time and memory.",
        discussion: """
            Fills an SQLite token store with --tokens rows (a --dead-fraction of them unregistered; \
            the rest registered), or reuses --store when it exists, reopens it (start-up: reading the \
            suppression index), then asks isSuppressed for --lookups tokens, half of them stored and \
            half never seen, on one thread, checking every answer. Goal (issue 14): 2,000,000 \
            look-ups per second against 10,000,000 stored tokens.
            """
    )

    @Option(help: "Rows in the store.") var tokens = 10_000_000
    @Option(help: "Fraction of the rows that are unregistered (suppressing).") var deadFraction = 0.1
    @Option(help: "Look-ups to time.") var lookups = 10_000_000
    @Option(help: "The store's path: reused when it exists (made by an earlier run with the same --tokens and --dead-fraction), else made and kept.")
    var store: String?

    /// Token `i` of the run: 32 bytes from a seeded mix, the same on every run.
    static func token(_ i: Int) -> DeviceToken {
        var g = SeededGenerator(seed: UInt64(i) &* 0xD6E8_FEB8_6659_FD93)
        var words = (g.next(), g.next(), g.next(), g.next())
        return withUnsafeBytes(of: &words) { DeviceToken(copying: $0) }
    }

    func isDead(_ i: Int) -> Bool { Double(i % 1000) < deadFraction * 1000 }

    func run() async throws {
        // Options read once: ArgumentParser's property wrappers cost more than a look-up.
        let tokens = self.tokens, lookups = self.lookups
        let topic = "com.example.app"
        let temporary = store == nil
        let path = store ?? NSTemporaryDirectory() + "herald-bench-suppress-\(getpid()).db"
        defer {
            if temporary {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        let reused = FileManager.default.fileExists(atPath: path)
        var buildSeconds = 0.0
        if !reused {
            buildSeconds = try measureSync {
                let s = try SQLiteTokenStore(path: path)
                var start = 0
                while start < tokens {
                    let end = min(tokens, start + 100_000)
                    // In key order (the first 8 bytes decide, for random tokens): SQLite's B-tree is then written page by page.
                    let order = (start..<end).map { i in (key: Self.token(i).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self).bigEndian }, i: i) }
                        .sorted { $0.key < $1.key }
                    let batch = order.map { o in
                        TokenEvent(token: Self.token(o.i), topic: topic, kind: isDead(o.i) ? .unregistered : .registered, time: 1_700_000_000, source: .imported)
                    }
                    s.apply(batch)
                    if let failure = s.failure { throw BenchError("\(failure)") }
                    start = end
                }
            }
        }
        let rssBefore = peakResidentMiB()
        let opened = try SQLiteTokenStore(path: path)
        let rows = try opened.statistics().rows
        guard rows == tokens else { throw BenchError("\(path) holds \(rows) rows, not --tokens \(tokens): give another --store") }

        let clock = ContinuousClock()
        let started = clock.now
        var suppressed = 0
        for n in 0..<lookups {
            // Even: a stored token; odd: one never stored.
            let i = n & 1 == 0 ? (n >> 1) % tokens : tokens + n
            if opened.isSuppressed(Self.token(i), topic: topic) { suppressed += 1 }
        }
        let seconds = (clock.now - started).inSeconds
        // The token generator alone, to show what the loop costs besides the look-up.
        let generateStart = clock.now
        var sink: UInt64 = 0
        for n in 0..<lookups { sink &+= UInt64(truncatingIfNeeded: Self.token(n).count) }
        let generateSeconds = (clock.now - generateStart).inSeconds
        var expected = 0
        let deadPerThousand = Int(deadFraction * 1000)
        for n in stride(from: 0, to: lookups, by: 2) where (n >> 1) % tokens % 1000 < deadPerThousand { expected += 1 }
        guard suppressed == expected else { throw BenchError("\(suppressed) look-ups suppressed, \(expected) expected") }

        let rate = Double(lookups) / seconds
        var r = JSONLine()
        r.add("benchmark", "suppress")
        r.add("stored_tokens", rows)
        r.add("dead_fraction", deadFraction, places: 3)
        r.add("store_reused", reused)
        if !reused {
            r.add("build_s", buildSeconds, places: 2)
            r.add("build_rows_per_s", Double(tokens) / buildSeconds, places: 0)
        }
        r.add("store_file_mib", Double(try opened.statistics().fileBytes) / 1_048_576, places: 1)
        r.add("startup_s", opened.startup.seconds, places: 3)
        r.add("index_rows", opened.startup.rowsLoaded)
        r.add("index_mib", Double(opened.indexBytes) / 1_048_576, places: 1)
        r.add("peak_rss_mib_before_open", rssBefore, places: 1)
        r.add("peak_rss_mib", peakResidentMiB(), places: 1)
        r.add("lookups", lookups)
        r.add("suppressed", suppressed)
        r.add("lookups_per_s", rate, places: 0)
        r.add("generator_only_per_s", Double(lookups) / generateSeconds, places: 0)
        r.add("goal_lookups_per_s", 2_000_000)
        r.add("goal_met", rate >= 2_000_000 && rows >= 10_000_000)
        r.add("sink", Int(sink & 1))
        r.print()
    }
}

func measureSync(_ body: () throws -> Void) throws -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    return (clock.now - start).inSeconds
}
