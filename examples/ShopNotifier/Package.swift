// swift-tools-version: 6.1
import PackageDescription

// An app that sends a push per request through HeraldClient (docs/client.md):
// a Hummingbird 2 service whose `POST /orders/{id}/shipped` tells the buyer's
// device, and answers with what became of the notification.
//
/// Herald's checkout: this repository, or `HERALD_PATH` (Herald's tests build a
/// copy of this package in a temporary folder). SwiftPM names a package that is
/// used by path after its folder, which `herald` is named after.
let heraldPath = Context.environment["HERALD_PATH"] ?? "../.."
let herald = (heraldPath.hasPrefix("/") ? heraldPath : Context.packageDirectory + "/" + heraldPath)
    .split(separator: "/").reduce(into: [String]()) { path, part in
        if part == ".." { path.removeLast() } else if part != "." { path.append(String(part)) }
    }.last!

let package = Package(
    name: "ShopNotifier",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: heraldPath),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "ShopNotifier",
            dependencies: [
                .product(name: "HeraldClient", package: herald),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        )
    ]
)
