import Foundation
import PackagePlugin

/// `swift package herald-bench [NAME…] [-- ARGS…]`: builds `herald` in release
/// mode and runs `herald bench NAME` for each benchmark named (all of them by
/// default), printing each one's JSON result on its own line.
@main
struct HeraldBenchPlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var names: [String] = []
        var extra: [String] = []
        var afterDashes = false
        for a in arguments {
            if a == "--" { afterDashes = true } else if afterDashes { extra.append(a) } else { names.append(a) }
        }
        let result = try packageManager.build(.product("herald"), parameters: .init(configuration: .release, logging: .concise))
        guard result.succeeded, let herald = result.builtArtifacts.first(where: { $0.kind == .executable }) else {
            Diagnostics.error("building herald in release mode failed:\n\(result.logText)")
            return
        }
        if names.isEmpty { names = try listBenchmarks(herald.url) }
        for name in names {
            let process = Process()
            process.executableURL = herald.url
            process.arguments = ["bench", name] + extra
            try process.run()
            process.waitUntilExit()
            if process.terminationStatus != 0 {
                Diagnostics.error("herald bench \(name) exited with status \(process.terminationStatus)")
            }
        }
    }

    /// The benchmarks' names, as `herald bench list` prints them (one per line).
    func listBenchmarks(_ herald: URL) throws -> [String] {
        let process = Process()
        let pipe = Pipe()
        process.executableURL = herald
        process.arguments = ["bench", "list"]
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}
