import ArgumentParser
import Foundation
import HeraldJSON
#if canImport(Glibc)
import Glibc
#endif

/// `herald bench send`: `herald send FILE` as users run it (its own process, the default
/// pipeline to the in-memory simulator, outcomes to a file) on every core against the same run
/// pinned to one core, and against orjson parsing the same lines (issue 29).
struct BenchSend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "herald send FILE on every core against one core (taskset -c 0) and against orjson parse-only of the same lines.",
        discussion: """
            Writes --count generated request lines to a file, then round after round runs, in turn: \
            herald send on one core (taskset -c 0), herald send on every core this process may use, \
            and orjson merely parsing the same lines on one core (python with orjson: \
            Tests/Interop/setup.sh makes a venv that has it). Each herald send is timed from its start \
            to its exit; orjson's loop is timed by itself, interpreter start-up left out. Each side's \
            best round counts; every round is listed. The outcomes of both herald runs are compared \
            byte for byte (the same lines in the same order).

            Goals (issue 29): every core at least 1.7x one core on 2 cores; one core at least 0.5x \
            orjson parse-only.

            Example: herald bench send --count 1000000 --rounds 3
            """
    )

    @Option(help: "Request lines to generate.") var count = 1_000_000
    @Option(help: "Rounds; each side runs once a round, in turn.") var rounds = 3
    @Option(help: "Python with orjson for the parse-only baseline (default: .build/interop-venv/bin/python if it exists, else python3); none skips it.")
    var python: String?
    @Option(help: "herald send --threads for the every-core run (0: every core).") var threads = 0

    static let orjsonScript = """
        import sys, time, orjson
        loads = orjson.loads
        n = 0
        with open(sys.argv[1], 'rb') as f:
            start = time.perf_counter()
            for line in f:
                loads(line)
                n += 1
            print(n, time.perf_counter() - start)
        """

    func run() async throws {
        guard rounds >= 1, count >= 1 else { throw BenchError("--rounds and --count: at least 1") }
        let herald = try BenchProcess.selfExecutable()
        guard let taskset = Self.executable("taskset") else { throw BenchError("taskset (util-linux) is not on PATH: the one-core run needs it") }
        let dir = NSTemporaryDirectory() + "herald-bench-send-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let input = dir + "/requests.jsonl"
        try writeBenchRequests(count: count, seed: 29, to: input)
        let interpreter = python ?? (FileManager.default.isExecutableFile(atPath: ".build/interop-venv/bin/python") ? ".build/interop-venv/bin/python" : "python3")
        let orjson = interpreter == "none" ? nil : Self.executable(interpreter)

        var one: [Double] = [], every: [Double] = [], parse: [Double] = []
        var oneCPU: [Double] = [], everyCPU: [Double] = []
        var orjsonProblem: String?
        for _ in 0..<rounds {
            // Each round writes a new outcome file, as the first does: emptying the last round's
            // (120 MB for a million) took 10-40 ms of the timed run, and only from round two on.
            for name in ["/one.jsonl", "/every.jsonl"] where FileManager.default.fileExists(atPath: dir + name) {
                try FileManager.default.removeItem(atPath: dir + name)
            }
            let a = try await BenchProcess.send(herald, input: input, outcomes: dir + "/one.jsonl", log: dir + "/send.log", launcher: [taskset, "-c", "0"])
            one.append(a.seconds)
            oneCPU.append(a.cpu)
            let b = try await BenchProcess.send(herald, input: input, outcomes: dir + "/every.jsonl", log: dir + "/send.log", extra: ["--threads", String(threads)])
            every.append(b.seconds)
            everyCPU.append(b.cpu)
            if let orjson, orjsonProblem == nil {
                do { parse.append(try await Self.orjsonSeconds(taskset, orjson, input: input, count: count, dir: dir)) } catch { orjsonProblem = "\(error)" }
            }
        }
        let identical = try Self.sameBytes(dir + "/one.jsonl", dir + "/every.jsonl")
        let outcomeLines = try Self.lineCount(dir + "/every.jsonl")
        guard outcomeLines == count else { throw BenchError("\(outcomeLines) outcome lines for \(count) requests") }

        var report = JSONLine()
        report.add("benchmark", "send")
        report.add("notifications", count)
        report.add("rounds", rounds)
        report.add("cores", ProcessInfo.processInfo.activeProcessorCount)
        report.add("one_core_per_s", Double(count) / one.min()!, places: 0)
        report.add("every_core_per_s", Double(count) / every.min()!, places: 0)
        report.add("one_core_rounds_s", one, places: 3)
        report.add("every_core_rounds_s", every, places: 3)
        report.add("one_core_rounds_cpu_s", oneCPU, places: 2)
        report.add("every_core_rounds_cpu_s", everyCPU, places: 2)
        report.add("ratio_cores", one.min()! / every.min()!, places: 3)
        report.add("goal_ratio_cores", 1.7, places: 1)
        if let best = parse.min() {
            report.add("orjson_parse_per_s", Double(count) / best, places: 0)
            report.add("orjson_rounds_s", parse, places: 3)
            report.add("ratio_one_core_to_orjson", best / one.min()!, places: 3)
            report.add("goal_ratio_orjson", 0.5, places: 1)
        } else {
            report.add("orjson", orjsonProblem ?? (orjson == nil ? "no python (\(interpreter))" : "skipped"))
        }
        report.add("outcomes_identical", identical)
        report.add("peak_child_rss_mib", Self.peakChildMiB(), places: 1)
        report.add("allocator", Self.allocator)
        report.print()
    }

    /// The allocator this process (and so each `herald send` it starts, the same executable) has:
    /// jemalloc's version when it is linked in (the herald executable links it), else the C
    /// library's malloc. Looked up, not linked: this module does not bring jemalloc with it.
    static let allocator: String = {
        typealias MallCtl = @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?, UnsafeMutableRawPointer?, Int) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") else { return "glibc malloc" }
        let mallctl = unsafeBitCast(symbol, to: MallCtl.self)
        var text: UnsafePointer<CChar>? = nil
        var size = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &text, &size, nil, 0) == 0, let text else { return "jemalloc" }
        return "jemalloc " + String(cString: text)
    }()

    /// orjson's parse-only loop over `input` on core 0: the seconds it printed.
    static func orjsonSeconds(_ taskset: String, _ python: String, input: String, count: Int, dir: String) async throws -> Double {
        let p = try BenchProcess(taskset, ["-c", "0", python, "-c", orjsonScript, input], log: dir + "/orjson.log")
        try await p.exit(expecting: 0)
        let out = try String(contentsOfFile: p.log, encoding: .utf8).split(separator: " ")
        guard out.count == 2, Int(out[0]) == count, let s = Double(out[1].trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("orjson printed \(p.logTail())")
        }
        return s
    }

    /// `name` found on PATH (or a path that is executable).
    static func executable(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    static func sameBytes(_ a: String, _ b: String) throws -> Bool {
        guard let x = FileManager.default.contents(atPath: a), let y = FileManager.default.contents(atPath: b) else { throw BenchError("cannot read \(a) or \(b)") }
        return x == y
    }

    static func lineCount(_ path: String) throws -> Int {
        guard let data = FileManager.default.contents(atPath: path) else { throw BenchError("cannot read \(path)") }
        return data.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }

    /// The largest resident set of any child waited for so far (`ru_maxrss`), in MiB.
    static func peakChildMiB() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage) == 0 else { return -1 }
        return Double(usage.ru_maxrss) / 1024
    }
}
