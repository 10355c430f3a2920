#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole (small) file, refusing files over `limit` bytes.
public func readSmallFile(_ path: String, limit: Int = 16 << 20) throws(IOError) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    if fd < 0 { throw IOError(path: path, errno: errno) }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw IOError(path: path, errno: errno)
        }
        if n == 0 { return out }
        out.append(contentsOf: chunk[0..<n])
        if out.count > limit { throw IOError(path: path, errno: EFBIG) }
    }
}

/// Writes all of `bytes` to `fd`, retrying short writes and interrupted calls.
/// - Returns: 0, or the `errno` of the write that failed.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
    var off = 0
    while off < bytes.count {
        let n = write(fd, bytes.baseAddress! + off, bytes.count - off)
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        off += n
    }
    return 0
}

/// Writes all of `buffer` to `fd` and empties it (keeping its capacity).
/// - Returns: 0, or the `errno` of the write that failed.
@discardableResult
public func writeAll(_ fd: Int32, _ buffer: inout [UInt8]) -> Int32 {
    let result = buffer.withUnsafeBytes { writeAll(fd, $0) }
    buffer.removeAll(keepingCapacity: true)
    return result
}
