import Foundation

/// Polls `condition` for up to `seconds`.
public func waitUntil(seconds: Double = 5, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { struct Timeout: Error {}; throw Timeout() }
        try await Task.sleep(for: .milliseconds(10))
    }
}
