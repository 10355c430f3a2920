import HeraldCore
import HeraldJSON
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
///
/// A write that fails (a full disk, a closed pipe) is kept as ``failure``;
/// nothing more is written after it, the lines not written are counted, and
/// `onFailure` is called once, so the caller can stop and say so.
public final class OutcomeWriter: OutcomeObserver {
    let fd: Int32
    let ownsDescriptor: Bool
    let name: String
    let state = Mutex(State())
    let onFailure: @Sendable (IOError) -> Void

    struct State {
        var buffer: [UInt8] = []
        var failure: IOError?
        var written = 0
        var lost = 0
        var pending = 0
    }

    /// Writes to a file (created or truncated, readable by its owner only:
    /// it holds full device tokens), or standard output for `-`.
    public init(path: String, onFailure: @escaping @Sendable (IOError) -> Void = { _ in }) throws(IOError) {
        self.onFailure = onFailure
        if path == "-" {
            fd = 1
            ownsDescriptor = false
            name = "standard output"
        } else {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            if fd < 0 { throw IOError(path: path, errno: errno) }
            self.fd = fd
            ownsDescriptor = true
            name = path
        }
    }

    deinit {
        flush()
        if ownsDescriptor { close(fd) }
    }

    /// The first write that failed, if any.
    public var failure: IOError? { state.withLock { $0.failure } }
    /// Outcome lines written, and lines that could not be written.
    public var counts: (written: Int, lost: Int) { state.withLock { ($0.written, $0.lost) } }

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
            w.raw(",\"status\":"); w.int(s.rawValue)
            w.raw(",\"reason\":"); w.string(s.description)
        case .dropped(let reason), .failed(let reason):
            w.raw(",\"reason\":"); w.string(reason.message)
            if reason.code != .unspecified { w.raw(",\"code\":"); w.string(reason.code.name) }
        case .accepted, .suppressed: break
        }
        if let a = r.apnsID { w.raw(",\"apnsId\":"); w.string(a) }
        if let u = r.apnsUniqueID { w.raw(",\"apnsUniqueId\":"); w.string(u) }
        if let c = r.apnsChannelID { w.raw(",\"channelId\":"); w.string(c) }
        if let t = r.apnsUnregisteredAt { w.raw(",\"timestamp\":"); w.int(Int(t)) }
        w.byte(UInt8(ascii: "}"))
    }

    public func observe(_ records: [OutcomeRecord]) {
        let failed = state.withLock { s -> IOError? in
            guard s.failure == nil else {
                s.lost += records.count
                return nil
            }
            var w = JSONWriter(capacity: 0)
            swap(&w.bytes, &s.buffer)
            for r in records {
                Self.append(r, to: &w)
                w.byte(0x0A)
            }
            swap(&w.bytes, &s.buffer)
            s.pending += records.count
            // One write per recorded batch: outcomes of a streaming run appear as they are decided.
            return Self.write(&s, fd: fd, name: name)
        }
        if let failed { onFailure(failed) }
    }

    /// Writes out what is buffered.
    public func flush() {
        let failed = state.withLock { s in Self.write(&s, fd: fd, name: name) }
        if let failed { onFailure(failed) }
    }

    /// Writes the buffer; returns the failure if this write is the first to fail.
    static func write(_ s: inout State, fd: Int32, name: String) -> IOError? {
        guard s.failure == nil, !s.buffer.isEmpty else { return nil }
        do throws(IOError) {
            try writeAll(fd, &s.buffer, to: name)
            s.written += s.pending
            s.pending = 0
            return nil
        } catch {
            s.failure = error
            s.lost += s.pending
            s.pending = 0
            return error
        }
    }
}
