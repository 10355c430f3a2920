// swift-tools-version: 6.1
import PackageDescription

// A package using Herald's plugins (docs/plugins.md):
// - `swift build`: HeraldStringsPlugin turns Sources/GameNotifications/Localization
//   into typed keys (`Localizable.gamePlayRequestFormat(_:_:)`…) and fails on a bad catalog;
// - `swift package herald-check`: the worst-case payload size of each template in
//   Sources/GameNotifications/Notifications.herald.jsonl, per language, against 4096 bytes.
/// Herald's checkout: this repository, or `HERALD_PATH` (Herald's tests build a
/// copy of this package in a temporary folder). SwiftPM names a package that is
/// used by path after its folder, which `herald` is named after.
let heraldPath = Context.environment["HERALD_PATH"] ?? "../.."
let herald = (heraldPath.hasPrefix("/") ? heraldPath : Context.packageDirectory + "/" + heraldPath)
    .split(separator: "/").reduce(into: [String]()) { path, part in
        if part == ".." { path.removeLast() } else if part != "." { path.append(String(part)) }
    }.last!

let package = Package(
    name: "PluginSample",
    defaultLocalization: "en",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: heraldPath)
    ],
    targets: [
        .target(
            name: "GameNotifications",
            dependencies: [
                .product(name: "HeraldCore", package: herald),
                .product(name: "HeraldLocalization", package: herald),
            ],
            plugins: [.plugin(name: "HeraldStringsPlugin", package: herald)]
        )
    ]
)
