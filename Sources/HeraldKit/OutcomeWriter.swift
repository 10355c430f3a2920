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
    /// What a record's `line` is called in its line (``NotificationSource/lineKey``).
    let lineKey: StaticString
    let state = Mutex(State())
    let onFailure: @Sendable (IOError) -> Void

    struct State {
        var buffer: [UInt8] = []
        var failure: IOError?
        var written = 0
        var lost = 0
        var pending = 0
    }

    /// How an outcomes file is opened.
    public enum FileMode: Sendable, Hashable {
        /// Lines are added after what the file holds (`O_APPEND`); the file is never truncated.
        /// The default: a restart keeps the previous run's outcomes.
        case append
        /// The file is emptied first (only once this process holds its lock): `herald send --overwrite-outcomes`.
        case overwrite
    }

    /// Writes to a file (created readable by its owner only: it holds full
    /// device tokens), or standard output for `-`.
    ///
    /// A file is opened with `O_APPEND` and never truncated unless `mode` is
    /// ``FileMode/overwrite``. Before anything is written to it this process
    /// takes an exclusive lock on it (a POSIX record lock, released when the
    /// process ends however it ends): a second herald writing outcomes to the
    /// same file is refused, naming the process that holds it, and leaves the
    /// file as it was. When the file's last line has no newline (a run that
    /// was killed in the middle of a write), one is added first, so the next
    /// line starts on a line of its own.
    public init(path: String, mode: FileMode = .append, lineKey: StaticString = "line", onFailure: @escaping @Sendable (IOError) -> Void = { _ in })
        throws(OutcomeFileError)
    {
        self.onFailure = onFailure
        self.lineKey = lineKey
        if path == "-" {
            fd = 1
            ownsDescriptor = false
            name = "standard output"
        } else {
            // Only a regular file is an outcomes log to lock and repair: /dev/null (herald work's
            // default), a FIFO or a terminal is opened write-only as before (a FIFO's open still
            // waits for its reader) and written to as it is, by as many processes as like.
            var before = stat()
            let special = stat(path, &before) == 0 && (before.st_mode & S_IFMT) != S_IFREG
            // No O_TRUNC: the file may be another process's, which the lock below finds out.
            // Read as well as written: the last byte is read to end a torn last line.
            let fd = open(path, (special ? O_WRONLY : O_RDWR | O_CREAT) | O_APPEND | O_CLOEXEC, 0o600)
            if fd < 0 { throw OutcomeFileError(path: path, "cannot open: \(String(cString: strerror(errno)))") }
            var info = stat()
            if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG {
                do throws(OutcomeFileError) {
                    try Self.lock(fd, path: path)
                    if mode == .overwrite {
                        if ftruncate(fd, 0) != 0 { throw OutcomeFileError(path: path, "cannot empty it: \(String(cString: strerror(errno)))") }
                    } else {
                        try Self.endLastLine(fd, path: path)
                    }
                } catch {
                    close(fd)
                    throw error
                }
            }
            self.fd = fd
            ownsDescriptor = true
            name = path
        }
    }

    /// Takes the exclusive lock, or says which process has it.
    static func lock(_ fd: Int32, path: String) throws(OutcomeFileError) {
        var l = flock()
        l.l_type = Int16(F_WRLCK)
        l.l_whence = Int16(SEEK_SET)
        if fcntl(fd, F_SETLK, &l) == 0 { return }
        let code = errno
        guard code == EAGAIN || code == EACCES else {
            throw OutcomeFileError(path: path, "cannot lock it: \(String(cString: strerror(code)))")
        }
        var holder = flock()
        holder.l_type = Int16(F_WRLCK)
        holder.l_whence = Int16(SEEK_SET)
        let pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != Int16(F_UNLCK) ? " (pid \(holder.l_pid))" : ""
        throw OutcomeFileError(
            path: path, "another process\(pid) is writing outcomes to it; stop it first, or give this run another outcomes file")
    }

    /// Adds a newline when the file is not empty and does not end with one.
    static func endLastLine(_ fd: Int32, path: String) throws(OutcomeFileError) {
        let size = lseek(fd, 0, SEEK_END)
        guard size > 0 else { return }
        var last: UInt8 = 0
        guard pread(fd, &last, 1, size - 1) == 1 else {
            throw OutcomeFileError(path: path, "cannot read its last byte: \(String(cString: strerror(errno)))")
        }
        guard last != 0x0A else { return }
        var newline: UInt8 = 0x0A
        if Glibc.write(fd, &newline, 1) != 1 {
            throw OutcomeFileError(path: path, "cannot end its last line: \(String(cString: strerror(errno)))")
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

    /// The JSON line of one record (without the newline): ``OutcomeRecord/jsonLine``.
    public static func line(_ r: OutcomeRecord) -> [UInt8] { r.jsonLine }

    public func observe(_ records: [OutcomeRecord]) {
        let failed = state.withLock { s -> IOError? in
            guard s.failure == nil else {
                s.lost += records.count
                return nil
            }
            Self.encode(records, lineKey: lineKey, into: &s.buffer)
            s.pending += records.count
            // One write per recorded batch: outcomes of a streaming run appear as they are decided.
            return Self.write(&s, fd: fd, name: name)
        }
        if let failed { onFailure(failed) }
    }

    /// Appends `records` as outcome lines to `buffer`: through a ``FixedJSONWriter`` over room
    /// for 256 bytes a record (one bounds check a piece: a growing array's append a byte was
    /// half of writing outcome lines), or, if a record is longer, through a ``JSONWriter``.
    static func encode(_ records: [OutcomeRecord], lineKey: StaticString, into buffer: inout [UInt8]) {
        // Each loop calls the encoder compiled for its writer (a generic loop would call the generic one).
        let capacity = records.count * 256 + 256
        var fitted = true
        let chunk = [UInt8](unsafeUninitializedCapacity: capacity) { out, count in
            var w = FixedJSONWriter(base: out.baseAddress!, capacity: capacity)
            for i in records.indices {
                records[i].writeJSON(to: &w, lineKey: lineKey)
                w.byte(0x0A)
            }
            fitted = !w.overflowed
            count = fitted ? w.count : 0
        }
        if fitted {
            if buffer.isEmpty { buffer = chunk } else { buffer.append(contentsOf: chunk) }
            return
        }
        var w = JSONWriter(capacity: 0)
        swap(&w.bytes, &buffer)
        for i in records.indices {
            records[i].writeJSON(to: &w, lineKey: lineKey)
            w.byte(0x0A)
        }
        swap(&w.bytes, &buffer)
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

/// An outcomes file that cannot be used: which file, and why.
public struct OutcomeFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }
    public var description: String { "outcomes file \(path): \(reason)" }
}
