import CHeraldZlib
import CZlib
import HeraldCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Compresses byte runs into complete gzip members (RFC 1952: header, deflate
/// data, CRC-32 and size), one per call, reusing one zlib state. Members
/// written one after another are a valid gzip file: `zcat` and `gzip -t` read
/// them as one stream, and a reader can start at any member.
public final class GzipMemberCompressor {
    var stream = z_stream()
    var out: [UInt8]
    public let level: Int32

    public init(level: Int32 = 1) throws(RecorderError) {
        self.level = level
        out = []
        let rc = herald_deflate_init_gzip(&stream, level)
        if rc != Z_OK { throw RecorderError(path: "", message: "zlib deflateInit2 failed (\(rc))") }
    }

    deinit { deflateEnd(&stream) }

    /// `input` as one complete gzip member.
    public func member(_ input: UnsafeRawBufferPointer) throws(RecorderError) -> [UInt8] {
        let bound = Int(deflateBound(&stream, uLong(input.count))) + 64
        if out.count < bound { out = [UInt8](repeating: 0, count: bound) }
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        let (rc, produced): (Int32, Int) = out.withUnsafeMutableBytes { o in
            stream.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.avail_out = uInt(o.count)
            let rc = deflate(&stream, Z_FINISH)
            return (rc, o.count - Int(stream.avail_out))
        }
        guard rc == Z_STREAM_END else { throw RecorderError(path: "", message: "zlib deflate failed (\(rc))") }
        deflateReset(&stream)
        return Array(out[0..<produced])
    }
}

/// Inflates one gzip member that starts at a known offset of a file. A class:
/// zlib's state points back at its `z_stream`, which therefore must not move.
final class GzipMemberInflater {
    var stream = z_stream()

    init() throws(RecorderError) {
        if herald_inflate_init_gzip(&stream) != Z_OK { throw RecorderError(path: "", message: "zlib inflateInit2 failed") }
    }

    deinit { inflateEnd(&stream) }

    enum Result {
        /// The member's bytes, and its compressed length.
        case member([UInt8], length: Int)
        /// Not a valid member: zlib's message.
        case corrupt(String)
        /// The file ends inside the member.
        case truncated
        /// The decompressed member is larger than the limit.
        case tooLarge
    }

    /// Inflates the member at `offset` of `fd` (reading ahead in 64 KiB chunks).
    func inflateMember(fd: Int32, at offset: Int64, limit: Int) -> Result {
        inflateReset(&stream)
        var input = [UInt8](repeating: 0, count: 64 << 10)
        var output = [UInt8](repeating: 0, count: 256 << 10)
        var result: [UInt8] = []
        var position = offset
        var used = 0
        while true {
            let n = input.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, off_t(position)) }
            if n < 0 { return .corrupt("read failed: \(String(cString: strerror(errno)))") }
            if n == 0 { return .truncated }
            var start = 0
            while start < n {
                let (rc, produced, consumed): (Int32, Int, Int) = input.withUnsafeMutableBytes { i in
                    output.withUnsafeMutableBytes { o in
                        stream.next_in = i.baseAddress!.assumingMemoryBound(to: Bytef.self) + start
                        stream.avail_in = uInt(n - start)
                        stream.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
                        stream.avail_out = uInt(o.count)
                        let rc = inflate(&stream, Z_NO_FLUSH)
                        return (rc, o.count - Int(stream.avail_out), n - start - Int(stream.avail_in))
                    }
                }
                start += consumed
                used += consumed
                if produced > 0 {
                    if result.count + produced > limit { return .tooLarge }
                    result.append(contentsOf: output[0..<produced])
                }
                switch rc {
                case Z_STREAM_END: return .member(result, length: used)
                case Z_OK: continue
                case Z_BUF_ERROR: if consumed == 0 && produced == 0 { break } else { continue }
                default: return .corrupt(stream.msg.map { String(cString: $0) } ?? "zlib error \(rc)")
                }
                break
            }
            position += Int64(n)
        }
    }
}

/// A recorder file could not be written or read.
public struct RecorderError: Error, Sendable, Hashable, CustomStringConvertible {
    public let path: String
    public let message: String
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}
