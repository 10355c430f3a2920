// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Herald",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HeraldJSON", targets: ["HeraldJSON"]),
        .library(name: "HeraldCore", targets: ["HeraldCore"]),
        .library(name: "HeraldPayload", targets: ["HeraldPayload"]),
        .library(name: "HeraldLocalization", targets: ["HeraldLocalization"]),
        .library(name: "HeraldBinary", targets: ["HeraldBinary"]),
        .library(name: "HeraldSimulator", targets: ["HeraldSimulator"]),
        .library(name: "HeraldRecorder", targets: ["HeraldRecorder"]),
        .library(name: "HeraldStore", targets: ["HeraldStore"]),
        .library(name: "HeraldOpenSSL", targets: ["HeraldOpenSSL"]),
        .library(name: "HeraldGateway", targets: ["HeraldGateway"]),
        .library(name: "HeraldHTTP2", targets: ["HeraldHTTP2"]),
        .library(name: "HeraldHTTP2Transport", targets: ["HeraldHTTP2Transport"]),
        .library(name: "HeraldTesting", targets: ["HeraldTesting"]),
        .library(name: "HeraldKit", targets: ["HeraldKit"]),
        .library(name: "HeraldClient", targets: ["HeraldClient"]),
        .library(name: "HeraldService", targets: ["HeraldService"]),
        .library(name: "HeraldPostgres", targets: ["HeraldPostgres"]),
        .executable(name: "herald", targets: ["herald"]),
        .plugin(name: "HeraldStringsPlugin", targets: ["HeraldStringsPlugin"]),
        .plugin(name: "HeraldCheckPlugin", targets: ["HeraldCheckPlugin"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Tracing (issue 31): the API every instrumented library shares, and its OTLP exporter. Only
        // the OTLP/HTTP trait: the default's gRPC exporter would build grpc-swift for nothing.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // JSON: one writer (growable or fixed-capacity output), one parser and validator, JSON Lines reports.
        .target(name: "HeraldJSON"),
        // The model, the stage protocols, the actor runtime and the ledger.
        .target(
            name: "HeraldCore",
            dependencies: [
                "HeraldJSON", .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // Payload builder and size guard (issue 3).
        .target(name: "HeraldPayload", dependencies: ["HeraldJSON", "HeraldCore"]),
        // String catalogs and the localizer (issue 4).
        // printf with one typed argument, for the formatter's numbers (no va_list of existentials).
        .target(name: "CHeraldFormat"),
        .target(name: "HeraldLocalization", dependencies: ["HeraldJSON", "HeraldCore", "CHeraldFormat"], exclude: ["CLDR/generate.py"]),
        // Binary interface codecs: frames, error responses, feedback tuples (issue 5).
        .target(name: "HeraldBinary", dependencies: ["HeraldCore", .product(name: "DequeModule", package: "swift-collections")]),
        // The in-memory APNs simulator and its transport (issue 5).
        .target(
            name: "HeraldSimulator",
            dependencies: [
                "HeraldJSON", "HeraldCore", "HeraldBinary", "HeraldHTTP2", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // zlib, used only by the recorder.
        .systemLibrary(
            name: "CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .target(name: "CHeraldZlib", dependencies: ["CZlib"]),
        // jemalloc, the herald executable's allocator (not the libraries'): with several threads,
        // memory allocated on one and freed on another defeats glibc's per-thread caches (issue 29).
        .systemLibrary(
            name: "CJemalloc", pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"]), .brew(["jemalloc"])]
        ),
        // Durable state: the token store on SQLite (GRDB.swift, Debian's libsqlite3), issue 14.
        .target(
            name: "HeraldStore",
            dependencies: [
                "HeraldJSON", "HeraldCore", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The file recorder transport: gzip-compressed JSON Lines logs of what would be sent.
        .target(
            name: "HeraldRecorder",
            dependencies: ["HeraldJSON", "HeraldCore", "CZlib", "CHeraldZlib", .product(name: "Logging", package: "swift-log")]
        ),
        // The system OpenSSL (libssl-dev), used by HeraldOpenSSL (and HeraldTesting's certificate maker).
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // C wrappers for OpenSSL macros that do not import into Swift.
        .target(name: "CHeraldOpenSSL", dependencies: ["COpenSSL"]),
        // TLS on OpenSSL driven by SwiftNIO, and nothing else.
        .target(
            name: "HeraldOpenSSL",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                "HeraldCore", "COpenSSL", "CHeraldOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The binary interface over TLS: the gateway transport (the DeliveryMachine on NIO) and the feedback client.
        .target(
            name: "HeraldGateway",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                "HeraldCore", "HeraldBinary", "HeraldOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The HTTP/2 provider API (issue 13): requests and headers, answers and what they mean, provider tokens (ES256 JWT).
        .target(
            name: "HeraldHTTP2",
            dependencies: [
                "HeraldJSON", "HeraldCore", "HeraldPayload", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // The HTTP/2 transport (issue 13): the HTTP2DeliveryMachine on swift-nio-http2 over the OpenSSL handler.
        .target(
            name: "HeraldHTTP2Transport",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                "HeraldJSON", "HeraldCore", "HeraldHTTP2", "HeraldOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        // For tests, ours and embedders': the simulator over TLS, throwaway certificates, outcome collectors.
        .target(
            name: "HeraldTesting",
            dependencies: [
                "HeraldCore", "HeraldBinary", "HeraldHTTP2", "HeraldHTTP2Transport", "HeraldSimulator", "HeraldOpenSSL", "COpenSSL", "CHeraldOpenSSL",
                // SimulatedAPNs: the app's HeraldClient over the in-memory simulator.
                "HeraldClient", "HeraldKit", "HeraldJSON",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        // Assembles pipelines from configuration: the registry of built-in stages and transports.
        .target(
            name: "HeraldKit",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                "HeraldJSON", "HeraldCore", "HeraldPayload", "HeraldLocalization", "HeraldBinary", "HeraldSimulator", "HeraldRecorder", "HeraldStore",
                "HeraldOpenSSL", "HeraldGateway", "HeraldHTTP2", "HeraldHTTP2Transport",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The live path: `HeraldClient` for apps that send as events happen (issue 27).
        .target(
            name: "HeraldClient",
            dependencies: [
                "HeraldCore", "HeraldKit",
                // Tracing what an app sends (issue 31): the caller's span read, the notifications' spans made.
                "HeraldTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // A notification's spans (issue 31): from the W3C trace context it carries and the times it
        // passed each hop, on any swift-distributed-tracing tracer, or written straight into OTLP
        // batches by its own exporter (docs/architecture.md, "Notification spans").
        .target(
            name: "HeraldTracing",
            dependencies: [
                "HeraldCore",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                // The exporter's encoder runs on a thread of its own (NIOThreadPool).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // `herald serve`: the pipeline as a service with an HTTP API (issue 15).
        .target(
            name: "HeraldService",
            dependencies: [
                // No transport and no queue: the intake and the transport's counters come through HeraldCore's protocols.
                "HeraldJSON", "HeraldCore", "HeraldKit", "HeraldTracing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "DequeModule", package: "swift-collections"),
                // Idempotency-Key: the SHA-256 a retried body must match.
                .product(name: "Crypto", package: "swift-crypto"),
                // The outcome webhook's client (HTTPS on swift-nio-ssl, verified by default).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            resources: [.copy("openapi.yaml"), .copy("operator.html")]
        ),
        // The PostgreSQL queue (issue 16): the notifications table, its migrations, the queue source and the outcome
        // writer; the token store shared by every worker.
        .target(
            name: "HeraldPostgres",
            dependencies: [
                "HeraldCore", "HeraldStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The queue, its outcome writer and the token store are Services.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                // TLS to the database (postgres-nio's own TLS is swift-nio-ssl).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // `herald bench …`: the benchmarks, apart from the executable and the products.
        .target(
            name: "HeraldBenchmarks",
            dependencies: [
                "HeraldJSON", "HeraldCore", "HeraldPayload", "HeraldLocalization", "HeraldBinary", "HeraldSimulator",
                "HeraldOpenSSL", "HeraldGateway", "HeraldHTTP2", "HeraldHTTP2Transport", "HeraldTesting", "HeraldKit", "HeraldStore", "HeraldRecorder",
                "HeraldService", "HeraldPostgres", "HeraldClient", "HeraldTracing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `herald bench serve --tracing`: the exporter's cost measured.
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldJSON", "HeraldCore", "HeraldKit", "HeraldPayload", "HeraldBinary", "HeraldSimulator", "HeraldOpenSSL", "HeraldGateway", "HeraldTesting",
                "HeraldHTTP2", "HeraldBenchmarks", "HeraldStore", "HeraldRecorder", "HeraldService", "HeraldPostgres", "HeraldLocalization",
                "HeraldTracing", "CJemalloc",
                .product(name: "Logging", package: "swift-log"),
                // Tracing's exporter, set up from the OTEL_* variables (off unless they ask for it).
                .product(name: "OTel", package: "swift-otel"),
                // Each long-running command's services in one ServiceGroup.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `swift package herald-bench`: every benchmark, built in release mode.
        .plugin(
            name: "HeraldBenchPlugin",
            capability: .command(intent: .custom(verb: "herald-bench", description: "Run Herald's benchmarks in release mode"))
        ),
        // The tool behind the two plugins below: catalogs to typed keys, worst-case payload sizes (issue 11).
        // Only the catalog and payload modules, so that packages using the plugins build little.
        .executableTarget(name: "herald-strings", dependencies: ["HeraldJSON", "HeraldCore", "HeraldLocalization", "HeraldPayload"]),
        // examples/ShopNotifier's app, built here too (a package of its own for its readers,
        // examples/ShopNotifier/Package.swift): `ExampleAppTests` runs this build of it, so CI
        // compiles Hummingbird and HeraldClient's dependencies once, not again in a nested build.
        .executableTarget(
            name: "ShopNotifierExample",
            dependencies: [
                "HeraldClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "examples/ShopNotifier/Sources/ShopNotifier"
        ),
        // Build-tool plugin: a target's .strings/.xcstrings become typed keys; a bad catalog fails the build.
        .plugin(name: "HeraldStringsPlugin", capability: .buildTool(), dependencies: ["herald-strings"]),
        // `swift package herald-check`: each notification template's worst-case payload size, per language.
        .plugin(
            name: "HeraldCheckPlugin",
            capability: .command(intent: .custom(verb: "herald-check", description: "Check notification templates' worst-case payload sizes")),
            dependencies: ["herald-strings"]
        ),
        .testTarget(name: "HeraldJSONTests", dependencies: ["HeraldJSON", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(
            name: "HeraldCoreTests",
            dependencies: [
                "HeraldJSON", "HeraldCore", .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(name: "HeraldPayloadTests", dependencies: ["HeraldJSON", "HeraldCore", "HeraldPayload", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "HeraldLocalizationTests", dependencies: ["HeraldCore", "HeraldLocalization", "HeraldTestSupport", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "HeraldBinaryTests", dependencies: ["HeraldJSON", "HeraldCore", "HeraldBinary", "HeraldSimulator", .product(name: "PropertyBased", package: "swift-property-based")]),
        // Helpers shared by the test targets.
        .target(name: "HeraldTestSupport", dependencies: ["HeraldTesting"], path: "Tests/HeraldTestSupport"),
        .testTarget(
            name: "HeraldKitTests",
            dependencies: [
                "HeraldTestSupport", "HeraldJSON", "HeraldCore", "HeraldPayload", "HeraldLocalization", "HeraldKit", "HeraldSimulator",
                "HeraldTesting", "HeraldHTTP2", "HeraldHTTP2Transport", "HeraldTracing",
                .product(name: "PropertyBased", package: "swift-property-based"),
                // NotificationSpansTests: swift-distributed-tracing's own tracer that keeps what it made.
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // OTLPExporterTests: the exporter run as a service; a traced HeraldClient under an app's swift-otel span.
                "HeraldClient",
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "HeraldRecorderTests", dependencies: ["HeraldTestSupport", "HeraldCore", "HeraldJSON", "HeraldRecorder"]),
        .testTarget(
            name: "HeraldStoreTests",
            dependencies: ["HeraldTestSupport", "HeraldCore", "HeraldStore", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "HeraldClientTests",
            dependencies: [
                "HeraldClient", "HeraldCore", "HeraldKit", "HeraldHTTP2", "HeraldHTTP2Transport", "HeraldSimulator", "HeraldJSON", "HeraldPayload", "HeraldTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "HeraldServiceTests",
            dependencies: [
                // HeraldPostgres: its intake's answers beside the in-memory one's (no database needed).
                "HeraldCore", "HeraldJSON", "HeraldService", "HeraldPostgres", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),
        .testTarget(
            name: "HeraldOpenSSLTests",
            dependencies: ["HeraldTestSupport", "HeraldOpenSSL", "HeraldTesting", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "HeraldHTTP2Tests",
            dependencies: [
                "HeraldTestSupport", "HeraldCore", "HeraldHTTP2", "HeraldJSON", "HeraldSimulator", "HeraldPayload", "HeraldOpenSSL",
                "HeraldHTTP2Transport", "HeraldTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "HeraldGatewayTests",
            dependencies: [
                "HeraldTestSupport", "HeraldCore", "HeraldBinary", "HeraldSimulator", "HeraldOpenSSL", "HeraldGateway", "HeraldTesting", "HeraldKit",
            ]
        ),
        .testTarget(
            name: "HeraldPostgresTests",
            dependencies: [
                "HeraldTestSupport", "HeraldJSON", "HeraldCore", "HeraldKit", "HeraldPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // herald-strings on its own, and the sample package in examples/PluginSample built once broken and once fixed.
        .testTarget(name: "HeraldPluginTests", dependencies: ["HeraldTestSupport"]),
    ]
)

// Strict settings for every target, in one place.
for target in package.targets where target.type != .system && target.type != .plugin && !target.name.hasPrefix("C") {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
