import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldPayload

/// `herald bench payload`: payloads per second for a fixed mix, next to
/// Foundation's `JSONEncoder` encoding the same notifications in the same run.
struct BenchPayload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Build + size-guard payloads for the seeds' examples and truncation cases; JSONEncoder as the baseline."
    )

    @Option(help: "Payloads to build with Herald's builder.")
    var count = 5_000_000

    @Option(help: "Payloads to encode with JSONEncoder (the baseline).")
    var baselineCount = 300_000

    @Option(help: "Timed rounds of each; the best round counts.")
    var rounds = 3

    func run() async throws {
        let mix = try PayloadBenchMix.requests()
        let limit = SizeLimit.legacyBinary
        let build = BuildPayloadStage(APSPayloadBuilder())
        let size = SizeGuardStage(TruncatingSizeGuard(limit: limit))

        // The final payloads, and the same notifications (after truncation) as Codable structs.
        var finals: [[UInt8]] = []
        var codables: [CodablePayload] = []
        var truncated = 0
        for r in mix {
            var e = Envelope(sequence: 0, request: r)
            try build.apply(&e)
            let before = e.payload.count
            try size.apply(&e)
            if e.payload.count != before { truncated += 1 }
            finals.append(e.payload)
            codables.append(CodablePayload(e.request))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var equivalent = true
        for (c, f) in zip(codables, finals) {
            let theirs = try JSONParser.parse(Array(try encoder.encode(c)))
            let ours = try JSONParser.parse(f)
            equivalent = equivalent && theirs.semanticallyEquals(ours)
        }

        var bytes = 0
        let batchSize = 4096
        /// Best-of-rounds seconds for the payload and size-guard stages to process `n`
        /// envelopes cycling through `requests`, in batches as the pipeline hands them over.
        /// Making each batch's envelopes (the source's work) and freeing them are not timed.
        /// Time is this process's CPU time: the rate on one core, whatever else the machine runs.
        func time(_ requests: [NotificationRequest], _ n: Int) async throws -> Double {
            var best = Double.infinity
            for _ in 0..<rounds {
                var total = Duration.zero
                var done = 0
                var k = 0
                while done < n {
                    var batch: [Envelope] = []
                    batch.reserveCapacity(batchSize)
                    for _ in 0..<min(batchSize, n - done) {
                        batch.append(Envelope(sequence: UInt64(done), request: requests[k]))
                        k += 1
                        if k == requests.count { k = 0 }
                    }
                    let start = CPUTime.now()
                    try await build.process(&batch)
                    try await size.process(&batch)
                    total += CPUTime.now() - start
                    for e in batch {
                        if let outcome = e.outcome { throw BenchError("unexpected outcome \(outcome)") }
                        bytes &+= e.payload.count
                    }
                    done += batch.count
                }
                best = min(best, total.inSeconds)
            }
            return best
        }
        let truncationOnly = try await time(Array(mix.dropFirst(PayloadBenchMix.lines.count)), count / 4)
        let seedsOnly = try await time(Array(mix.prefix(PayloadBenchMix.lines.count)), count / 2)
        let best = try await time(mix, count)

        // The same for JSONEncoder over the Codable mirrors; its outputs are kept per batch and freed untimed too.
        func baseline(_ items: [CodablePayload], _ n: Int) throws -> Double {
            var best = Double.infinity
            for _ in 0..<rounds {
                var total = Duration.zero
                var done = 0
                var k = 0
                var outputs: [Data] = []
                outputs.reserveCapacity(batchSize)
                while done < n {
                    let m = min(batchSize, n - done)
                    let start = CPUTime.now()
                    for _ in 0..<m {
                        outputs.append(try encoder.encode(items[k]))
                        k += 1
                        if k == items.count { k = 0 }
                    }
                    total += CPUTime.now() - start
                    for d in outputs { bytes &+= d.count }
                    outputs.removeAll(keepingCapacity: true)
                    done += m
                }
                best = min(best, total.inSeconds)
            }
            return best
        }
        let baselineTruncation = try baseline(Array(codables.dropFirst(PayloadBenchMix.lines.count)), baselineCount / 4)
        let baselineSeeds = try baseline(Array(codables.prefix(PayloadBenchMix.lines.count)), baselineCount / 2)
        let baselineBest = try baseline(codables, baselineCount)

        let rate = Double(count) / best
        let baselineRate = Double(baselineCount) / baselineBest
        var report = JSONLine()
        report.add("benchmark", "payload")
        report.add("mix", mix.count)
        report.add("mix_truncated", truncated)
        report.add("limit", limit.bytes)
        report.add("payloads", count)
        report.add("timing", "process CPU time, best of \(rounds) rounds")
        report.add("cpu_seconds", best, places: 3)
        report.add("payloads_per_second", rate, places: 0)
        report.add("ns_per_payload", 1e9 / rate, places: 1)
        report.add("seed_examples_payloads_per_second", Double(count / 2) / seedsOnly, places: 0)
        report.add("truncation_cases_payloads_per_second", Double(count / 4) / truncationOnly, places: 0)
        report.add("jsonencoder_payloads", baselineCount)
        report.add("jsonencoder_payloads_per_second", baselineRate, places: 0)
        report.add("speedup_vs_jsonencoder", rate / baselineRate, places: 1)
        report.add("jsonencoder_seed_examples_payloads_per_second", Double(baselineCount / 2) / baselineSeeds, places: 0)
        report.add("jsonencoder_truncation_cases_payloads_per_second", Double(baselineCount / 4) / baselineTruncation, places: 0)
        report.add("speedup_seed_examples", (Double(count / 2) / seedsOnly) / (Double(baselineCount / 2) / baselineSeeds), places: 1)
        report.add("speedup_truncation_cases", (Double(count / 4) / truncationOnly) / (Double(baselineCount / 4) / baselineTruncation), places: 1)
        report.add("jsonencoder_output_equivalent", equivalent)
        report.add("goal_payloads_per_second", 3_000_000)
        report.add("goal_speedup", 15)
        report.add("goal_met", rate >= 3_000_000 && rate / baselineRate >= 15)
        if bytes == -1 { report.add("sink", bytes) }
        report.print()
    }
}

/// The fixed mix: the seeds' example payloads and texts that need truncating at 256 bytes.
enum PayloadBenchMix {
    /// Every distinct example payload of the seeds (the chapter's `{"body":"hello"}` alert is the same
    /// notification as its `"hello"` string, so it appears once).
    static let lines: [String] = [
        // The payload guides' five examples and the current reference's three listings.
        #"{"alert":"Message received from Bob","custom":{"acme2":["bang","whiz"]}}"#,
        #"{"alert":{"body":"Bob wants to play poker","action-loc-key":"PLAY"},"badge":5,"custom":{"acme1":"bar","acme2":["bang","whiz"]}}"#,
        #"{"alert":"You got your emails.","badge":9,"sound":"bingbong.aiff","custom":{"acme1":"bar","acme2":42}}"#,
        #"{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]},"sound":"chime","custom":{"acme":"foo"}}"#,
        #"{"custom":{"acme2":[5,8]}}"#,
        #"{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker"},"category":"GAME_INVITATION","custom":{"gameID":"12345678"}}"#,
        #"{"badge":9,"sound":"bingbong.aiff","custom":{"messageID":"ABCDEFGHIJ"}}"#,
        #"{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"]}}"#,
        // The table of samples in the "Building Notification Payloads" chapter.
        #"{"alert":"hello"}"#,
        #"{"alert":{"action-loc-key":null,"body":"hello"}}"#,
        #"{"alert":{"action-loc-key":"Open","body":"hello"}}"#,
        #"{"badge":3,"alert":{"body":"hello"}}"#,
        #"{"sound":"ping2.caf","alert":{}}"#,
        #"{"sound":"ping2.caf","badge":2,"alert":{"action-loc-key":"Open","body":"Hello"}}"#,
        #"{"alert":{"body":"Hello"},"custom":{"key1":"value1","key2":["a","b","c"]}}"#,
    ]

    /// Long texts, over 256 bytes: ASCII, emoji with joiners and skin tones, CJK with quotes, RTL with marks.
    static let longTexts: [String] = [
        String(repeating: "Your order #1234 has shipped and will arrive on Tuesday. ", count: 8),
        String(repeating: "Gol! ⚽️ 👩🏽‍🦱👨‍👩‍👧‍👦 🇫🇷 ", count: 12),
        String(repeating: "「東京」で\"会議\"があります。\\ ", count: 14),
        String(repeating: "שָׁלוֹם עֲלֵיכֶם é\u{301} ", count: 12),
    ]

    static func requests() throws -> [NotificationRequest] {
        let token = DeviceToken(bytes: (0..<32).map { UInt8($0) })
        var out: [NotificationRequest] = []
        for line in lines {
            var r = try RequestDecoder().decode(JSONParser.parse(line.replacingOccurrences(of: "{", with: "{\"token\":\"\(token.hex)\",", options: [.anchored])))
            r.topic = "com.example.app"
            out.append(r)
        }
        for (k, text) in longTexts.enumerated() {
            var aps = APS()
            aps.alert = Alert(body: text, title: k % 2 == 0 ? "Update" : nil)
            aps.badge = k
            aps.sound = .named("default")
            out.append(NotificationRequest(token: token, aps: aps, custom: JSONObject([("id", .int(k))]), topic: "com.example.app"))
        }
        return out
    }
}

/// The same notifications as Codable structs, for the JSONEncoder baseline.
struct CodablePayload: Encodable {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    struct CodableAlert: Encodable {
        var title: String?
        var subtitle: String?
        var body: String?
        /// `.some(nil)`: an explicit `null` (a single OK button).
        var actionLocKey: String??
        var locKey: String?
        var locArgs: [String]?
        enum CodingKeys: String, CodingKey {
            case title, subtitle, body
            case actionLocKey = "action-loc-key"
            case locKey = "loc-key"
            case locArgs = "loc-args"
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(title, forKey: .title)
            try c.encodeIfPresent(subtitle, forKey: .subtitle)
            try c.encodeIfPresent(body, forKey: .body)
            if let action = actionLocKey {
                if let action { try c.encode(action, forKey: .actionLocKey) } else { try c.encodeNil(forKey: .actionLocKey) }
            }
            try c.encodeIfPresent(locKey, forKey: .locKey)
            try c.encodeIfPresent(locArgs, forKey: .locArgs)
        }
    }

    enum AlertValue: Encodable {
        case string(String)
        case dictionary(CodableAlert)
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .string(let s): try c.encode(s)
            case .dictionary(let d): try c.encode(d)
            }
        }
    }

    struct CodableAPS: Encodable {
        var alert: AlertValue?
        var badge: Int?
        var sound: String?
        var category: String?
    }

    enum Value: Encodable {
        case string(String)
        case int(Int)
        case array([Value])
        func encode(to encoder: any Encoder) throws {
            switch self {
            case .string(let s): var c = encoder.singleValueContainer(); try c.encode(s)
            case .int(let n): var c = encoder.singleValueContainer(); try c.encode(n)
            case .array(let a): var c = encoder.unkeyedContainer(); for v in a { try c.encode(v) }
            }
        }
        init(_ v: JSONValue) {
            switch v {
            case .string(let s): self = .string(s)
            case .number(let n): self = .int(n.intValue ?? 0)
            case .array(let a): self = .array(a.map(Value.init))
            default: self = .string("")
            }
        }
    }

    var aps: CodableAPS
    var custom: [(String, Value)]

    init(_ r: NotificationRequest) {
        var alert: AlertValue?
        if let a = r.aps.alert {
            if a.isBodyOnly, let body = a.body {
                alert = .string(body)
            } else {
                alert = .dictionary(CodableAlert(
                    title: a.title, subtitle: a.subtitle, body: a.body, actionLocKey: a.actionLocKey,
                    locKey: a.locKey, locArgs: a.locArgs))
            }
        }
        var sound: String?
        if case .named(let s)? = r.aps.sound { sound = s }
        aps = CodableAPS(alert: alert, badge: r.aps.badge, sound: sound, category: r.aps.category)
        custom = r.custom.map { ($0.key, Value($0.value)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(aps, forKey: Key("aps"))
        for (k, v) in custom { try c.encode(v, forKey: Key(k)) }
    }
}

/// This process's CPU time, so that rates mean "on one core" on a shared machine.
enum CPUTime {
    static func now() -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}
