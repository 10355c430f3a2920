/// What both delivery machines (the binary interface's and HTTP/2's) say to a
/// person when connection attempts fail, logged at warning by their drivers:
/// one wording for both transports.
package enum ConnectNotice {
    /// The first failed attempt of an outage: the error, and how long Herald goes on trying.
    package static func firstFailure(_ error: String, neverConnected: Bool, firstConnectAttempts: Int?, maxOutage: Duration) -> String {
        if neverConnected, let attempts = firstConnectAttempts {
            return "\(error); Herald gives up after \(attempts) attempts if it never connects"
        }
        return "\(error); Herald retries for up to \(Int(maxOutage.inSeconds)) s (maxOutageSeconds)"
    }

    /// Giving up on `target` before any connection was made (the `firstConnectAttempts` rule).
    package static func gaveUp(on target: String, attempts: Int) -> String {
        "gave up on \(target) after \(attempts) attempts with no connection ever made: what was waiting failed"
    }

    /// The connection that ends an outage.
    package static func connected(to target: String, afterFailures n: Int) -> String {
        "connected to \(target) after \(n) failed attempt\(n == 1 ? "" : "s")"
    }
}
