import HeraldCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one JSON Lines outcome per request:
/// `{"id":42,"line":3,"token":"<hex>","outcome":"rejected","status":8,"reason":"invalid token"}`.
///
/// The token is written in full: the outcome stream is data for the caller's
/// own tools (to remove dead tokens), not a log.
public final class OutcomeWriter: OutcomeObserver {
    let fd: Int32
    let ownsDescriptor: Bool
    let buffer = Mutex<[UInt8]>([])

    /// Writes to a file (created or truncated), or standard output for `-`.
    public init(path: String) throws(IOError) {
        if path == "-" {
            fd = 1
            ownsDescriptor = false
        } else {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            if fd < 0 { throw IOError(path: path, errno: errno) }
            self.fd = fd
            ownsDescriptor = true
        }
    }

    deinit {
        flush()
        if ownsDescriptor { close(fd) }
    }

    /// The JSON line of one record (without the newline).
    public static func line(_ r: OutcomeRecord) -> [UInt8] {
        var w = JSONWriter(capacity: 160)
        append(r, to: &w)
        return w.bytes
    }

    static func append(_ r: OutcomeRecord, to w: inout JSONWriter) {
        w.byte(UInt8(ascii: "{"))
        if let id = r.id { w.key("id"); w.int(Int(id)); w.byte(UInt8(ascii: ",")) }
        if let line = r.line { w.key("line"); w.int(line); w.byte(UInt8(ascii: ",")) }
        if let t = r.token { w.key("token"); w.string(t.hex); w.byte(UInt8(ascii: ",")) }
        w.key("outcome")
        w.string(r.outcome.kind.rawValue)
        switch r.outcome {
        case .rejected(let s):
            w.raw(",\"status\":"); w.int(Int(s.rawValue))
            w.raw(",\"reason\":"); w.string(s.description)
        case .dropped(let reason), .failed(let reason):
            w.raw(",\"reason\":"); w.string(reason)
        case .accepted, .suppressed: break
        }
        w.byte(UInt8(ascii: "}"))
    }

    public func observe(_ records: [OutcomeRecord]) {
        buffer.withLock { buf in
            var w = JSONWriter(capacity: 0)
            swap(&w.bytes, &buf)
            for r in records {
                Self.append(r, to: &w)
                w.byte(0x0A)
            }
            swap(&w.bytes, &buf)
            // One write per recorded batch: outcomes of a streaming run appear as they are decided.
            writeAll(fd, &buf)
        }
    }

    /// Writes out what is buffered.
    public func flush() {
        buffer.withLock { writeAll(fd, &$0) }
    }
}

/// Collects outcome records in memory, for tests and embedders.
public final class OutcomeCollector: OutcomeObserver {
    let storage = Mutex<[OutcomeRecord]>([])
    public init() {}
    public func observe(_ records: [OutcomeRecord]) { storage.withLock { $0.append(contentsOf: records) } }
    /// Everything recorded so far, in the order it was recorded.
    public var records: [OutcomeRecord] { storage.withLock { $0 } }
}

