import HeraldCore
import HeraldJSON
import HeraldLocalization

/// One line of a `*.herald.jsonl` file: a notification as `herald send`
/// reads it (no token needed), named by `"template"`, whose `loc-args`,
/// `title-loc-args` and `subtitle-loc-args` give each argument's maximum
/// length in characters (a number) or its value (a string):
///
/// ```json
/// {"template":"game-invite","alert":{"title-loc-key":"INVITE_TITLE","loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":[40,40]},"badge":99,"sound":"default"}
/// ```
struct NotificationTemplate {
    /// A declared argument.
    enum Slot: Equatable {
        case value(String)
        case upTo(Int)
    }

    let name: String
    let file: String
    let line: Int
    /// The request, with empty strings where the arguments go.
    let request: NotificationRequest
    /// The declared arguments of each localized text of the alert.
    let slots: [LocalizedField: [Slot]]

    /// Reads every template of `file`; a line that is not a template is reported to `log`.
    static func load(_ file: String, log: inout DiagnosticLog) -> [NotificationTemplate] {
        let bytes: [UInt8]
        do { bytes = try readSmallFile(file) } catch {
            log.report(Diagnostic(file: file, line: 0, message: "cannot read: \(error)"))
            return []
        }
        var templates: [NotificationTemplate] = []
        for (index, text) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            guard text.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: "\r") }) else { continue }
            do {
                templates.append(try parse(text, file: file, line: index + 1))
            } catch {
                log.report(error)
            }
        }
        return templates
    }

    static func parse(_ text: ArraySlice<UInt8>, file: String, line: Int) throws(Diagnostic) -> NotificationTemplate {
        func fail(_ message: String, column: Int = 0) -> Diagnostic {
            Diagnostic(file: file, line: line, column: column, message: message)
        }
        let value: JSONValue
        do { value = try JSONParser.parse(text) } catch { throw fail(error.message, column: error.column) }
        guard var object = value.objectValue else { throw fail("a template must be a JSON object") }
        guard case .string(let name)? = object["template"], !name.isEmpty else {
            throw fail("missing \"template\": the template's name, a non-empty string")
        }
        object["template"] = nil
        if object["token"] == nil { object["token"] = .string(String(repeating: "0", count: 64)) }
        var slots: [LocalizedField: [Slot]] = [:]
        if var alert = object["alert"]?.objectValue {
            slots = try declaredArguments(&alert, fail)
            object["alert"] = .object(alert)
        } else if var aps = object["aps"]?.objectValue, var alert = aps["alert"]?.objectValue {
            slots = try declaredArguments(&alert, fail)
            aps["alert"] = .object(alert)
            object["aps"] = .object(aps)
        }
        do {
            let request = try RequestDecoder().decode(.object(object))
            return NotificationTemplate(name: name, file: file, line: line, request: request, slots: slots)
        } catch {
            throw fail("template \"\(name)\": \(error.message)")
        }
    }

    /// Reads the `*-loc-args` declarations, leaving empty strings in their place.
    static func declaredArguments(_ alert: inout JSONObject, _ fail: (String, Int) -> Diagnostic) throws(Diagnostic) -> [LocalizedField: [Slot]] {
        var out: [LocalizedField: [Slot]] = [:]
        for field in LocalizedField.allCases {
            guard let declared = alert[field.argumentsKey] else { continue }
            guard let items = declared.arrayValue else {
                throw fail("\"\(field.argumentsKey)\" must be an array of maximum lengths (numbers) or values (strings)", 0)
            }
            var slots: [Slot] = []
            for item in items {
                if let text = item.stringValue {
                    slots.append(.value(text))
                } else if let n = item.numberValue?.intValue, n >= 0, n <= 4096 {
                    slots.append(.upTo(n))
                } else {
                    throw fail("\"\(field.argumentsKey)\": \(item.typeName) is neither a maximum length (0 to 4096) nor a value (a string)", 0)
                }
            }
            out[field] = slots
            alert[field.argumentsKey] = .array(slots.map { _ in .string("") })
        }
        return out
    }
}

/// The alert's localized texts: body (`loc-key`), title, subtitle.
enum LocalizedField: String, CaseIterable {
    case body = "loc"
    case title = "title-loc"
    case subtitle = "subtitle-loc"

    var argumentsKey: String { rawValue + "-args" }

    func key(_ alert: Alert) -> String? {
        switch self {
        case .body: alert.locKey
        case .title: alert.titleLocKey
        case .subtitle: alert.subtitleLocKey
        }
    }

    func setArguments(_ arguments: [String], in alert: inout Alert) {
        switch self {
        case .body: alert.locArgs = arguments
        case .title: alert.titleLocArgs = arguments
        case .subtitle: alert.subtitleLocArgs = arguments
        }
    }
}
