import CHeraldZlib
import CZlib
import HeraldCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a gzip stream (RFC 1952, what `zcat` reads) to a file, compressing as it goes.
/// Memory is bounded by the output chunk, whatever is written.
public final class GzipFileWriter {
    public let path: String
    var stream = z_stream()
    let fd: Int32
    var out: [UInt8]
    var closed = false
    /// Uncompressed bytes written so far.
    public private(set) var bytesIn: UInt64 = 0
    /// Compressed bytes written to the file so far.
    public private(set) var bytesOut: UInt64 = 0

    /// Creates `path`, readable by its owner only (a log holds full device
    /// tokens). An existing file is never overwritten: a log is a record.
    public init(path: String, level: Int32 = 6) throws(RecorderError) {
        self.path = path
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd < 0 {
            let e = errno
            throw RecorderError(path: path, message: e == EEXIST
                ? "exists: the recorder does not overwrite a log (choose another path, or move it away)"
                : "cannot create: \(String(cString: strerror(e)))")
        }
        self.fd = fd
        out = [UInt8](repeating: 0, count: 64 * 1024)
        let rc = herald_deflate_init_gzip(&stream, level)
        if rc != Z_OK {
            close(fd)
            throw RecorderError(path: path, message: "zlib deflateInit2 failed (\(rc))")
        }
    }

    deinit {
        if !closed {
            try? finish()
        }
    }

    /// Compresses `bytes`. With `flush`, everything so far reaches the file
    /// (a sync flush), so a crash later loses nothing written before.
    public func write(_ bytes: UnsafeRawBufferPointer, flush: Bool = false) throws(RecorderError) {
        precondition(!closed, "write after finish")
        bytesIn += UInt64(bytes.count)
        try pump(input: bytes, mode: flush ? Z_SYNC_FLUSH : Z_NO_FLUSH)
    }

    public func write(_ bytes: [UInt8], flush: Bool = false) throws(RecorderError) {
        let r: Result<Void, RecorderError> = bytes.withUnsafeBytes { raw in
            Result { () throws(RecorderError) in try write(raw, flush: flush) }
        }
        try r.get()
    }

    /// Ends the gzip stream (trailer with CRC and size) and closes the file.
    public func finish() throws(RecorderError) {
        guard !closed else { return }
        closed = true
        defer {
            deflateEnd(&stream)
            close(fd)
        }
        try pump(input: UnsafeRawBufferPointer(start: nil, count: 0), mode: Z_FINISH)
    }

    func pump(input: UnsafeRawBufferPointer, mode: Int32) throws(RecorderError) {
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        while true {
            let (rc, produced): (Int32, Int) = out.withUnsafeMutableBytes { o in
                stream.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(o.count)
                let rc = deflate(&stream, mode)
                return (rc, o.count - Int(stream.avail_out))
            }
            if rc == Z_STREAM_ERROR { throw RecorderError(path: path, message: "zlib deflate failed") }
            if produced > 0 { try writeOutput(produced) }
            if mode == Z_FINISH {
                if rc == Z_STREAM_END { return }
                continue
            }
            // Done when zlib consumed all input and had room to spare.
            if stream.avail_in == 0 && stream.avail_out != 0 { return }
        }
    }

    func writeOutput(_ count: Int) throws(RecorderError) {
        do throws(IOError) {
            try writeAll(fd, out, count: count, to: path)
        } catch {
            throw RecorderError(path: path, message: "write failed: \(String(cString: strerror(error.code)))")
        }
        bytesOut += UInt64(count)
    }
}

/// Reads a gzip file back, streaming: decompressed bytes come out in chunks.
/// Corrupt or truncated input is an error naming the file and the compressed offset.
public final class GzipFileReader {
    public let path: String
    var stream = z_stream()
    let fd: Int32
    var input: [UInt8]
    var output: [UInt8]
    var inputStart = 0
    var inputEnd = 0
    var eof = false
    var finished = false
    var consumed: UInt64 = 0

    public init(path: String) throws(RecorderError) {
        self.path = path
        let fd = open(path, O_RDONLY)
        if fd < 0 { throw RecorderError(path: path, message: "cannot open: \(String(cString: strerror(errno)))") }
        self.fd = fd
        input = [UInt8](repeating: 0, count: 64 * 1024)
        output = [UInt8](repeating: 0, count: 64 * 1024)
        if herald_inflate_init_gzip(&stream) != Z_OK {
            close(fd)
            throw RecorderError(path: path, message: "zlib inflateInit2 failed")
        }
    }

    deinit {
        inflateEnd(&stream)
        close(fd)
    }

    /// The next chunk of decompressed bytes, or `nil` at the end of the stream.
    /// Concatenated gzip members (as `cat a.gz b.gz` makes) are read as one stream.
    public func nextChunk() throws(RecorderError) -> [UInt8]? {
        while true {
            if inputStart == inputEnd && !eof {
                let n = input.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw RecorderError(path: path, message: "read failed: \(String(cString: strerror(errno)))")
                }
                inputStart = 0
                inputEnd = n
                if n == 0 { eof = true }
            }
            if finished {
                // Another member follows, or the end.
                if inputStart == inputEnd && eof { return nil }
                inflateReset(&stream)
                finished = false
            }
            if inputStart == inputEnd && eof {
                throw RecorderError(path: path, message: "truncated gzip stream at byte \(consumed) (the file ends inside a compressed member)")
            }
            let available = inputEnd - inputStart
            let (rc, produced, used): (Int32, Int, Int) = input.withUnsafeMutableBytes { i in
                output.withUnsafeMutableBytes { o in
                    stream.next_in = i.baseAddress!.assumingMemoryBound(to: Bytef.self) + inputStart
                    stream.avail_in = uInt(available)
                    stream.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(o.count)
                    let rc = inflate(&stream, Z_NO_FLUSH)
                    return (rc, o.count - Int(stream.avail_out), available - Int(stream.avail_in))
                }
            }
            inputStart += used
            consumed += UInt64(used)
            switch rc {
            case Z_OK, Z_BUF_ERROR: break
            case Z_STREAM_END: finished = true
            default:
                let detail = stream.msg.map { String(cString: $0) } ?? "error \(rc)"
                throw RecorderError(path: path, message: "corrupt gzip data near byte \(consumed): \(detail)")
            }
            if produced > 0 { return Array(output[0..<produced]) }
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
    public var description: String { "\(path): \(message)" }
}

