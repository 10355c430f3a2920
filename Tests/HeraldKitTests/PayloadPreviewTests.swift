import Foundation
import HeraldCore
import HeraldJSON
import HeraldKit
import HeraldPayload
import Testing

@Suite("herald payload: the configured stages, one line per request")
struct PayloadPreviewTests {
    static let token = String(repeating: "ab", count: 32)

    func configuration(_ json: String) throws -> HeraldConfiguration {
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: "test", key: "", message: "not an object") }
        return try HeraldConfiguration.parse(ConfigNode(file: "test.json", object: o))
    }

    func run(_ lines: [String], _ configuration: HeraldConfiguration) async throws -> [String] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("herald-payload-\(UUID().uuidString).jsonl").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var out: [String] = []
        try await PayloadPreview(assembly: HeraldAssembly(configuration: configuration), batchSize: 2).run(path: path) {
            out.append(String(decoding: $0.line, as: UTF8.self))
        }
        return out
    }

    @Test("payloads and outcomes in input order; blank lines skipped; bad lines named")
    func order() async throws {
        let t = Self.token
        let out = try await run([
            #"{"token":"\#(t)","alert":"Message received from Bob","custom":{"acme2":["bang","whiz"]}}"#,
            "",
            #"{"token":"\#(t)","id":7,"badge":-1}"#,
            "not json",
            #"{"token":"\#(t)","payload":{"aps":{"content-available":1}}}"#,
            #"{"token":"\#(t)","content-available":1,"priority":10}"#,
        ], HeraldConfiguration())
        #expect(out.count == 5)
        #expect(out[0] == #"{"aps":{"alert":"Message received from Bob"},"acme2":["bang","whiz"]}"#)
        #expect(out[1].hasPrefix(#"{"id":7,"line":3,"token":"\#(t)","outcome":"dropped","reason":"\"aps.badge\" must be 0 or more"#))
        #expect(out[2].hasPrefix(#"{"line":4,"outcome":"dropped","reason":"line 4: invalid JSON"#))
        #expect(out[3] == #"{"aps":{"content-available":1}}"#)
        #expect(out[4].contains("cannot have priority 10"))
    }

    @Test("payload.policy truncate with payload.limit: shortened to fit; reject: dropped")
    func policies() async throws {
        let body = String(repeating: "Hello 👩‍👩‍👧‍👦 \"world\" ", count: 20)
        let line = #"{"token":"\#(Self.token)","alert":{"title":"T","body":"\#(body.replacingOccurrences(of: "\"", with: "\\\""))"}}"#
        let truncated = try await run([line], configuration(#"{"payload":{"limit":200,"policy":"truncate"}}"#))
        #expect(truncated[0].utf8.count <= 200)
        let parsed = try JSONParser.parse(truncated[0])
        let shortened = try #require(parsed.objectValue?["aps"]?.objectValue?["alert"]?.objectValue?["body"]?.stringValue)
        #expect(shortened.hasSuffix("…") && body.hasPrefix(String(shortened.dropLast())))

        let rejected = try await run([line], configuration(#"{"payload":{"profile":"binary-legacy"}}"#))
        #expect(rejected[0].contains(#""outcome":"dropped","reason":"payload is "#) && rejected[0].contains("over the limit of 256"))

        // Title too, when configured: the body goes to "…" first.
        let both = try await run([#"{"token":"\#(Self.token)","alert":{"title":"\#(String(repeating: "t", count: 300))","body":"\#(String(repeating: "b", count: 300))"}}"#],
            configuration(#"{"payload":{"limit":256,"policy":"truncate","truncateFields":["body","title"]}}"#))
        #expect(both[0].utf8.count == 256)
        #expect(both[0].contains(#""body":"…""#))
    }

    @Test("configuration errors name the key")
    func configErrors() throws {
        #expect(throws: ConfigError.self) { try configuration(#"{"payload":{"truncateFields":["footer"]}}"#) }
        #expect(throws: ConfigError.self) { try configuration(#"{"payload":{"truncateFields":[]}}"#) }
        #expect(throws: ConfigError.self) { try configuration(#"{"payload":{"policy":"squeeze"}}"#) }
        #expect(throws: ConfigError.self) { try configuration(#"{"payload":{"profile":"huge"}}"#) }
        do {
            _ = try configuration(#"{"payload":{"truncateFields":["body","footer"]}}"#)
            Issue.record("an unknown field was accepted")
        } catch {
            #expect("\(error)".contains("truncateFields") && "\(error)".contains("footer"))
        }
    }
}
