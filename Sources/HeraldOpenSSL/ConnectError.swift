import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed TCP connection in words a person reads: "connection refused
/// (nothing listens on that port)", "the host name could not be resolved",
/// instead of NIO's `…SingleConnectionFailure(target: [IPv4]…, error:
/// connection reset (error set): Connection refused) (errno: 111)))`. Used by
/// both transports' drivers (one place for the wording).
package func describeConnectError(_ error: any Error) -> String {
    if let e = error as? NIOConnectionError {
        if let first = e.connectionErrors.first { return describeConnectError(first.error) }
        if e.dnsAError != nil || e.dnsAAAAError != nil { return "the host name \(e.host) could not be resolved" }
        return "no address for \(e.host) to connect to"
    }
    if let io = error as? IOError {
        switch io.errnoCode {
        case ECONNREFUSED: return "connection refused (nothing listens on that port)"
        case ETIMEDOUT: return "the connection timed out"
        case EHOSTUNREACH, ENETUNREACH: return "no route to the host"
        case ECONNRESET: return "the connection was reset"
        default: return String(cString: strerror(io.errnoCode))
        }
    }
    if let c = error as? ChannelError, case .connectTimeout(let t) = c {
        return "no TCP connection within \(t.nanoseconds / 1_000_000) ms"
    }
    let text = "\(error)"
    if text.contains("resolution") || text.contains("NXDOMAIN") || text.contains("getaddrinfo") { return "the host name could not be resolved: \(text)" }
    return text
}
