/// Swift names and literals for catalog keys and tables.
enum SwiftNames {
    /// The member name for a key: its words in lowerCamelCase
    /// (`GAME_PLAY_REQUEST_FORMAT` → `gamePlayRequestFormat`, `welcome.title`
    /// → `welcomeTitle`, `%@ sent you a photo` → `sentYouAPhoto`; a keyword
    /// gets `Key` appended: `default` → `defaultKey`).
    static func member(_ key: String) -> String {
        let words = self.words(key)
        guard let first = words.first else { return "key" }
        var name = lowerFirst(first) + words.dropFirst().map(upperFirst).joined()
        if name.first?.isNumber == true { name = "_" + name }
        return keywords.contains(name) ? name + "Key" : name
    }

    /// The type name for a table (`Localizable`, `push-alerts` → `PushAlerts`).
    static func type(_ table: String) -> String {
        var name = words(table).map(upperFirst).joined()
        if name.isEmpty || keywords.contains(name) { name += "Strings" }
        if name.first?.isNumber == true { name = "_" + name }
        return name
    }

    /// Names for `keys`, in order, made unique by a number where two keys give the same name.
    static func members(_ keys: [String], reserved: Set<String>) -> [String] {
        var used = reserved
        return keys.map { key in
            let base = member(key)
            var name = base
            var n = 2
            while used.contains(name) {
                name = "\(base)\(n)"
                n += 1
            }
            used.insert(name)
            return name
        }
    }

    /// The runs of letters and digits; a word in capitals is lowercased.
    static func words(_ text: String) -> [String] {
        text.split(whereSeparator: { $0.isASCII ? !($0.isLetter || $0.isNumber) : !$0.isLetter })
            .map { word in word.allSatisfy { !$0.isLowercase } ? word.lowercased() : String(word) }
    }

    static func lowerFirst(_ s: String) -> String { s.prefix(1).lowercased() + s.dropFirst() }
    static func upperFirst(_ s: String) -> String { s.prefix(1).uppercased() + s.dropFirst() }

    /// A Swift string literal for `text`.
    static func literal(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static let keywords: Set<String> = [
        "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import", "init", "inout",
        "internal", "let", "open", "operator", "private", "precedencegroup", "protocol", "public", "rethrows", "static",
        "struct", "subscript", "typealias", "var", "break", "case", "catch", "continue", "default", "defer", "do", "else",
        "fallthrough", "for", "guard", "if", "in", "repeat", "return", "throw", "switch", "where", "while", "Any", "as",
        "await", "false", "is", "nil", "self", "Self", "super", "throws", "true", "try", "Type", "Protocol",
    ]
}
