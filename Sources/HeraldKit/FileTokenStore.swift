import HeraldCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A token store kept in a file, so what one run learns (status 8, feedback
/// tuples) suppresses sends in the next.
///
/// The file is an append-only JSON Lines journal, one event per line:
/// `{"token":"<hex>","dead":1700000000}` or `{"token":"<hex>","registered":1700000100}`.
/// It is replayed into memory when opened (streaming; a corrupt line is an
/// error naming the file and line) and appended to on every change.
public final class FileTokenStore: TokenStore {
    public let path: String
    let memory = InMemoryTokenStore()
    let fd: Int32
    let writeLock = Mutex<Void>(())

    public init(path: String) throws(ConfigError) {
        self.path = path
        if access(path, F_OK) == 0 {
            do {
                var reader = try LineReader(path: path)
                let decoder = TokenEventDecoder(path: path)
                while let line = try reader.next() {
                    guard case .line(let n, let bytes) = line else {
                        throw ConfigError(file: path, key: "", message: "line too long")
                    }
                    if bytes.isEmpty { continue }
                    try decoder.apply(bytes, line: n, to: memory)
                }
            } catch let e as ConfigError {
                throw e
            } catch {
                throw ConfigError(file: path, key: "", message: "cannot read: \(error)")
            }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        if fd < 0 { throw ConfigError(file: path, key: "", message: "cannot open for writing: \(String(cString: strerror(errno)))") }
        self.fd = fd
    }

    deinit { close(fd) }

    public func registered(_ token: DeviceToken, at time: UInt32) {
        memory.registered(token, at: time)
        append(token, "registered", time)
    }

    public func unregistered(_ token: DeviceToken, at time: UInt32) {
        memory.unregistered(token, at: time)
        append(token, "dead", time)
    }

    public func isSuppressed(_ token: DeviceToken) -> Bool { memory.isSuppressed(token) }

    /// Number of tokens currently suppressed.
    public var suppressedCount: Int { memory.suppressedCount }

    func append(_ token: DeviceToken, _ key: StaticString, _ time: UInt32) {
        var w = JSONWriter(capacity: 100)
        w.raw("{\"token\":")
        w.string(token.hex)
        w.byte(UInt8(ascii: ","))
        w.key(key)
        w.int(Int(time))
        w.raw("}\n")
        writeLock.withLock { _ in
            _ = w.bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }
}

struct TokenEventDecoder {
    let path: String
    func apply(_ bytes: UnsafeRawBufferPointer, line: Int, to store: InMemoryTokenStore) throws(ConfigError) {
        func fail(_ m: String) -> ConfigError { ConfigError(file: path, key: "", message: "line \(line): \(m)") }
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw fail(error.description) }
        guard case .object(let o) = value, let hex = o["token"]?.stringValue else { throw fail("expected {\"token\":…}") }
        let token: DeviceToken
        do { token = try DeviceToken(hex: hex) } catch { throw fail("\(error)") }
        if let dead = o["dead"]?.numberValue?.intValue, let t = UInt32(exactly: dead) {
            store.unregistered(token, at: t)
        } else if let reg = o["registered"]?.numberValue?.intValue, let t = UInt32(exactly: reg) {
            store.registered(token, at: t)
        } else {
            throw fail("expected \"dead\" or \"registered\" UNIX seconds")
        }
    }
}
