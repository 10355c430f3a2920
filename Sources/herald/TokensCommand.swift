import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldStore

/// `herald tokens`: the persistent token store.
struct TokensCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Look after the token store: list, export, import, register, forget, stats.",
        discussion: """
            The store is the SQLite database named by the configuration's tokens.path (or --store). \
            Per token and topic it keeps the newest registration and unregistration, each with its \
            source (feedback, status-8, http-410, registration, import); a request is suppressed when \
            the unregistration is not older than the registration. Rows without a topic apply to every \
            topic (the binary interface's feedback names no app).

            Examples:
              herald tokens stats --store tokens.db
              herald tokens list --config herald.json --suppressed
              herald tokens register --store tokens.db --token <hex> --topic com.example.app
              herald tokens export --store tokens.db > tokens.jsonl
              herald tokens import --store other.db tokens.jsonl
            """,
        subcommands: [List.self, Export.self, Import.self, Register.self, Forget.self, Stats.self]
    )

    struct StoreOptions: ParsableArguments {
        @Option(help: "Configuration file (JSON) whose tokens.path names the store.")
        var config: String?

        @Option(help: "The store's path (instead of --config).")
        var store: String?

        func validate() throws {
            if (config == nil) == (store == nil) { throw ValidationError("give --store PATH or --config FILE (with tokens.path)") }
        }

        /// Opens the store; `existing`: a command that only reads (list, export, stats) refuses a
        /// store that is not there rather than create an empty one and report nothing in it.
        func open(existing: Bool = false) throws -> SQLiteTokenStore {
            var path = store
            if let config {
                let configuration = try loadConfiguration(config)
                guard let p = configuration.tokenStorePath else { throw SetupError("\(config): no tokens.path: the token store is in memory only") }
                path = p
            }
            if existing && !FileManager.default.fileExists(atPath: path!) {
                throw SetupError("\(path!): no token store there (nothing was created); check --store or tokens.path")
            }
            do { return try SQLiteTokenStore(path: path!) } catch { throw SetupError("\(error)") }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One JSON line per token and topic (tokens shortened unless --full-tokens).")
        @OptionGroup var options: StoreOptions
        @Option(help: "Only this topic.") var topic: String?
        @Option(help: "Only this token (hex).") var token: String?
        @Flag(help: "Only rows that suppress requests.") var suppressed = false
        @Flag(help: "Print whole tokens (they identify devices: keep the output private).") var fullTokens = false

        func run() throws {
            try write(try options.open(existing: true), topic: topic, token: token, shorten: !fullTokens, suppressedField: true) { !suppressed || $0.isSuppressed }
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The store as JSON Lines, whole tokens, for herald tokens import.")
        @OptionGroup var options: StoreOptions
        @Option(help: "Only this topic.") var topic: String?
        func run() throws { try write(try options.open(existing: true), topic: topic, token: nil, shorten: false) { _ in true } }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read JSON Lines exports (or the old journal) into the store; a bad line is reported and skipped.")
        @OptionGroup var options: StoreOptions
        @Argument(help: "Files to read (- for standard input).") var files: [String]

        func run() throws {
            let store = try options.open()
            var imported = 0, bad = 0
            for file in files {
                var reader: LineReader
                do { reader = try LineReader(path: file) } catch { throw SetupError("cannot read \(file): \(error)") }
                var batch: [TokenEvent] = []
                func commit() throws {
                    store.apply(batch)
                    if let failure = store.failure { throw SetupError("\(failure)") }
                    imported += batch.count
                    batch.removeAll(keepingCapacity: true)
                }
                while true {
                    let next: LineReader.Line?
                    do { next = try reader.next() } catch { throw SetupError("cannot read \(file): \(error)") }
                    guard let next else { break }
                    switch next {
                    case .line(let n, let bytes):
                        if bytes.isEmpty { continue }
                        do { batch += try TokenExport.events(bytes, line: n) } catch {
                            bad += 1
                            writeToStandardError("herald: \(file): \(error)\n")
                        }
                    case .tooLong(let n):
                        bad += 1
                        writeToStandardError("herald: \(file): line \(n): too long\n")
                    case .notReady:
                        continue
                    }
                    // One transaction per 10,000 events: a crash keeps every batch committed before it.
                    if batch.count >= 10_000 { try commit() }
                }
                try commit()
            }
            var line = JSONLine()
            line.add("imported_events", imported)
            line.add("bad_lines", bad)
            line.print()
            if bad > 0 { throw ExitCode(1) }
        }
    }

    struct Register: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Record that the app registered a token (again): requests to it go out.")
        @OptionGroup var options: StoreOptions
        @Option(help: "The device token (hex).") var token: String
        @Option(help: "The topic (bundle id); none: every topic.") var topic: String?
        @Option(help: "When, in UNIX seconds (default: now).") var at: UInt32?

        func run() throws {
            let store = try options.open()
            let t = try parseToken(token)
            store.registered(t, topic: topic, at: at ?? UInt32(clamping: Int(Date().timeIntervalSince1970)), source: .registration)
            if let failure = store.failure { throw SetupError("\(failure)") }
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove what the store knows of a token (for one topic, or all).")
        @OptionGroup var options: StoreOptions
        @Option(help: "The device token (hex).") var token: String
        @Option(help: "Only this topic.") var topic: String?

        func run() throws {
            let store = try options.open()
            let removed: Int
            do { removed = try store.forget(try parseToken(token), topic: topic) } catch { throw SetupError("\(error)") }
            var line = JSONLine()
            line.add("removed", removed)
            line.print()
        }
    }

    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One JSON object: rows, suppressed, by topic, file size, start-up.")
        @OptionGroup var options: StoreOptions

        func run() throws {
            let store = try options.open(existing: true)
            let s: TokenStoreStatistics
            do { s = try store.statistics() } catch { throw SetupError("\(error)") }
            var topics = JSONLine()
            for (topic, rows) in s.byTopic { topics.add(topic.isEmpty ? "(any)" : topic, rows) }
            var line = JSONLine()
            line.add("rows", s.rows)
            line.add("suppressed", s.suppressed)
            line.add("topics", topics)
            line.add("file_bytes", s.fileBytes)
            line.add("startup_s", store.startup.seconds)
            line.add("index_rows", store.startup.rowsLoaded)
            line.add("index_bytes", store.indexBytes)
            line.print()
        }
    }

    static func write(
        _ store: SQLiteTokenStore, topic: String?, token: String?, shorten: Bool, suppressedField: Bool = false, where keep: (TokenRecord) -> Bool
    ) throws {
        var out: [UInt8] = []
        let filter = try token.map(parseToken)
        do {
            try store.forEach(topic: topic, token: filter) { r throws(IOError) in
                guard keep(r) else { return }
                var w = JSONWriter(capacity: 0)
                swap(&w.bytes, &out)
                TokenExport.line(r, shortenTokens: shorten, suppressed: suppressedField, to: &w)
                w.byte(0x0A)
                swap(&w.bytes, &out)
                if out.count >= 1 << 16 { try writeAll(1, &out, to: "standard output") }
            }
            try writeAll(1, &out, to: "standard output")
        } catch let e as IOError {
            throw SetupError("\(e)")
        } catch {
            throw SetupError("\(error)")
        }
    }
}

private func parseToken(_ hex: String) throws -> DeviceToken {
    do { return try DeviceToken(hex: hex) } catch { throw SetupError("--token: \(error)") }
}
