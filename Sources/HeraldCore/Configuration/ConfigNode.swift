import HeraldJSON
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JSON object read from a configuration file, read strictly: every error
/// names the file and the key path, and keys nobody read are errors too.
///
/// ```swift
/// let node = try ConfigNode.load(path: "herald.json")
/// let limit = try node.int("limit") ?? 2048
/// try node.finish()   // fails on any key that was not read
/// ```
public final class ConfigNode: Sendable {
    public let file: String
    public let path: String
    public let object: JSONObject
    /// What was read, here and below (for ``finish()``); a node may be read from several tasks.
    let state = Mutex(ReadState())

    struct ReadState {
        var read: Set<String> = []
        var children: [ConfigNode] = []
        /// Keys whose value came from the environment.
        var fromEnvironment: Set<String> = []
    }

    public init(file: String, path: String = "", object: JSONObject) {
        self.file = file
        self.path = path
        self.object = object
    }

    /// An empty configuration (all defaults).
    public static func empty(file: String = "(defaults)") -> ConfigNode { ConfigNode(file: file, object: JSONObject()) }

    /// Reads and parses a JSON configuration file.
    public static func load(path: String) throws(ConfigError) -> ConfigNode {
        let bytes: [UInt8]
        do { bytes = try readSmallFile(path) } catch { throw ConfigError(file: path, key: "", message: "cannot read: \(error)") }
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw ConfigError(file: path, key: "", message: error.description) }
        guard case .object(let o) = value else { throw ConfigError(file: path, key: "", message: "the top level must be an object") }
        return ConfigNode(file: path, object: o)
    }

    func full(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// An error about `key` in this node (naming the environment variable when the value came from one).
    public func error(_ key: String, _ message: String) -> ConfigError {
        let fromEnvironment = state.withLock { $0.fromEnvironment.contains(key) }
        return ConfigError(file: fromEnvironment ? "environment variable \(Self.environmentName(full(key)))" : file, key: full(key), message: message)
    }

    /// Whether the key is present, in the file or the environment (and marks it read).
    public func has(_ key: String) -> Bool { value(key) != nil }

    /// The key's value: the environment's override when there is one, else the file's.
    ///
    /// Every key can be overridden by an environment variable named after its
    /// path: `HERALD_` and the path's words in capitals, joined by `_`
    /// (`transport.type` → `HERALD_TRANSPORT_TYPE`, `transport.providerToken.keyFile`
    /// → `HERALD_TRANSPORT_PROVIDER_TOKEN_KEY_FILE`). The variable's text is
    /// read as JSON when it is JSON (`2197`, `true`, `["a","b"]`, `{"host":…}`),
    /// else as a string (`gateway`).
    public func value(_ key: String) -> JSONValue? {
        let name = Self.environmentName(full(key))
        if let raw = getenv(name) {
            let text = String(cString: raw)
            state.withLock { s in
                s.read.insert(key)
                s.fromEnvironment.insert(key)
            }
            return (try? JSONParser.parse(Array(text.utf8))) ?? .string(text)
        }
        state.withLock { _ = $0.read.insert(key) }
        return object[key]
    }

    /// `transport.providerToken.keyFile` → `HERALD_TRANSPORT_PROVIDER_TOKEN_KEY_FILE`.
    public static func environmentName(_ path: String) -> String {
        var out = "HERALD"
        var previousLower = false
        var wordStarted = false
        for c in path.unicodeScalars {
            if c.properties.isUppercase && previousLower {
                out += "_"
            } else if !(c.properties.isAlphabetic || ("0"..."9").contains(c)) {
                wordStarted = false
                previousLower = false
                continue
            }
            if !wordStarted {
                if !out.hasSuffix("_") { out += "_" }
                wordStarted = true
            }
            out += String(c).uppercased()
            previousLower = c.properties.isLowercase || ("0"..."9").contains(c)
        }
        return out
    }

    public func string(_ key: String) throws(ConfigError) -> String? {
        guard let v = value(key) else { return nil }
        guard case .string(let s) = v else { throw error(key, "must be a string, got \(v.typeName)") }
        return s
    }

    /// A file or folder path: as given when absolute, else relative to the
    /// folder of the configuration file (not the working directory), so a
    /// configuration means the same wherever it is run from. `-` (standard
    /// input or output) is kept as it is; a path from the environment is taken
    /// as given.
    public func path(_ key: String) throws(ConfigError) -> String? {
        guard let s = try string(key) else { return nil }
        guard !s.isEmpty else { throw error(key, "must not be empty") }
        // From the environment: as given (relative to the working directory).
        if state.withLock({ $0.fromEnvironment.contains(key) }) { return s }
        guard s != "-", !s.hasPrefix("/"), let slash = file.lastIndex(of: "/") else { return s }
        return String(file[...slash]) + s
    }

    public func string(_ key: String, oneOf allowed: [String]) throws(ConfigError) -> String? {
        guard let s = try string(key) else { return nil }
        guard allowed.contains(s) else {
            throw error(key, "must be one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", ")), got \"\(s)\"")
        }
        return s
    }

    public func int(_ key: String, in range: ClosedRange<Int>? = nil) throws(ConfigError) -> Int? {
        guard let v = value(key) else { return nil }
        guard let n = v.numberValue, n.isInteger, let i = n.intValue else { throw error(key, "must be an integer, got \(v.compactText)") }
        if let range, !range.contains(i) { throw error(key, "must be from \(range.lowerBound) to \(range.upperBound), got \(i)") }
        return i
    }

    public func double(_ key: String) throws(ConfigError) -> Double? {
        guard let v = value(key) else { return nil }
        guard let d = v.numberValue?.doubleValue else { throw error(key, "must be a number, got \(v.typeName)") }
        return d
    }

    public func bool(_ key: String) throws(ConfigError) -> Bool? {
        guard let v = value(key) else { return nil }
        guard let b = v.boolValue else { throw error(key, "must be true or false, got \(v.compactText)") }
        return b
    }

    public func strings(_ key: String) throws(ConfigError) -> [String]? {
        guard let v = value(key) else { return nil }
        guard case .array(let a) = v else { throw error(key, "must be an array of strings") }
        var out: [String] = []
        for e in a {
            guard case .string(let s) = e else { throw error(key, "must be an array of strings, found \(e.typeName)") }
            out.append(s)
        }
        return out
    }

    /// A nested object; absent gives an empty node (so defaults apply).
    public func child(_ key: String) throws(ConfigError) -> ConfigNode {
        let v = value(key)
        let o: JSONObject
        switch v {
        case nil: o = JSONObject()
        case .object(let obj)?: o = obj
        case let other?: throw error(key, "must be an object, got \(other.typeName)")
        }
        let c = ConfigNode(file: file, path: full(key), object: o)
        state.withLock { $0.children.append(c) }
        return c
    }

    /// An array of objects.
    public func children(_ key: String) throws(ConfigError) -> [ConfigNode] {
        guard let v = value(key) else { return [] }
        guard case .array(let a) = v else { throw error(key, "must be an array of objects") }
        var out: [ConfigNode] = []
        for (i, e) in a.enumerated() {
            guard case .object(let o) = e else { throw error("\(key)[\(i)]", "must be an object, got \(e.typeName)") }
            let c = ConfigNode(file: file, path: full("\(key)[\(i)]"), object: o)
            state.withLock { $0.children.append(c) }
            out.append(c)
        }
        return out
    }

    /// Where a secret came from (see ``secret(fileKey:environmentKey:)``).
    package enum SecretSource: Sendable { case file, environment }

    /// A secret (a password, API tokens) given by a file (`fileKey`: its path,
    /// read whole) or by the name of an environment variable that holds it
    /// (`environmentKey`), never inline; nil when neither key is given. Errors
    /// name the key, the file or the variable, never the secret.
    /// A file over `limit` bytes is refused.
    package func secret(fileKey: String, environmentKey: String, limit: Int = 1 << 20) throws(ConfigError) -> (text: String, source: SecretSource)? {
        let file = try path(fileKey), variable = try string(environmentKey)
        if file != nil && variable != nil { throw error(fileKey, "give \(fileKey) or \(environmentKey), not both") }
        if let file {
            let bytes: [UInt8]
            do { bytes = try readSmallFile(file, limit: limit) } catch { throw self.error(fileKey, "\(error)") }
            if let warning = secretFileWarning(file, holds: "a secret (\(self.file): \(fileKey))") { warnAtStart(warning) }
            return (String(decoding: bytes, as: UTF8.self), .file)
        }
        guard let variable else { return nil }
        guard let raw = getenv(variable) else { throw error(environmentKey, "the environment variable \(variable) is not set") }
        return (String(cString: raw), .environment)
    }

    /// Fails on the first key, here or in any child read, that nothing read.
    public func finish() throws(ConfigError) {
        let (read, children) = state.withLock { ($0.read, $0.children) }
        for k in object.keys where !read.contains(k) {
            throw error(k, "unknown key")
        }
        for c in children { try c.finish() }
    }
}

/// A configuration error, naming the file and the key.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    public let file: String
    public let key: String
    public let message: String
    public init(file: String, key: String, message: String) {
        self.file = file
        self.key = key
        self.message = message
    }
    public var description: String { key.isEmpty ? "\(file): \(message)" : "\(file): \(key): \(message)" }
}
