import Foundation
import HeraldCore
@testable import HeraldLocalization

/// A temporary catalog directory, written at test time and removed by `remove()`.
struct TemporaryCatalogs {
    let path: String

    init() {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/herald-loc-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Writes `bytes` to `relative` (creating its folder).
    @discardableResult
    func write(_ relative: String, _ bytes: [UInt8]) -> String {
        let full = "\(path)/\(relative)"
        let dir = (full as NSString).deletingLastPathComponent
        try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        precondition(FileManager.default.createFile(atPath: full, contents: Data(bytes)), "cannot write \(full)")
        return full
    }

    @discardableResult
    func write(_ relative: String, _ text: String, encoding: TextEncoding = .utf8) -> String {
        write(relative, encoding.encode(text))
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

enum TextEncoding: CaseIterable, CustomStringConvertible {
    case utf8, utf8BOM, utf16LE, utf16BE

    func encode(_ text: String) -> [UInt8] {
        switch self {
        case .utf8: return Array(text.utf8)
        case .utf8BOM: return [0xEF, 0xBB, 0xBF] + Array(text.utf8)
        case .utf16LE: return [0xFF, 0xFE] + text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        case .utf16BE: return [0xFE, 0xFF] + text.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        }
    }

    var description: String {
        switch self {
        case .utf8: return "UTF-8"
        case .utf8BOM: return "UTF-8 with BOM"
        case .utf16LE: return "UTF-16LE with BOM"
        case .utf16BE: return "UTF-16BE with BOM"
        }
    }
}

/// Escapes `s` for a quoted `.strings` value: quotes and backslashes, control
/// characters as `\n`/`\t`/`\r` or `\U`, and (when `escapeNonASCII`) every
/// non-ASCII scalar as `\U####`, astral ones as a surrogate pair.
func stringsEscaped(_ s: String, escapeNonASCII: Bool) -> String {
    var out = ""
    func u(_ v: UInt32) -> String {
        let h = String(v, radix: 16, uppercase: true)
        return "\\U" + String(repeating: "0", count: 4 - h.count) + h
    }
    for c in s.unicodeScalars {
        switch c {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        case "\r": out += "\\r"
        default:
            if c.value < 0x20 || c.value == 0x7F {
                out += u(c.value)
            } else if escapeNonASCII && c.value > 0x7F {
                if c.value > 0xFFFF {
                    let v = c.value - 0x10000
                    out += u(0xD800 + (v >> 10)) + u(0xDC00 + (v & 0x3FF))
                } else {
                    out += u(c.value)
                }
            } else {
                out.unicodeScalars.append(c)
            }
        }
    }
    return out
}

func request(
    locKey: String? = nil, locArgs: [String]? = nil, titleLocKey: String? = nil, titleLocArgs: [String]? = nil,
    subtitleLocKey: String? = nil, subtitleLocArgs: [String]? = nil, language: String? = nil, mode: LocalizationMode? = nil
) -> NotificationRequest {
    var alert = Alert()
    alert.locKey = locKey
    alert.locArgs = locArgs
    alert.titleLocKey = titleLocKey
    alert.titleLocArgs = titleLocArgs
    alert.subtitleLocKey = subtitleLocKey
    alert.subtitleLocArgs = subtitleLocArgs
    var aps = APS()
    aps.alert = alert
    var r = NotificationRequest(token: DeviceToken(bytes: Array(repeating: 0xAB, count: 32)), aps: aps, language: language)
    r.localization = mode
    return r
}

/// Runs the localizer and returns the failure reason, if any.
func failure(_ localizer: some Localizer, _ r: NotificationRequest) -> String? {
    var r = r
    do throws(StageFailure) {
        try localizer.localize(&r)
        return nil
    } catch {
        return error.reason
    }
}
