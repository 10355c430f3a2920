import Foundation
import HeraldCore
import HeraldJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Something wrong in a log, and where: the segment and the byte offset.
public struct LogProblem: Sendable, Hashable, CustomStringConvertible {
    public let segment: String
    public let offset: Int64
    public let message: String
    public var description: String { "\(segment): offset \(offset): \(message)" }
}

/// One record read back, with where it was.
public struct LogRecord: Sendable {
    public let segment: String
    /// The offset of the gzip member that holds it.
    public let offset: Int64
    public let object: JSONObject
    /// `time` (milliseconds since 1970), if the record has one.
    public var time: Int64? { object["time"]?.numberValue?.intValue.map(Int64.init) }
}

/// Reads the recorder's logs back, streaming, member by member: directories
/// (their segments in name order, that is time order) and segment files, or
/// any gzip file of JSON lines. Damage never stops it: a corrupt member is
/// reported (segment and offset) and skipped to the next member (found through
/// the segment's index, or by looking for the next gzip header), a torn last
/// member is reported as such, a line that is not a JSON object is reported
/// and skipped; every good record around them is read.
///
/// With ``timeRange``, members the index places wholly outside it are skipped
/// unread.
public final class LogReader {
    public let segments: [String]
    /// Only records whose `time` is within (milliseconds); members outside, per the index, are not read.
    public var timeRange: ClosedRange<Int64>?
    /// Called with each problem as it is found.
    public var onProblem: (LogProblem) -> Void = { _ in }
    public private(set) var problems: [LogProblem] = []
    /// A member larger than this (decompressed) is reported and skipped.
    public var maxMemberBytes = 256 << 20

    var segmentIndex = 0
    var fd: Int32 = -1
    var size: Int64 = 0
    var offset: Int64 = 0
    var index: [(offset: Int64, length: Int64, first: Int64, last: Int64)] = []
    /// `index` by offset: every member is looked up once, in a segment of thousands.
    var indexByOffset: [Int64: (length: Int64, first: Int64, last: Int64)] = [:]
    var pending: [JSONObject] = []
    var pendingNext = 0
    var pendingAt: Int64 = 0
    let inflater: GzipMemberInflater

    /// `paths`: log directories and segment files; an error names one that cannot be read.
    public init(paths: [String]) throws(RecorderError) {
        var segments: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw RecorderError(path: path, message: "no such file or directory")
            }
            if isDirectory.boolValue {
                let names: [String]
                do { names = try FileManager.default.contentsOfDirectory(atPath: path) } catch {
                    throw RecorderError(path: path, message: "cannot list: \(error.localizedDescription)")
                }
                segments += names.filter { $0.hasSuffix(".jsonl.gz") }.sorted().map { "\(path)/\($0)" }
            } else {
                segments.append(path)
            }
        }
        self.segments = segments
        inflater = try GzipMemberInflater()
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// The next record, or `nil` when every segment is read.
    public func next() -> LogRecord? {
        while true {
            if pendingNext < pending.count {
                let o = pending[pendingNext]
                pendingNext += 1
                let record = LogRecord(segment: segments[segmentIndex], offset: pendingAt, object: o)
                if let range = timeRange, let t = record.time, !range.contains(t) { continue }
                return record
            }
            if fd < 0 {
                guard segmentIndex < segments.count else { return nil }
                if !openSegment() {
                    segmentIndex += 1
                    continue
                }
            }
            if !readMember() {
                close(fd)
                fd = -1
                segmentIndex += 1
            }
        }
    }

    func report(_ offset: Int64, _ message: String) {
        let p = LogProblem(segment: segments[segmentIndex], offset: offset, message: message)
        problems.append(p)
        onProblem(p)
    }

    func openSegment() -> Bool {
        let path = segments[segmentIndex]
        fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            report(0, "cannot open: \(String(cString: strerror(errno)))")
            return false
        }
        size = Int64(lseek(fd, 0, SEEK_END))
        offset = 0
        index = loadIndex(path + ".idx")
        indexByOffset = Dictionary(uniqueKeysWithValues: index.map { ($0.offset, ($0.length, $0.first, $0.last)) })
        return true
    }

    /// The segment's index when it is whole and consistent (members back to back from 0); otherwise none.
    func loadIndex(_ path: String) -> [(offset: Int64, length: Int64, first: Int64, last: Int64)] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var entries: [(offset: Int64, length: Int64, first: Int64, last: Int64)] = []
        var expected: Int64 = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            guard let o = (try? JSONParser.parse(Array(line)))?.objectValue,
                let off = o["offset"]?.numberValue?.intValue, let len = o["length"]?.numberValue?.intValue,
                let first = o["first"]?.numberValue?.intValue, let last = o["last"]?.numberValue?.intValue,
                Int64(off) == expected, len > 0
            else { break }  // a torn or damaged index line: trust what came before it
            entries.append((Int64(off), Int64(len), Int64(first), Int64(last)))
            expected = Int64(off + len)
        }
        return entries
    }

    /// Reads the member at `offset` into `pending`; false at the segment's end.
    func readMember() -> Bool {
        guard offset < size else { return false }
        let known = indexByOffset[offset]
        if let range = timeRange, let known, known.last < range.lowerBound || known.first > range.upperBound {
            offset += known.length
            return true
        }
        switch inflater.inflateMember(fd: fd, at: offset, limit: maxMemberBytes) {
        case .member(let bytes, let length):
            splitLines(bytes)
            offset += Int64(length)
            return true
        case .truncated:
            report(offset, "torn tail: the last \(size - offset) bytes are an incomplete gzip member (a crash while writing?); the records before it are read")
            return false
        case .corrupt(let message):
            report(offset, offset == 0 && size > 0 && !startsWithGzipHeader(at: 0) ? "not gzip data (\(message))" : "corrupt gzip member (\(message))")
            return skipDamaged()
        case .tooLarge:
            report(offset, "a gzip member larger than \(maxMemberBytes) bytes decompressed; skipped")
            return skipDamaged()
        }
    }

    /// Moves past a damaged member: to the next member the index knows, or to the next gzip header.
    func skipDamaged() -> Bool {
        if let next = index.first(where: { $0.offset > offset }) {
            offset = next.offset
            return true
        }
        guard let next = nextGzipHeader(after: offset) else { return false }
        report(next, "reading resumes at the next gzip header")
        offset = next
        return true
    }

    func startsWithGzipHeader(at position: Int64) -> Bool {
        var b = [UInt8](repeating: 0, count: 3)
        return pread(fd, &b, 3, off_t(position)) == 3 && b == [0x1F, 0x8B, 0x08]
    }

    /// The offset of the next `1f 8b 08` after `position`.
    func nextGzipHeader(after position: Int64) -> Int64? {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var at = position + 1
        while at < size {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, off_t(at)) }
            if n < 3 { return nil }
            for i in 0..<(n - 2) where chunk[i] == 0x1F && chunk[i + 1] == 0x8B && chunk[i + 2] == 0x08 {
                return at + Int64(i)
            }
            at += Int64(n - 2)
        }
        return nil
    }

    func splitLines(_ bytes: [UInt8]) {
        pendingAt = offset
        pending.removeAll(keepingCapacity: true)
        pendingNext = 0
        bytes.withUnsafeBytes { raw in
            forEachLine(in: raw) { number, line in
                guard !line.isEmpty else { return }
                if case .object(let o)? = try? JSONParser.parse(line) {
                    pending.append(o)
                } else {
                    report(offset, "line \(number) of the member is not a JSON object; skipped")
                }
            }
        }
    }
}
