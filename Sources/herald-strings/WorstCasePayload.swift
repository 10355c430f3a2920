import HeraldCore
import HeraldLocalization
import HeraldPayload

/// The largest payload a template can make in one language, measured with
/// the pipeline's own stages: the request goes through ``CatalogLocalizer``
/// (server-side: the text in that language; client-side: the keys checked)
/// and ``APSPayloadBuilder``, with each declared argument at its worst case
/// (``FormatSpecifier/worstCaseArgument(maxLength:)`` of the specifier that
/// reads it in that language). Where a text has plural forms, its selecting
/// argument is also tried at small numbers, so that every form is measured.
struct WorstCasePayload {
    let localizer: CatalogLocalizer
    let mode: LocalizationMode

    /// Numbers that reach every plural category of the languages Herald knows.
    static let pluralProbes = ["0", "1", "2", "3", "5", "11", "21", "101"]

    /// The worst-case payload size of `template` in `language`, or why it cannot be built.
    func size(of template: NotificationTemplate, language: LanguageTag) -> Result<Int, StageFailure> {
        guard let alert = template.request.aps.alert else { return measure(template.request, language: language) }
        let chain = localizer.resolver.chain(for: language.description)
        // For each localized text, the argument lists to try.
        var choices: [(LocalizedField, [[String]])] = []
        for field in LocalizedField.allCases {
            guard let slots = template.slots[field] else { continue }
            let entry = field.key(alert).flatMap { key in chain.lazy.compactMap { localizer.table.entry(key, language: $0) }.first }
            choices.append((field, Self.argumentLists(slots, entry: entry)))
        }
        var worst = 0
        var combination = [Int](repeating: 0, count: choices.count)
        while true {
            var request = template.request
            for (i, (field, lists)) in choices.enumerated() {
                field.setArguments(lists[combination[i]], in: &request.aps.alert!)
            }
            switch measure(request, language: language) {
            case .success(let size): worst = max(worst, size)
            case .failure(let failure): return .failure(failure)
            }
            // The next combination, as an odometer.
            var i = 0
            while i < choices.count {
                combination[i] += 1
                if combination[i] < choices[i].1.count { break }
                combination[i] = 0
                i += 1
            }
            if i == choices.count { return .success(worst) }
        }
    }

    func measure(_ request: NotificationRequest, language: LanguageTag) -> Result<Int, StageFailure> {
        var request = request
        request.language = language.description
        request.localization = request.localization ?? mode
        do {
            try localizer.localize(&request)
            return .success(try APSPayloadBuilder().build(&request).count)
        } catch {
            return .failure(error)
        }
    }

    /// The worst-case arguments for `slots` read by `entry`; for a plural
    /// value, also with the selecting argument at each of ``pluralProbes`` that fits.
    static func argumentLists(_ slots: [NotificationTemplate.Slot], entry: CatalogEntry?) -> [[String]] {
        let specifiers = entry?.specifiers ?? []
        let worst = slots.enumerated().map { index, slot in
            switch slot {
            case .value(let text): return text
            case .upTo(let n):
                let candidates = specifiers.filter { $0.index == index }.map { $0.worstCaseArgument(maxLength: n) }
                return candidates.max { $0.utf8.count < $1.utf8.count } ?? String(repeating: "\u{1F600}", count: n)
            }
        }
        guard case .plural(let plural)? = entry?.value, plural.selectorIndex < slots.count,
            case .upTo(let n) = slots[plural.selectorIndex]
        else { return [worst] }
        return [worst] + pluralProbes.filter { $0.count <= n }.map { probe in
            var list = worst
            list[plural.selectorIndex] = probe
            return list
        }
    }
}
