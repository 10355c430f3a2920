#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file descriptor line by line in fixed-size chunks: memory stays
/// bounded whatever the file's size. Lines longer than `maximumLineLength`
/// are reported as too long and skipped, not buffered.
public struct LineReader: ~Copyable {
    public enum Line {
        /// A line (without its `\n` or `\r\n`), valid until the next call.
        case line(number: Int, bytes: UnsafeRawBufferPointer)
        /// A line over the maximum length, skipped.
        case tooLong(number: Int)
        /// No complete line yet and no data waiting on the pipe (only from ``nextIfReady()``).
        case notReady
    }

    let fd: Int32
    let ownsDescriptor: Bool
    public let maximumLineLength: Int
    var buffer: UnsafeMutableRawBufferPointer
    var start = 0
    var end = 0
    var eof = false
    var lineNumber = 0
    var skipping = false
    var bytesRead = 0
    /// Whether the descriptor is a pipe, socket or terminal (reads may wait for data).
    public let mayBlock: Bool
    /// The input's size when it is a regular file.
    public let size: Int?

    /// Opens `path`, or standard input for `-`.
    public init(path: String, maximumLineLength: Int = 1 << 20) throws(IOError) {
        if path == "-" {
            self.init(fd: 0, ownsDescriptor: false, maximumLineLength: maximumLineLength)
        } else {
            let fd = open(path, O_RDONLY)
            if fd < 0 { throw IOError(path: path, errno: errno) }
            var st = stat()
            if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
                close(fd)
                throw IOError(path: path, errno: EISDIR)
            }
            self.init(fd: fd, ownsDescriptor: true, maximumLineLength: maximumLineLength)
        }
    }

    /// The size of the regular file at `path`; `nil` for `-`, anything else, or a path that cannot be read.
    package static func regularFileSize(atPath path: String) -> Int? {
        var st = stat()
        guard path != "-", stat(path, &st) == 0 else { return nil }
        return regularFileSize(st)
    }

    /// The size `st` gives when it describes a regular file; `nil` otherwise.
    static func regularFileSize(_ st: stat) -> Int? {
        (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil
    }

    public init(fd: Int32, ownsDescriptor: Bool, maximumLineLength: Int = 1 << 20) {
        self.fd = fd
        self.ownsDescriptor = ownsDescriptor
        self.maximumLineLength = maximumLineLength
        buffer = .allocate(byteCount: max(65536, maximumLineLength + 1), alignment: 1)
        var st = stat()
        let known = fstat(fd, &st) == 0
        mayBlock = known && (st.st_mode & S_IFMT) != S_IFREG
        size = known ? Self.regularFileSize(st) : nil
    }

    deinit {
        buffer.deallocate()
        if ownsDescriptor { close(fd) }
    }

    /// The next line, or `nil` at the end of the input. May block on a pipe.
    public mutating func next() throws(IOError) -> Line? {
        try next(blocking: true)
    }

    /// Like ``next()``, but returns `.notReady` instead of blocking when the
    /// input is a pipe with no data waiting: the caller can flush, check for
    /// shutdown and wait without holding a thread.
    public mutating func nextIfReady() throws(IOError) -> Line? {
        try next(blocking: false)
    }

    mutating func next(blocking: Bool) throws(IOError) -> Line? {
        while true {
            if let nl = findNewline() {
                lineNumber += 1
                let lineStart = start
                start = nl + 1
                if skipping {
                    skipping = false
                    return .tooLong(number: lineNumber)
                }
                var lineEnd = nl
                if lineEnd > lineStart && buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                return .line(number: lineNumber, bytes: UnsafeRawBufferPointer(rebasing: buffer[lineStart..<lineEnd]))
            }
            if eof {
                if start < end || skipping {
                    lineNumber += 1
                    let s = start
                    start = end
                    if skipping { skipping = false; return .tooLong(number: lineNumber) }
                    return .line(number: lineNumber, bytes: UnsafeRawBufferPointer(rebasing: buffer[s..<end]))
                }
                return nil
            }
            if !blocking && mayBlock && !readable() { return .notReady }
            try fill()
        }
    }

    /// Whether a read would return at once.
    func readable() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) != 0
    }

    func findNewline() -> Int? {
        guard start < end else { return nil }
        // memchr: the byte-at-a-time `firstIndex(of:)` was 4% of herald send.
        guard let hit = memchr(buffer.baseAddress! + start, Int32(UInt8(ascii: "\n")), end - start) else { return nil }
        return UnsafeRawPointer(hit) - UnsafeRawPointer(buffer.baseAddress!)
    }

    mutating func fill() throws(IOError) {
        if end - start > maximumLineLength {
            // The current line is too long: forget what we have of it.
            skipping = true
            start = 0
            end = 0
        } else if start > 0 {
            let n = end - start
            if n > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: n) }
            start = 0
            end = n
        }
        let room = buffer.count - end
        let n = read(fd, buffer.baseAddress! + end, room)
        if n < 0 {
            if errno == EINTR { return }
            throw IOError(path: fd == 0 ? "standard input" : "fd \(fd)", errno: errno)
        }
        if n == 0 { eof = true }
        end += n
        bytesRead += n
    }

    /// Bytes of input handed out as lines so far (for progress).
    public var bytesConsumed: Int { bytesRead - (end - start) }
}

/// A file could not be read or written.
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    public let path: String
    public let code: Int32
    public init(path: String, errno: Int32) {
        self.path = path
        self.code = errno
    }
    public var description: String { "\(path): \(String(cString: strerror(code)))" }
}


/// Calls `body` with each line of `bytes` already in memory (a request body, a
/// decompressed log member): its 1-based number and its bytes, without the
/// `\n` or a `\r` before it. A last line without `\n` counts.
package func forEachLine(in bytes: UnsafeRawBufferPointer, _ body: (Int, UnsafeRawBufferPointer) -> Void) {
    var start = 0, number = 0
    while start < bytes.count {
        let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
        number += 1
        var line = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        body(number, line)
        start = end + 1
    }
}
