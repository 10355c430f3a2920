import Foundation
import HeraldCore
import HeraldJSON
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the recorder cuts its log into segments.
public struct RecorderOptions: Sendable, Hashable {
    /// A new segment once the current one holds this many compressed bytes.
    public var maxSegmentBytes = 64 << 20
    /// A new segment once the current one is this old.
    public var maxSegmentAge: Duration = .seconds(3600)
    /// zlib's level: 1 compresses JSON Lines about 5× at several times `gzip -6`'s speed.
    public var level: Int32 = 1
    /// Include each binary frame as hex.
    public var includeFrames = true
    public init() {}
}

/// Writes the recorder's log: a directory of segments
/// `herald-<UTC time>-<pid>-<n>.jsonl.gz`, whose names sort in time order, each
/// a series of complete gzip members (one per batch, so `zcat` and `gzip -t`
/// read every segment, and a crash leaves at most one torn member at the end),
/// and beside each an index `….jsonl.gz.idx` with one JSON line per member:
/// `{"offset":0,"length":1234,"records":512,"first":1700000000000,"last":1700000000099}`
/// (times in milliseconds), so readers can skip members outside a time range
/// and step over a damaged one.
///
/// Not synchronized: ``RecorderTransport`` holds it under a lock.
public final class SegmentedLogWriter {
    let logger: Logger
    public let directory: String
    public let options: RecorderOptions
    let compressor: GzipMemberCompressor
    var segment: (path: String, fd: Int32, index: Int32, size: Int64, opened: ContinuousClock.Instant)?
    var counter = 0
    /// Uncompressed and compressed bytes written, over every segment.
    public private(set) var bytesIn = 0
    public private(set) var bytesOut = 0
    /// Segments this writer made, in order.
    public private(set) var segments: [String] = []
    var indexFailureReported = false

    /// Creates the directory if needed (owner only: the log holds device tokens).
    /// `logger` gets the writer's warnings (an index it could not append to).
    public init(directory: String, options: RecorderOptions = RecorderOptions(), logger: Logger = Logger(label: "herald.recorder")) throws(RecorderError) {
        self.logger = logger
        self.directory = directory
        self.options = options
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw RecorderError(path: directory, message: "not a directory: the recorder writes a directory of segments (recorder.path names it)")
            }
        } else if mkdir(directory, 0o700) != 0 {
            throw RecorderError(path: directory, message: "cannot create the log directory: \(String(cString: strerror(errno)))")
        }
        compressor = try GzipMemberCompressor(level: options.level)
    }

    deinit { close() }

    /// Appends `lines` (complete JSON lines) as one gzip member, and its index line.
    /// When the member cannot be written whole, the segment is cut back to where
    /// it was and the error thrown: no partial member is left for the next to follow.
    public func append(_ lines: [UInt8], records: Int, first: Int64, last: Int64) throws(RecorderError) {
        if let s = segment, s.size >= Int64(options.maxSegmentBytes) || ContinuousClock.now - s.opened >= options.maxSegmentAge { close() }
        if segment == nil { try open() }
        let compressed: Result<[UInt8], RecorderError> = lines.withUnsafeBytes { raw in
            Result { () throws(RecorderError) in try compressor.member(raw) }
        }
        let member = try compressed.get()
        let s = segment!
        do throws(IOError) {
            try writeAll(s.fd, member, to: s.path)
        } catch {
            _ = ftruncate(s.fd, off_t(s.size))
            throw RecorderError(path: s.path, message: "write failed: \(String(cString: strerror(error.code)))")
        }
        segment!.size += Int64(member.count)
        bytesIn += lines.count
        bytesOut += member.count
        var w = JSONWriter(capacity: 96)
        w.raw("{\"offset\":")
        w.int(Int(s.size))
        w.raw(",\"length\":")
        w.int(member.count)
        w.raw(",\"records\":")
        w.int(records)
        w.raw(",\"first\":")
        w.int(Int(first))
        w.raw(",\"last\":")
        w.int(Int(last))
        w.raw("}\n")
        do throws(IOError) {
            try writeAll(s.index, w.bytes, to: s.path + ".idx")
        } catch {
            // The records are in the segment; only the shortcut is lost: readers scan instead.
            if !indexFailureReported {
                indexFailureReported = true
                logger.warning("cannot append to \(s.path).idx (\(error)); readers will scan that segment")
            }
        }
    }

    /// Closes the current segment; the next append opens a new one.
    public func close() {
        guard let s = segment else { return }
        _ = fsync(s.fd)
        _ = Glibc.close(s.fd)
        _ = Glibc.close(s.index)
        segment = nil
    }

    func open() throws(RecorderError) {
        let now = Date()
        var t = time_t(now.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        let millis = Int(now.timeIntervalSince1970 * 1000) % 1000
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
        while true {
            counter += 1
            let path = "\(directory)/herald-\(stamp)-\(getpid())-\(String(format: "%04d", counter)).jsonl.gz"
            let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0o600)
            if fd < 0 {
                if errno == EEXIST { continue }
                throw RecorderError(path: path, message: "cannot create a segment: \(String(cString: strerror(errno)))")
            }
            let index = Glibc.open(path + ".idx", O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0o600)
            if index < 0 {
                let e = errno
                _ = Glibc.close(fd)
                throw RecorderError(path: path + ".idx", message: "cannot create a segment index: \(String(cString: strerror(e)))")
            }
            segment = (path, fd, index, 0, ContinuousClock.now)
            segments.append(path)
            return
        }
    }
}
