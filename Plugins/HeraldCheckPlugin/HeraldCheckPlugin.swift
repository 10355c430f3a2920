import Foundation
import PackagePlugin

/// `swift package herald-check [--target NAME]… [--directory DIR]… [OPTIONS]`:
/// the worst-case payload size of each notification template
/// (`*.herald.jsonl`) in each language of the catalogs next to it, against
/// the limit (`herald-strings check`, `docs/plugins.md`). Without `--target`
/// or `--directory`, every target of the package that has templates.
///
/// OPTIONS go to the tool: `--limit http2|binary|voip|binary-legacy|BYTES`
/// (default http2, 4096 bytes), `--default-language LANG`, `--localize
/// server|client`, `--table NAME`. Fails when a template is over the limit or
/// cannot be built, naming its file and line.
@main
struct HeraldCheckPlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        let targetNames = extractor.extractOption(named: "target")
        let directories = extractor.extractOption(named: "directory")
        let options = extractor.remainingArguments
        var groups: [(name: String, files: [URL])] = []
        if targetNames.isEmpty && directories.isEmpty {
            for target in context.package.targets {
                groups.append((target.name, files(of: target)))
            }
            groups.removeAll { !$0.files.contains(where: isTemplate) }
            if groups.isEmpty { Diagnostics.warning("herald-check: no target has notification templates (*.herald.jsonl)") }
        } else {
            for target in try context.package.targets(named: targetNames) { groups.append((target.name, files(of: target))) }
            for directory in directories {
                let url = URL(fileURLWithPath: directory, relativeTo: context.package.directoryURL)
                groups.append((directory, try files(under: url)))
            }
        }
        let tool = try context.tool(named: "herald-strings").url
        var failed: [String] = []
        for group in groups {
            let process = Process()
            process.executableURL = tool
            process.arguments = ["check"] + options + group.files.map(\.path)
            try process.run()
            process.waitUntilExit()
            if process.terminationStatus != 0 { failed.append(group.name) }
        }
        if !failed.isEmpty {
            Diagnostics.error("herald-check: \(failed.joined(separator: ", ")): templates over the limit, or that cannot be built")
        }
    }

    func files(of target: any Target) -> [URL] {
        (target.sourceModule?.sourceFiles.map(\.url) ?? []).filter(isInput).sorted { $0.path < $1.path }
    }

    func files(under directory: URL) throws -> [URL] {
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
            throw PluginError("cannot read \(directory.path)")
        }
        return walk.compactMap { $0 as? URL }.filter(isInput).sorted { $0.path < $1.path }
    }

    func isTemplate(_ url: URL) -> Bool { url.lastPathComponent.hasSuffix(".herald.jsonl") }
    func isInput(_ url: URL) -> Bool { isTemplate(url) || ["strings", "stringsdict", "xcstrings"].contains(url.pathExtension) }
}

struct PluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
