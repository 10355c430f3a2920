import Foundation

/// The repository's root directory (where Package.swift is).
public func repositoryRoot() -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// The `herald` executable built next to the tests (`swift test` builds it).
public func heraldExecutable() throws -> URL {
    let root = repositoryRoot()
    for candidate in [".build/debug/herald", ".build/release/herald"] {
        let url = root.appendingPathComponent(candidate)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw HeraldExecutableMissing(root: root.path)
}

/// The tests could not find a built `herald`.
public struct HeraldExecutableMissing: Error, CustomStringConvertible {
    public let root: String
    public var description: String { "no herald executable under \(root)/.build; run `swift build` first" }
}
