import FoundationEssentials

/// Reads a `.stringsdict` file: a property list (XML or binary, read by
/// Foundation's own reader) of keys, each a dictionary of one of these kinds:
///
/// ```xml
/// <key>UNREAD</key>
/// <dict>
///     <key>NSStringLocalizedFormatKey</key>  <string>%#@messages@ in %#@chats@</string>
///     <key>messages</key>
///     <dict>
///         <key>NSStringFormatSpecTypeKey</key>   <string>NSStringPluralRuleType</string>
///         <key>NSStringFormatValueTypeKey</key>  <string>d</string>
///         <key>one</key>    <string>%d message</string>
///         <key>other</key>  <string>%d messages</string>
///     </dict>
///     <key>chats</key> …
/// </dict>
/// <key>WELCOME</key>
/// <dict>
///     <key>NSStringVariableWidthRuleType</key>
///     <dict> <key>20</key> <string>Welcome</string> <key>60</key> <string>Welcome to the club</string> </dict>
/// </dict>
/// ```
///
/// - `NSStringLocalizedFormatKey` with its variables (``SubstitutionTemplate``):
///   each variable a `NSStringPluralRuleType` with a value type and the forms
///   zero, one, two, few, many, other (`other` required).
/// - `NSStringVariableWidthRuleType`: a notification has no width to fit, so
///   the widest form (the largest width) is the value.
/// - `NSStringDeviceSpecificRuleType`: the `iphone` form, else `other`.
///
/// A file that is not a property list, or whose top level is not a
/// dictionary, is a ``CatalogError`` naming the file. A key whose value is
/// wrong is kept as an invalid entry naming the key and what is wrong (using
/// it is an error; the catalog's diagnostics list it); the other keys load.
public enum StringsDictParser {
    public struct Item: Sendable {
        public var key: String
        public var entry: CatalogEntry
    }

    /// A property list value, as much of it as a `.stringsdict` uses.
    indirect enum Node: Decodable {
        case string(String)
        case dictionary([String: Node])
        /// A number, date, data, array or boolean.
        case other

        struct Key: CodingKey {
            var stringValue: String
            init?(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            if let keyed = try? decoder.container(keyedBy: Key.self) {
                var d: [String: Node] = [:]
                for key in keyed.allKeys { d[key.stringValue] = try keyed.decode(Node.self, forKey: key) }
                self = .dictionary(d)
                return
            }
            let single = try decoder.singleValueContainer()
            if let s = try? single.decode(String.self) {
                self = .string(s)
            } else {
                self = .other
            }
        }
    }

    public static func parse(_ bytes: [UInt8], file: String) throws(CatalogError) -> [Item] {
        let top: [String: Node]
        do {
            top = try PropertyListDecoder().decode([String: Node].self, from: Data(bytes))
        } catch {
            throw CatalogError(file: file, message: "not a property list of keys: \(Self.describe(error))")
        }
        return top.keys.sorted().map { key in
            let origin = "\(file): \(key)"
            let value: CatalogEntry.Value
            do throws(FormatError) {
                value = try compile(top[key]!)
            } catch {
                value = .invalid(error.message)
            }
            return Item(key: key, entry: CatalogEntry(value: value, origin: origin))
        }
    }

    static func compile(_ node: Node) throws(FormatError) -> CatalogEntry.Value {
        guard case .dictionary(let d) = node else {
            throw FormatError("must be a dictionary (NSStringLocalizedFormatKey and its variables, or a width or device rule)")
        }
        if let format = d["NSStringLocalizedFormatKey"] {
            guard case .string(let text) = format else { throw FormatError("NSStringLocalizedFormatKey must be a string") }
            var definitions: [String: SubstitutionTemplate.Definition] = [:]
            for (name, variable) in d where name != "NSStringLocalizedFormatKey" {
                guard case .dictionary(let v) = variable else { continue }  // not a variable (a comment key…)
                definitions[name] = try definition(name, v)
            }
            guard text.contains("#@") else { return .format(try FormatTemplate(compiling: text)) }
            return .substituted(try SubstitutionTemplate(format: text, definitions: definitions))
        }
        if let widths = d["NSStringVariableWidthRuleType"] {
            guard case .dictionary(let w) = widths, !w.isEmpty else {
                throw FormatError("NSStringVariableWidthRuleType must be a dictionary of widths")
            }
            var widest: (Int, String)?
            for (width, form) in w {
                guard let n = Int(width), n >= 0 else { throw FormatError("NSStringVariableWidthRuleType: \"\(width)\" is not a width") }
                guard case .string(let text) = form else { throw FormatError("NSStringVariableWidthRuleType: width \(width) must be a string") }
                if widest == nil || n > widest!.0 { widest = (n, text) }
            }
            return .format(try FormatTemplate(compiling: widest!.1))
        }
        if let devices = d["NSStringDeviceSpecificRuleType"] {
            guard case .dictionary(let forms) = devices else {
                throw FormatError("NSStringDeviceSpecificRuleType must be a dictionary of devices")
            }
            guard let name = XCStringsParser.preferredDevice(forms.keys.sorted()), let chosen = forms[name] else {
                throw FormatError("NSStringDeviceSpecificRuleType is empty")
            }
            guard case .string(let text) = chosen else { throw FormatError("NSStringDeviceSpecificRuleType: the form must be a string") }
            return .format(try FormatTemplate(compiling: text))
        }
        throw FormatError("has none of NSStringLocalizedFormatKey, NSStringVariableWidthRuleType, NSStringDeviceSpecificRuleType")
    }

    static func definition(_ name: String, _ v: [String: Node]) throws(FormatError) -> SubstitutionTemplate.Definition {
        guard case .string(let type)? = v["NSStringFormatSpecTypeKey"] else {
            throw FormatError("the variable \"\(name)\" has no NSStringFormatSpecTypeKey")
        }
        guard type == "NSStringPluralRuleType" else {
            throw FormatError("the variable \"\(name)\": rule type \(type) is not supported (NSStringPluralRuleType is)")
        }
        var valueType = "@"
        if let value = v["NSStringFormatValueTypeKey"] {
            guard case .string(let t) = value else { throw FormatError("the variable \"\(name)\": NSStringFormatValueTypeKey must be a string") }
            valueType = t
        }
        var forms: [PluralCategory: String] = [:]
        for (key, form) in v where key != "NSStringFormatSpecTypeKey" && key != "NSStringFormatValueTypeKey" {
            guard let category = PluralCategory(rawValue: key) else {
                throw FormatError("the variable \"\(name)\": \"\(key)\" is not a plural category (zero, one, two, few, many, other)")
            }
            guard case .string(let text) = form else { throw FormatError("the variable \"\(name)\": the \(key) form must be a string") }
            forms[category] = text
        }
        return SubstitutionTemplate.Definition(valueType: valueType, forms: forms)
    }

    /// A decoding error in a sentence: Foundation's description of where the property list is broken.
    static func describe(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            if let underlying = context.underlyingError as? CocoaError, let debug = underlying.userInfo["NSDebugDescription"] as? String {
                return debug
            }
            return context.debugDescription
        }
        if case DecodingError.typeMismatch(_, let context) = error {
            return "the top level must be a dictionary (\(context.debugDescription))"
        }
        return "\(error)"
    }
}
