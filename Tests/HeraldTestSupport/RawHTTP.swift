import Foundation
#if canImport(Glibc)
import Glibc
private let rawStreamSocket = Int32(SOCK_STREAM.rawValue)
#else
import Darwin
private let rawStreamSocket = SOCK_STREAM
#endif

/// What a server sent back on a raw connection: everything read until it closed
/// (or until `timeout` passed, then `timedOut`), and how long that took.
public struct RawExchange: Sendable {
    public let text: String
    public let timedOut: Bool
    public let seconds: Double
    /// The status code of the first answer, or nil.
    public var status: Int? {
        guard text.hasPrefix("HTTP/1."), text.count >= 12 else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }
    /// The body of the first answer (after the blank line), when the server closed after it.
    public var body: String { text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n") }
}

/// Connects to 127.0.0.1:`port`, writes `request` byte for byte (no client
/// library in between: what a test sends is exactly what the server reads),
/// optionally pauses `pause` seconds and writes `then`, and reads until the
/// server closes or `timeout` passes. With `trickle`, `request` goes one byte
/// every `trickle` seconds (a slowloris client), until the server answers.
public func rawHTTP(port: Int, _ request: String, then: String? = nil, pause: Double = 0, trickle: Double = 0, timeout: Double = 5) async throws -> RawExchange {
    try await offPool {
        try rawHTTPBlocking(port: port, Array(request.utf8), then: then.map { Array($0.utf8) }, pause: pause, trickle: trickle, timeout: timeout)
    }
}

public func rawHTTPBlocking(
    port: Int, _ request: [UInt8], then: [UInt8]? = nil, pause: Double = 0, trickle: Double = 0, timeout: Double = 5
) throws -> RawExchange {
    let fd = socket(AF_INET, rawStreamSocket, 0)
    guard fd >= 0 else { throw ExternalServerError(message: "socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else { throw ExternalServerError(message: "connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
    let start = Date()
    func sendAll(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }  // the server closed early: what it said is read below
            sent += n
        }
    }
    if trickle > 0 {
        for byte in request {
            sendAll([byte])
            // Stop once the server has something to say (or closed).
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32(trickle * 1000)) > 0 { break }
        }
    } else {
        sendAll(request)
    }
    if let then {
        if pause > 0 { usleep(useconds_t(pause * 1_000_000)) }
        sendAll(then)
    }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var timedOut = false
    while true {
        let left = timeout - Date().timeIntervalSince(start)
        if left <= 0 { timedOut = true; break }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&p, 1, Int32(max(1, left * 1000)))
        if ready == 0 { timedOut = true; break }
        if ready < 0 { if errno == EINTR { continue }; break }
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        received += buffer[0..<n]
    }
    return RawExchange(text: String(decoding: received, as: UTF8.self), timedOut: timedOut, seconds: Date().timeIntervalSince(start))
}
