import Foundation
import HeraldTestSupport
import Testing

/// `examples/PluginSample`, a package using both plugins, copied to a
/// temporary folder and built there with its own scratch path: broken (a bad
/// specifier, a missing translation, an oversized template) it must fail
/// naming the file and line; fixed, it must build and pass `herald-check`.
///
/// Slow: a nested SwiftPM build of the few modules the plugins need (about a
/// minute on 2 cores alone, most of it the first build; about 5 at the lowest priority beside
/// the crash matrix in `.ci/run`). `HERALD_PLUGIN_SAMPLE=0` skips it.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["HERALD_PLUGIN_SAMPLE"] != "0", "HERALD_PLUGIN_SAMPLE=0"))
struct PluginSampleTests {
    @Test(.timeLimit(.minutes(20)))
    func brokenSampleFailsAtTheFileAndLineAndFixedSampleBuilds() async throws {
        let sample = try PluginSample()
        let fr = "Sources/GameNotifications/Localization/fr.lproj/Localizable.strings"
        let templates = "Sources/GameNotifications/Notifications.herald.jsonl"

        try await sample.expect("the sample as shipped builds", ["build"], status: 0, output: "Build complete!")

        try sample.edit(fr) { $0.replacingOccurrences(of: "%@ et %@", with: "%@ et %y") }
        try await sample.expect(
            "a bad specifier fails the build", ["build"], status: nil,
            output: "/\(fr):7: error: \"GAME_PLAY_REQUEST_FORMAT\" in fr: \"%y\": unsupported conversion")
        try sample.restore(fr)

        try sample.edit(fr) { $0.replacingOccurrences(of: "\"INVITE_TITLE\" = \"Invitation\";", with: "") }
        try await sample.expect(
            "a missing translation fails the build", ["build"], status: nil,
            output: "/Localization/en.lproj/Localizable.strings:4: error: \"INVITE_TITLE\" has no fr translation")
        try sample.restore(fr)

        try await sample.expect("the fixed sample builds", ["build"], status: 0, output: "Build complete!")

        try await sample.expect("herald-check passes", ["package", "herald-check"], status: 0, output: "0 over the limit, 0 errors")
        try await sample.expect(
            "herald-check --limit fails a limit under the worst case", ["package", "herald-check", "--limit", "400"], status: nil,
            output: "/\(templates):1: error: template \"game-invite\" in en is 472 bytes at worst, 72 over the custom limit of 400")

        try sample.edit(templates) { $0.replacingOccurrences(of: "[40,40]", with: "[40,2000]") }
        try await sample.expect(
            "an oversized template fails herald-check", ["package", "herald-check", "--target", "GameNotifications"], status: nil,
            output: "/\(templates):1: error: template \"game-invite\" in fr is 8310 bytes at worst, 4214 over the http2 limit of 4096")
        try sample.restore(templates)

        try await sample.expect("herald-check passes again", ["package", "herald-check"], status: 0, output: "4 sizes measured, 0 over the limit")
    }
}

/// A copy of `examples/PluginSample` in a temporary folder, removed with the value.
final class PluginSample {
    let original = repositoryRoot().appendingPathComponent("examples/PluginSample")
    let folder: URL
    let package: URL
    let scratch: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("herald-plugin-sample-\(UUID().uuidString)")
        package = folder.appendingPathComponent("PluginSample")
        scratch = folder.appendingPathComponent("scratch")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: original, to: package)
        try? FileManager.default.removeItem(at: package.appendingPathComponent(".build"))
    }

    deinit { try? FileManager.default.removeItem(at: folder) }

    func edit(_ relative: String, _ change: (String) -> String) throws {
        let url = package.appendingPathComponent(relative)
        let text = try String(contentsOf: url, encoding: .utf8)
        let changed = change(text)
        precondition(changed != text, "the edit of \(relative) changed nothing")
        try changed.write(to: url, atomically: true, encoding: .utf8)
    }

    func restore(_ relative: String) throws {
        let url = package.appendingPathComponent(relative)
        try FileManager.default.removeItem(at: url)
        try FileManager.default.copyItem(at: original.appendingPathComponent(relative), to: url)
    }

    /// Runs `swift ARGUMENTS` on the copy (against this checkout of Herald) and
    /// expects its exit status (`nil`: any failure) and a line of its output.
    func expect(_ what: String, _ arguments: [String], status: Int32?, output: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let command = [arguments[0], "--package-path", package.path, "--scratch-path", scratch.path] + arguments.dropFirst()
        let start = ContinuousClock.now
        let r = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["HERALD_PATH=\(repositoryRoot().path)", "swift"] + command)
        print("PluginSample: \(what): swift \(arguments.joined(separator: " ")) exited \(r.status) after \(ContinuousClock.now - start)")
        let text = r.stdout + r.stderr
        if let status {
            #expect(r.status == status, "\(what)\n\(text)", sourceLocation: sourceLocation)
        } else {
            #expect(r.status != 0, "\(what)\n\(text)", sourceLocation: sourceLocation)
        }
        #expect(text.contains(output), "\(what): no \"\(output)\" in\n\(text)", sourceLocation: sourceLocation)
    }
}
