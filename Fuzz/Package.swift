// swift-tools-version: 6.1
// libFuzzer targets for the binary interface decoders and the simulated gateway.
// Build and run with ./run.sh (see docs/protocol.md, "Fuzzing").
import PackageDescription

let fuzzSettings: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"]), .swiftLanguageMode(.v6)]

let package = Package(
    name: "HeraldFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Herald", path: "..")],
    targets: [
        .target(
            name: "FuzzSupport", dependencies: [.product(name: "HeraldBinary", package: "Herald")],
            path: "Sources/FuzzSupport", swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(
            name: "FuzzNotificationDecoder", dependencies: ["FuzzSupport", .product(name: "HeraldBinary", package: "Herald")],
            path: "Sources/FuzzNotificationDecoder", swiftSettings: fuzzSettings),
        .executableTarget(
            name: "FuzzErrorResponseDecoder", dependencies: ["FuzzSupport", .product(name: "HeraldBinary", package: "Herald")],
            path: "Sources/FuzzErrorResponseDecoder", swiftSettings: fuzzSettings),
        .executableTarget(
            name: "FuzzFeedbackDecoder", dependencies: ["FuzzSupport", .product(name: "HeraldBinary", package: "Herald")],
            path: "Sources/FuzzFeedbackDecoder", swiftSettings: fuzzSettings),
        .executableTarget(
            name: "FuzzGateway",
            dependencies: [.product(name: "HeraldBinary", package: "Herald"), .product(name: "HeraldSimulator", package: "Herald")],
            path: "Sources/FuzzGateway", swiftSettings: fuzzSettings),
    ]
)
