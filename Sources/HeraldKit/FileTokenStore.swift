import HeraldCore
import HeraldJSON
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
///
/// Crash safety: each event is one write of one whole line. A last line cut
/// short (a crash while writing) is reported and cut off when the journal is
/// opened; a complete last line that only lacks its newline gets one. A write
/// that fails (a full disk) is undone (the file is cut back to where it was),
/// reported once on standard error and kept in ``writeFailure``; the change
/// still holds in memory for this run.
public final class FileTokenStore: TokenStore {
    public let path: String
    let memory = InMemoryTokenStore()
    let fd: Int32
    let writeState = Mutex<IOError?>(nil)

    public init(path: String) throws(ConfigError) {
        self.path = path
        var tornBytes = 0
        var lastLineUnterminated = false
        if access(path, F_OK) == 0 {
            do {
                var reader = try LineReader(path: path)
                let decoder = TokenEventDecoder(path: path)
                // A bad line is fatal unless it is the last one, unterminated: a torn write.
                var pending: (error: ConfigError, length: Int)?
                while let line = try reader.next() {
                    if let p = pending { throw p.error }
                    guard case .line(let n, let bytes) = line else {
                        throw ConfigError(file: path, key: "", message: "line too long")
                    }
                    if bytes.isEmpty { continue }
                    do { try decoder.apply(bytes, line: n, to: memory) } catch { pending = (error, bytes.count) }
                }
                lastLineUnterminated = try Self.lastByte(of: path).map { $0 != 0x0A } ?? false
                if let p = pending {
                    guard lastLineUnterminated else { throw p.error }
                    tornBytes = p.length
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
        if tornBytes > 0 {
            let end = lseek(fd, 0, SEEK_END)
            guard end >= 0, ftruncate(fd, end - off_t(tornBytes)) == 0 else {
                let e = errno
                close(fd)
                throw ConfigError(file: path, key: "", message: "cannot cut off a torn last line: \(String(cString: strerror(e)))")
            }
            writeToStandardError("herald: \(path): the last line was cut short (a crash while writing?); dropped its \(tornBytes) bytes\n")
        } else if lastLineUnterminated {
            do { try Self.appendLine([0x0A], fd: fd, path: path) } catch {
                close(fd)
                throw ConfigError(file: path, key: "", message: "cannot end the last line: \(error)")
            }
        }
    }

    deinit { close(fd) }

    /// The first append that failed, if any (the change was kept in memory only).
    public var writeFailure: IOError? { writeState.withLock { $0 } }

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
        writeState.withLock { failure in
            do throws(IOError) {
                try Self.appendLine(w.bytes, fd: fd, path: path)
            } catch {
                if failure == nil {
                    writeToStandardError("herald: cannot append to the token store \(error); changes are kept in memory for this run only\n")
                }
                failure = failure ?? error
            }
        }
    }

    /// Appends one whole line; if the write fails part-way, cuts the file back
    /// so that no partial line is left for the next append to be glued onto.
    static func appendLine(_ bytes: [UInt8], fd: Int32, path: String) throws(IOError) {
        let before = lseek(fd, 0, SEEK_END)
        do {
            try writeAll(fd, bytes, to: path)
        } catch {
            if before >= 0 { _ = ftruncate(fd, before) }
            throw error
        }
    }

    /// The file's last byte, `nil` when it is empty.
    static func lastByte(of path: String) throws(IOError) -> UInt8? {
        let fd = open(path, O_RDONLY)
        if fd < 0 { throw IOError(path: path, errno: errno) }
        defer { close(fd) }
        let end = lseek(fd, 0, SEEK_END)
        guard end > 0 else { return nil }
        var b: UInt8 = 0
        guard pread(fd, &b, 1, end - 1) == 1 else { throw IOError(path: path, errno: errno) }
        return b
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
