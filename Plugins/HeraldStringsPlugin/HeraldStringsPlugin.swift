import Foundation
import PackagePlugin

/// Build-tool plugin: a target's `.strings` and `.stringsdict` (in `<language>.lproj` folders)
/// and `.xcstrings` files become `HeraldStrings.swift`, one enum per table
/// with a typed member per key (`herald-strings generate`, `docs/plugins.md`).
/// A bad specifier, a missing translation or arguments that differ between
/// languages fail the build with `path:line: error: …`. The target's
/// notification templates (`*.herald.jsonl`) are inputs too: their keys and
/// argument counts are checked against the catalogs.
///
/// ```swift
/// .target(name: "Notifications", dependencies: [.product(name: "HeraldLocalization", package: "Herald")],
///         plugins: [.plugin(name: "HeraldStringsPlugin", package: "Herald")])
/// ```
@main
struct HeraldStringsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        guard let module = target.sourceModule else { return [] }
        let inputs = module.sourceFiles.map(\.url).filter(HeraldFiles.isInput).sorted { $0.path < $1.path }
        guard inputs.contains(where: HeraldFiles.isCatalog) else { return [] }
        let output = context.pluginWorkDirectoryURL.appending(path: "HeraldStrings.swift")
        return [
            .buildCommand(
                displayName: "Generating HeraldStrings.swift for \(target.name) from \(inputs.count) files",
                executable: try context.tool(named: "herald-strings").url,
                arguments: ["generate", "--output", output.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}

/// The files the tool reads.
enum HeraldFiles {
    static func isCatalog(_ url: URL) -> Bool { ["strings", "stringsdict", "xcstrings"].contains(url.pathExtension) }
    static func isTemplate(_ url: URL) -> Bool { url.lastPathComponent.hasSuffix(".herald.jsonl") }
    static func isInput(_ url: URL) -> Bool { isCatalog(url) || isTemplate(url) }
}
