import Glibc
import NIOCore

/// The service could not listen: which address, and why, in words (NIO's own
/// text is `bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`).
public struct ListenError: Error, CustomStringConvertible {
    public let description: String

    /// `nil` when `error` is not a failure to bind.
    init?(_ error: any Error, host: String, port: Int) {
        let text = "\(error)"
        guard text.contains("bind(") else { return nil }
        // NIO's IOError, or its text where a service group passed it on wrapped.
        let code = (error as? NIOCore.IOError)?.errnoCode ?? [EADDRINUSE, EADDRNOTAVAIL, EACCES].first { text.contains("(errno: \($0))") }
        switch code {
        case EADDRINUSE?:
            description = "cannot listen on \(host):\(port): the port is in use (another herald serve, or another program): stop it, or choose another port (--port or serve.port)"
        case EADDRNOTAVAIL?:
            description = "cannot listen on \(host):\(port): \(host) is not an address of this machine (serve.host)"
        case EACCES?:
            description = "cannot listen on \(host):\(port): permission denied (ports below 1024 need privileges)"
        default:
            description = "cannot listen on \(host):\(port): \(text)"
        }
    }
}
