import Foundation
import HeraldClient
import HeraldTesting
import Testing

/// README's `HeraldClient` example, as written: the lines between the
/// markers are the README block's, compiled here (the test checks they are
/// the same text).
func readmeExample(hex: String, forgetDevice: (String) -> Void) async throws {
    // README example begins
    let client = try HeraldClient(configuration: .load(path: "herald.json"))
    // run it in the app's ServiceGroup: ServiceGroup(services: [client, app], …)
    let outcome = try await client.send(.alert(to: try DeviceToken(hex: hex), body: "Your order shipped"))
    if outcome.isTokenDead { forgetDevice(hex) }
    print(outcome)   // accepted, or rejected(410: Unregistered)…
    // README example ends
}

@Suite("README's HeraldClient example, and SimulatedAPNs for an app's tests")
struct ReadmeExampleTests {
    @Test("the README's example is the code compiled here, as written")
    func readmeMatches() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let marker = "<!-- readme-client-example -->\n```swift\n"
        let start = try #require(readme.range(of: marker)).upperBound
        let block = String(readme[start..<(try #require(readme.range(of: "\n```", range: start..<readme.endIndex))).lowerBound])
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let from = try #require(source.range(of: "// README example begins\n")).upperBound
        let to = try #require(source.range(of: "    // README example ends")).lowerBound
        let compiled = source[from..<to].split(separator: "\n").map { $0.dropFirst(4) }.joined(separator: "\n")
        #expect(compiled == block)
    }

    @Test("SimulatedAPNs: an app's test sends through its HeraldClient and asserts on what APNs received; a token marked unregistered comes back dead, then suppressed")
    func simulatedAPNs() async throws {
        let apns = try SimulatedAPNs(bundleID: "com.example.shop")
        let dead = try DeviceToken(hex: String(repeating: "de", count: 32))
        apns.markUnregistered(dead)
        let (first, second, third) = try await apns.run { client in
            (try await client.send(.alert(to: token(1), title: "Order", body: "Your order shipped")),
             try await client.send(.alert(to: dead, body: "Anyone there?")),
             try await client.send(.alert(to: dead, body: "Still there?")))
        }
        #expect(first.isAccepted && !first.isTokenDead)
        #expect(second.isTokenDead && second.status?.rawValue == 410, "\(second)")
        #expect(third.kind == .suppressed && third.isTokenDead)
        let sent = apns.sent
        #expect(sent.count == 1)
        #expect(sent.first?.token == token(1).hex && sent.first?.topic == "com.example.shop" && sent.first?.pushType == "alert")
        #expect(sent.first?.json?.objectValue?["aps"]?.objectValue?["alert"]?.objectValue?["body"] == "Your order shipped")
    }
}
