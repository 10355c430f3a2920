// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Herald",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HeraldCore", targets: ["HeraldCore"]),
        .library(name: "HeraldPayload", targets: ["HeraldPayload"]),
        .library(name: "HeraldLocalization", targets: ["HeraldLocalization"]),
        .library(name: "HeraldBinary", targets: ["HeraldBinary"]),
        .library(name: "HeraldSimulator", targets: ["HeraldSimulator"]),
        .library(name: "HeraldKit", targets: ["HeraldKit"]),
        .executable(name: "herald", targets: ["herald"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // The model, the JSON codec, the stage protocols, the actor runtime and the ledger.
        .target(name: "HeraldCore"),
        // Payload builder and size guard (issue 3).
        .target(name: "HeraldPayload", dependencies: ["HeraldCore"]),
        // String catalogs and the localizer (issue 4).
        .target(name: "HeraldLocalization", dependencies: ["HeraldCore"]),
        // Binary interface codecs: frames, error responses, feedback tuples (issue 5).
        .target(name: "HeraldBinary", dependencies: ["HeraldCore"]),
        // The in-memory APNs simulator and its transport (issue 5).
        .target(name: "HeraldSimulator", dependencies: ["HeraldCore", "HeraldBinary"]),
        // Assembles pipelines from configuration: the registry of built-in stages and transports.
        .target(
            name: "HeraldKit",
            dependencies: ["HeraldCore", "HeraldPayload", "HeraldLocalization", "HeraldBinary", "HeraldSimulator"]
        ),
        .executableTarget(
            name: "herald",
            dependencies: ["HeraldKit", "HeraldPayload", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(name: "HeraldCoreTests", dependencies: ["HeraldCore", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "HeraldPayloadTests", dependencies: ["HeraldPayload", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "HeraldLocalizationTests", dependencies: ["HeraldLocalization"]),
        .testTarget(name: "HeraldBinaryTests", dependencies: ["HeraldBinary", "HeraldSimulator"]),
        .testTarget(name: "HeraldKitTests", dependencies: ["HeraldKit"]),
    ]
)

// Strict settings for every target, in one place.
for target in package.targets where target.type != .system && target.type != .plugin {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
