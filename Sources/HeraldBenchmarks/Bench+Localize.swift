import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import HeraldLocalization

/// `herald bench localize`: server-side localized renders per second on one
/// core, for a realistic mix of keys, languages and arguments, against
/// Foundation's `String(format:)` on the same templates and arguments in the
/// same run.
struct BenchLocalize: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "localize",
        abstract: "Server-side localization renders per second (one core) against Foundation's String(format:).",
        discussion: """
            Writes a 14-language catalog (UTF-16 .strings, as genstrings does) to a temporary folder, loads it, \
            and localizes a mix of requests: 16 language tags (regional variants, Chinese scripts, two \
            unsupported ones that fall back), 10 keys with %@, positional, %d, %.2f and %% specifiers, \
            titles on 40% of them. A render is one key turned into text (body, title or subtitle). \
            Then the plural pass: a .stringsdict per language with two plural variables in one string \
            ("%#@messages@ in %#@chats@", every form the language's CLDR rules have) and a decimal one, \
            rendered for a seeded mix of counts, against String(format:) on the chosen forms already \
            spelled out (Foundation only formats; Herald chooses the forms and formats).
            """
    )

    @Option(help: "Requests to localize.")
    var count = 4_000_000

    @Option(help: "Requests in the mix (cycled).")
    var mix = 4096

    @Option(help: "Renders for the Foundation baseline (it is slower).")
    var baselineCount = 500_000

    @Option(help: "Rounds of Herald and the Foundation baseline, alternating; each side's best round counts.")
    var rounds = 3

    @Option(help: "Plural renders per round of the plural pass (0: no plural pass).")
    var pluralCount = 1_000_000

    /// (key, English template) — every language gets a translation with the same specifiers.
    static let keys: [(String, String)] = [
        ("GAME_PLAY_REQUEST_FORMAT", "%@ and %@ have invited you to play Monopoly"),
        ("NEW_MESSAGE", "%@: %@"),
        ("MESSAGE_TITLE", "New message from %@"),
        ("FRIEND_REQUEST", "%@ wants to be your friend"),
        ("ORDER_SHIPPED", "Your order %@ has shipped and arrives on %@"),
        ("STREAK", "%1$@, you're on a %2$d-day streak!"),
        ("SCORE", "You scored %d points"),
        ("BALANCE", "Your balance is %.2f €"),
        ("DISCOUNT", "%d%% off everything today only"),
        ("REMINDER_TITLE", "Reminder"),
    ]

    /// Catalog languages and a word to make each translation differ (positional order swapped for some).
    static let languages: [(String, String, Bool)] = [
        ("en", "", false), ("en-GB", "", false), ("fr", "Notification :", false), ("de", "Mitteilung:", false),
        ("es", "Aviso:", false), ("it", "Avviso:", false), ("pt-BR", "Aviso:", false), ("ja", "お知らせ：", true),
        ("ko", "알림:", true), ("zh-Hans", "通知：", false), ("zh-Hant", "通知：", false), ("ru", "Уведомление:", false),
        ("ar", "إشعار:", true), ("nl", "Melding:", false),
    ]

    static let requestTags = [
        "en-US", "en", "en-GB", "fr-FR", "fr-CA", "de-DE", "es-MX", "pt_BR", "ja-JP", "zh-Hant-TW", "zh-Hans-CN", "ko-KR",
        "it", "ru-RU", "sw-KE", "fi",
    ]

    /// The template for `key` in `language`: a prefix word, and positional swaps where the language reorders.
    static func translate(_ template: String, _ language: (String, String, Bool)) -> String {
        var t = template
        if language.2 && t == "%@ and %@ have invited you to play Monopoly" { t = "%2$@ / %1$@ — Monopoly" }
        return language.1.isEmpty ? t : language.1 + " " + t
    }

    struct Sample {
        var request: NotificationRequest
        /// For the baseline: the resolved templates and their arguments as C varargs.
        var formats: [(String, [any CVarArg])]
        var renders: Int
    }

    func run() async throws {
        // A catalog folder as an app bundle lays it out.
        let dir = NSTemporaryDirectory() + "herald-bench-localize-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for language in Self.languages {
            var text = ""
            for (key, template) in Self.keys {
                text += "/* \(key) */\n\"\(key)\" = \"\(Self.translate(template, language))\";\n\n"
            }
            try FileManager.default.createDirectory(atPath: "\(dir)/\(language.0).lproj", withIntermediateDirectories: true)
            var bytes: [UInt8] = [0xFF, 0xFE]
            for u in text.utf16 { bytes += [UInt8(u & 0xFF), UInt8(u >> 8)] }
            let file = "\(dir)/\(language.0).lproj/Localizable.strings"
            guard FileManager.default.createFile(atPath: file, contents: Data(bytes)) else { throw BenchError("cannot write \(file)") }
            let plurals = "\(dir)/\(language.0).lproj/Localizable.stringsdict"
            guard FileManager.default.createFile(atPath: plurals, contents: Data(Self.pluralFile(language).utf8)) else {
                throw BenchError("cannot write \(plurals)")
            }
        }
        var catalog = StringCatalog()
        let loadSeconds = try await measure { catalog = try StringCatalog.load(path: dir) }
        let localizer = try CatalogLocalizer(catalog: catalog, defaultLanguage: "en", fallback: ["es"], mode: .server)

        // The mix, fixed by a seeded generator so runs compare.
        var rng = SeededGenerator(seed: 0x4865_7261_6C64)
        let names = ["Jenna", "Frank", "Zoë", "Mohammed", "Li Wei", "Anna-Lena", "José", "Priya", "Ólafur", "Chloé"]
        let previews = ["See you at 8?", "Running late, sorry!", "👍", "Can you send me the file?", "Happy birthday 🎉"]
        var samples: [Sample] = []
        for _ in 0..<mix {
            let tag = Self.requestTags[Int(rng.next() % UInt64(Self.requestTags.count))]
            let k = Int(rng.next() % UInt64(Self.keys.count))
            let key = Self.keys[k].0
            func name() -> String { names[Int(rng.next() % UInt64(names.count))] }
            let args: [String]
            switch key {
            case "GAME_PLAY_REQUEST_FORMAT": args = [name(), name()]
            case "NEW_MESSAGE": args = [name(), previews[Int(rng.next() % UInt64(previews.count))]]
            case "MESSAGE_TITLE", "FRIEND_REQUEST": args = [name()]
            case "ORDER_SHIPPED": args = ["#\(100000 + rng.next() % 900000)", "Friday"]
            case "STREAK": args = [name(), String(rng.next() % 400)]
            case "SCORE": args = [String(rng.next() % 100000)]
            case "BALANCE": args = [String(Double(rng.next() % 1_000_000) / 100)]
            case "DISCOUNT": args = [String(10 + rng.next() % 60)]
            default: args = []
            }
            var alert = Alert()
            alert.locKey = key
            alert.locArgs = args.isEmpty ? nil : args
            var renders = 1
            if rng.next() % 10 < 4 {
                alert.titleLocKey = rng.next() % 2 == 0 ? "MESSAGE_TITLE" : "REMINDER_TITLE"
                if alert.titleLocKey == "MESSAGE_TITLE" { alert.titleLocArgs = [name()] }
                renders += 1
            }
            samples.append(Sample(request: Self.request(alert, language: tag, &rng), formats: [], renders: renders))
        }
        // Baseline inputs: the template each key resolves to (the chain's first language that has it),
        // with the arguments typed as String(format:) needs them.
        for i in samples.indices {
            let r = samples[i].request
            let chain = localizer.resolver.chain(for: r.language)
            let language = Self.languages.first { $0.0 == catalog.languages[chain[0]].description }!
            func typed(_ key: String, _ args: [String]) -> [any CVarArg] {
                switch key {
                case "STREAK": return [args[0], Int(args[1])!]
                case "SCORE", "DISCOUNT": return [Int(args[0])!]
                case "BALANCE": return [Double(args[0])!]
                default: return args
                }
            }
            let alert = r.aps.alert!
            let template = Self.translate(Self.keys.first { $0.0 == alert.locKey! }!.1, language)
            samples[i].formats.append((template, typed(alert.locKey!, alert.locArgs ?? [])))
            if let title = alert.titleLocKey {
                samples[i].formats.append((Self.translate(Self.keys.first { $0.0 == title }!.1, language), alert.titleLocArgs ?? []))
            }
        }

        // Check: Herald's text equals Foundation's for the whole mix.
        var matches = true
        var dropped = 0
        for s in samples {
            var r = s.request
            do throws(StageFailure) {
                try localizer.localize(&r)
            } catch {
                dropped += 1
                continue
            }
            let expectedBody = String(format: s.formats[0].0, arguments: s.formats[0].1)
            if r.aps.alert?.body != expectedBody { matches = false }
            if s.formats.count > 1, r.aps.alert?.title != String(format: s.formats[1].0, arguments: s.formats[1].1) { matches = false }
        }

        // Herald: the full localize step (language resolution, key lookup, render, clearing the keys),
        // plus copying each request out of the mix and destroying it after (a pipeline works in place:
        // this makes the figure conservative).
        // Baseline 1: Foundation's String(format:) on the already-resolved templates and typed arguments.
        // The two alternate for `rounds` rounds and each side's best round counts, so that a slow spell
        // on this shared machine falls on both alike. Rates are per second of this process's CPU time
        // (the loops have no suspension point and nothing else runs in the process meanwhile).
        let n = count
        let requests = samples.map(\.request)
        let rendersPerRequest = samples.map(\.renders)
        let formats = samples.flatMap(\.formats)
        var renders = 0
        var sink = 0
        var baselineRenders = 0
        var elapsed = Double.infinity, cpu = Double.infinity, baseline = Double.infinity, baselineCPU = Double.infinity
        var roundRates: [Double] = [], baselineRoundRates: [Double] = []
        for _ in 0..<max(1, rounds) {
            renders = 0
            let cpuStart = CPUTime.now()
            let seconds = await measure {
                let done = Self.localizeAll(localizer, requests, n, renders: rendersPerRequest)
                renders = done.renders
                sink &+= done.sink
            }
            let roundCPU = (CPUTime.now() - cpuStart).inSeconds
            roundRates.append(Double(renders) / roundCPU)
            cpu = min(cpu, roundCPU)
            elapsed = min(elapsed, seconds)

            baselineRenders = 0
            let baselineCPUStart = CPUTime.now()
            let baselineSeconds = await measure {
                var i = 0
                while baselineRenders < baselineCount {
                    let (template, args) = formats[i % formats.count]
                    sink &+= String(format: template, arguments: args).utf8.count
                    baselineRenders += 1
                    i += 1
                }
            }
            let roundBaselineCPU = (CPUTime.now() - baselineCPUStart).inSeconds
            baselineRoundRates.append(Double(baselineRenders) / roundBaselineCPU)
            baselineCPU = min(baselineCPU, roundBaselineCPU)
            baseline = min(baseline, baselineSeconds)
        }

        // Baseline 2: Herald's own formatter, compiling the template on every render (no compile-once).
        var recompiledRenders = 0
        let strings = samples.flatMap { s in
            [(s.formats[0].0, s.request.aps.alert!.locArgs ?? [])]
                + (s.formats.count > 1 ? [(s.formats[1].0, s.request.aps.alert!.titleLocArgs ?? [])] : [])
        }
        let recompiled = await measure {
            var i = 0
            while recompiledRenders < baselineCount {
                let (template, args) = strings[i % strings.count]
                if let t = try? FormatTemplate(compiling: template), let text = try? t.render(args) { sink &+= text.utf8.count }
                recompiledRenders += 1
                i += 1
            }
        }

        var report = JSONLine()
        report.add("benchmark", "localize")
        report.add("mode", "server")
        report.add("cores", 1)
        report.add("catalog_languages", catalog.languages.count)
        report.add("catalog_keys", Self.keys.count)
        report.add("catalog_load_ms", loadSeconds * 1000, places: 2)
        report.add("request_tags", Self.requestTags.count)
        report.add("requests", n)
        report.add("rounds", roundRates.count)
        report.add("timing", "process CPU time, best of \(roundRates.count) alternating rounds")
        report.add("renders", renders)
        report.add("seconds", elapsed, places: 3)
        report.add("requests_per_second", Double(n) / elapsed, places: 0)
        report.add("renders_per_second", Double(renders) / elapsed, places: 0)
        report.add("ns_per_render", elapsed / Double(renders) * 1e9, places: 1)
        report.add("cpu_seconds", cpu, places: 3)
        report.add("renders_per_cpu_second", Double(renders) / cpu, places: 0)
        report.add("baseline_foundation_string_format_renders_per_second", Double(baselineRenders) / baseline, places: 0)
        report.add("baseline_foundation_renders_per_cpu_second", Double(baselineRenders) / baselineCPU, places: 0)
        report.add("baseline_compile_every_render_renders_per_second", Double(recompiledRenders) / recompiled, places: 0)
        // CPU time, not wall time: the two loops run at different moments, and other processes
        // sharing the cores would skew a ratio of wall times.
        report.add("speedup_vs_foundation_cpu", (Double(renders) / cpu) / (Double(baselineRenders) / baselineCPU), places: 2)
        report.add("round_renders_per_cpu_second", roundRates, places: 0)
        report.add("round_foundation_renders_per_cpu_second", baselineRoundRates, places: 0)
        report.add("goal_speedup_vs_foundation_cpu", 4.5, places: 1)
        report.add("matches_foundation_text", matches)
        report.add("dropped_in_mix", dropped)
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.add("goal_renders_per_second", 2_000_000)
        if pluralCount > 0 {
            let plural = try await pluralPass(localizer, catalog)
            report.add("plural_renders_per_cpu_second", plural.herald, places: 0)
            report.add("plural_baseline_foundation_renders_per_cpu_second", plural.foundation, places: 0)
            report.add("plural_speedup_vs_foundation_cpu", plural.herald / plural.foundation, places: 2)
            report.add("plural_matches_foundation_text", plural.matches)
            report.add("goal_plural_speedup_vs_foundation_cpu", 4.0, places: 1)
        }
        if sink == -1 { report.add("sink", sink) }
        report.print()
    }

    /// A request of the mix: `alert` for a random token, in `language`.
    static func request(_ alert: Alert, language: String, _ rng: inout SeededGenerator) -> NotificationRequest {
        var aps = APS()
        aps.alert = alert
        return NotificationRequest(
            token: DeviceToken(bytes: (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }), aps: aps,
            topic: "com.example.app", language: language)
    }

    /// Localizes `n` requests cycling through `requests`, each a copy (a pipeline
    /// works in place: copying and destroying makes the figure conservative).
    /// Returns the renders (`renders[i]` per request, else one) and a sum of the bodies' sizes.
    static func localizeAll(_ localizer: CatalogLocalizer, _ requests: [NotificationRequest], _ n: Int, renders: [Int]?) -> (renders: Int, sink: Int) {
        let m = requests.count
        var count = 0, sink = 0
        for i in 0..<n {
            var r = requests[i % m]
            do throws(StageFailure) {
                try localizer.localize(&r)
            } catch {
                continue
            }
            sink &+= r.aps.alert!.body!.utf8.count
            count &+= renders?[i % m] ?? 1
        }
        return (count, sink)
    }

    /// The plural keys of every language's `.stringsdict`: `UNREAD` with two
    /// variables (swapped where the language reorders) and `HOURS` with a decimal.
    static func pluralFile(_ language: (String, String, Bool)) -> String {
        let categories = PluralRules.categories(of: LanguageTag(parsing: language.0)!)
        func variable(_ name: String, _ valueType: String, _ word: String) -> String {
            var forms = ""
            for c in categories { forms += "<key>\(c.rawValue)</key><string>\(pluralForm(c, word, "%" + valueType))</string>" }
            return "<key>\(name)</key><dict><key>NSStringFormatSpecTypeKey</key><string>NSStringPluralRuleType</string>"
                + "<key>NSStringFormatValueTypeKey</key><string>\(valueType)</string>\(forms)</dict>"
        }
        let prefix = language.1.isEmpty ? "" : language.1 + " "
        let unread = language.2 ? "\(prefix)%2$#@chats@ / %1$#@messages@" : "\(prefix)%#@messages@ in %#@chats@"
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>UNREAD</key><dict><key>NSStringLocalizedFormatKey</key><string>\(unread)</string>
            \(variable("messages", "d", "message")) \(variable("chats", "lld", "chat"))</dict>
            <key>HOURS</key><dict><key>NSStringLocalizedFormatKey</key><string>\(prefix)%#@hours@ left</string>
            \(variable("hours", ".1f", "hour"))</dict>
            </dict></plist>
            """
    }

    /// A form's text: the number, a word and the category (so a wrong choice shows in the text).
    static func pluralForm(_ category: PluralCategory, _ word: String, _ specifier: String) -> String {
        "\(specifier) \(word) (\(category.rawValue))"
    }

    /// Plural renders per CPU second, Herald's and Foundation's best of `rounds`,
    /// and whether every text of the mix is the same.
    func pluralPass(_ localizer: CatalogLocalizer, _ catalog: StringCatalog) async throws -> (herald: Double, foundation: Double, matches: Bool) {
        var rng = SeededGenerator(seed: 0x706C_7572_616C)
        func count() -> Int {
            switch rng.next() % 8 {
            case 0: return Int(rng.next() % 3)
            case 1, 2, 3: return Int(rng.next() % 30)
            case 4, 5: return Int(rng.next() % 1000)
            case 6: return Int(rng.next() % 1_000_000)
            default: return Int(rng.next() % 20) * 1_000_000
            }
        }
        var requests: [NotificationRequest] = []
        var formats: [(String, [any CVarArg])] = []
        for _ in 0..<mix {
            let tag = Self.requestTags[Int(rng.next() % UInt64(Self.requestTags.count))]
            let language = Self.languages.first { $0.0 == catalog.languages[localizer.resolver.chain(for: tag)[0]].description }!
            // Every language's file has exactly its CLDR forms, so the form is the CLDR category
            // (where a language has a zero form, CLDR's rules give it for 0 too).
            let tagOfFile = LanguageTag(parsing: language.0)!
            func chosen(_ operands: PluralOperands) -> PluralCategory { PluralRules.category(of: operands, language: tagOfFile) }
            let prefix = language.1.isEmpty ? "" : language.1 + " "
            var alert = Alert()
            if rng.next() % 4 == 0 {
                let tenths = Double(rng.next() % 500) / 10
                alert.locKey = "HOURS"
                alert.locArgs = [String(tenths)]
                let printed = String(format: "%.1f", tenths)
                formats.append(("\(prefix)" + Self.pluralForm(chosen(PluralOperands(parsing: printed)!), "hour", "%.1f") + " left", [tenths]))
            } else {
                let messages = count(), chats = count()
                alert.locKey = "UNREAD"
                alert.locArgs = [String(messages), String(chats)]
                let m = Self.pluralForm(chosen(PluralOperands(Int64(messages))), "message", "%1$d")
                let c = Self.pluralForm(chosen(PluralOperands(Int64(chats))), "chat", "%2$lld")
                formats.append((language.2 ? "\(prefix)\(c) / \(m)" : "\(prefix)\(m) in \(c)", [messages, chats]))
            }
            requests.append(Self.request(alert, language: tag, &rng))
        }
        var matches = true
        for (request, format) in zip(requests, formats) {
            var r = request
            do throws(StageFailure) {
                try localizer.localize(&r)
            } catch {
                matches = false
                continue
            }
            if r.aps.alert?.body != String(format: format.0, arguments: format.1) { matches = false }
        }
        var herald = 0.0, foundation = 0.0
        var sink = 0
        let m = requests.count
        for _ in 0..<max(1, rounds) {
            let start = CPUTime.now()
            sink &+= Self.localizeAll(localizer, requests, pluralCount, renders: nil).sink
            herald = max(herald, Double(pluralCount) / (CPUTime.now() - start).inSeconds)
            let baselineStart = CPUTime.now()
            for i in 0..<baselineCount {
                let (template, args) = formats[i % m]
                sink &+= String(format: template, arguments: args).utf8.count
            }
            foundation = max(foundation, Double(baselineCount) / (CPUTime.now() - baselineStart).inSeconds)
        }
        if sink == -1 { print(sink) }
        return (herald, foundation, matches)
    }
}

/// CPU time of the calling thread, in seconds: unlike wall time, not inflated when other
/// processes share the machine's cores.
func threadCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}
