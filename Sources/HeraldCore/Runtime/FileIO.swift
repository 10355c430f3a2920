#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole (small) file, refusing files over `limit` bytes.
package func readSmallFile(_ path: String, limit: Int = 16 << 20) throws(IOError) -> [UInt8] {
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

/// Writes all of `bytes` to `fd`, retrying short writes and interrupted
/// calls; a failure names `name` (the file, or "standard output").
package func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, to name: @autoclosure () -> String) throws(IOError) {
    var off = 0
    while off < bytes.count {
        let n = write(fd, bytes.baseAddress! + off, bytes.count - off)
        if n < 0 {
            if errno == EINTR { continue }
            throw IOError(path: name(), errno: errno)
        }
        off += n
    }
}

/// Writes the first `count` bytes of `bytes` (all of them by default) to `fd`.
package func writeAll(_ fd: Int32, _ bytes: [UInt8], count: Int? = nil, to name: @autoclosure () -> String) throws(IOError) {
    var failure: IOError?
    bytes.withUnsafeBytes { raw in
        do throws(IOError) { try writeAll(fd, UnsafeRawBufferPointer(rebasing: raw[0..<(count ?? raw.count)]), to: name()) } catch { failure = error }
    }
    if let failure { throw failure }
}

/// Writes all of `buffer` to `fd` and empties it (keeping its capacity), even when the write fails.
package func writeAll(_ fd: Int32, _ buffer: inout [UInt8], to name: @autoclosure () -> String) throws(IOError) {
    defer { buffer.removeAll(keepingCapacity: true) }
    try writeAll(fd, buffer, to: name())
}

/// A warning for a file holding a secret (`what`: "the API's bearer tokens", "the .p8
/// signing key"…) that others can read, naming the file and its mode; `nil` when only
/// its owner can (or it cannot be looked at: reading it reports that).
package func secretFileWarning(_ path: String, holds what: String) -> String? {
    var info = stat()
    guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
    let mode = String(info.st_mode & 0o777, radix: 8)
    return "\(path) holds \(what) and others can read it (mode 0\(mode)): chmod 600 \(path)"
}

/// Writes `herald: warning: <text>` to standard error, for what a start must not pass over
/// in silence though it can go on (a secret others can read, an API open beyond loopback).
package func warnAtStart(_ text: String) {
    writeToStandardError("herald: warning: \(text)\n")
}

/// Writes `text` to standard error: the one place Herald does. A failure
/// here cannot be reported anywhere, so it is the only write whose result is
/// deliberately not acted upon.
package func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { buf in try? writeAll(2, UnsafeRawBufferPointer(buf), to: "standard error") }
}
