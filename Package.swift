// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "CountdownStore",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "CountdownStore", targets: ["CountdownStore"]),
        // The same store on PostgreSQL, for hosts on several machines: the only product that
        // builds SwiftNIO, and one that builds no GRDB (`import CountdownStorePostgres` alone).
        .library(name: "CountdownStorePostgres", targets: ["CountdownStorePostgres"]),
        // The live dashboard and HTTP API, as routes a Hummingbird host mounts: the only
        // product that builds Hummingbird (`countdown serve` runs it too).
        .library(name: "CountdownStoreServer", targets: ["CountdownStoreServer"]),
        // An observable model of countdowns for SwiftUI screens, and an app's lifecycle in one
        // place: it builds on the SQLite store an app keeps in Application Support.
        .library(name: "CountdownStoreUI", targets: ["CountdownStoreUI"]),
        // Both engines, and one opening for either from a location a user gives (a file's path or
        // a PostgreSQL connection string): for hosts, like the tool, that let their user choose.
        .library(name: "CountdownStoreLocation", targets: ["CountdownStoreLocation"]),
        .executable(name: "countdown", targets: ["countdown"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", exact: "2.0.1"),
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
        // Metrics: the core reports through swift-metrics (the host bootstraps a backend); the
        // server serves them in Prometheus text, on Hummingbird.
        .package(url: "https://github.com/apple/swift-metrics", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
        // DocC (`bash .ci/check-docs` builds the catalog of `Sources/CountdownStore/`).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", exact: "1.5.0"),
    ],
    targets: [
        // Small C helpers for SQLite calls Swift cannot make (variadic `sqlite3_db_config`).
        .target(name: "CSQLiteShim"),
        // The one system call of the engine-neutral core Swift cannot make (variadic `prctl`).
        .target(name: "CCountdownSystem"),
        // The engine-neutral core: the model, the time model, operations, queries, events, the
        // ticker and retention, written against `StorageEngine`. It imports no engine.
        .target(
            name: "CountdownStoreCore",
            dependencies: [
                "CCountdownSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The SQL both engines speak: the records' columns, and the core's
        // lists of countdowns rendered as SQL (the core itself holds no SQL).
        .target(name: "CountdownStoreSQL", dependencies: ["CountdownStoreCore"]),
        // The SQLite engine, on GRDB: the embedded default.
        .target(
            name: "CountdownStoreSQLite",
            dependencies: [
                "CountdownStoreCore",
                "CountdownStoreSQL",
                "CSQLiteShim",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["embedded-files.json"],
            plugins: ["EmbedFiles"]
        ),
        // `import CountdownStore`: the core and the SQLite engine in one line, and the DocC catalog.
        .target(name: "CountdownStore", dependencies: ["CountdownStoreCore", "CountdownStoreSQLite"]),
        // The PostgreSQL engine, on postgres-nio: the only target that builds SwiftNIO.
        .target(
            name: "CountdownStorePostgres",
            dependencies: [
                "CountdownStoreCore",
                "CountdownStoreSQL",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["embedded-files.json"],
            plugins: ["EmbedFiles"]
        ),
        // The dashboard and HTTP API on Hummingbird, with the metrics in Prometheus text.
        .target(
            name: "CountdownStoreServer",
            dependencies: [
                "CountdownStoreCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The page's files, embedded by the plugin rather than shipped as resources.
            exclude: ["embedded-files.json", "Dashboard"],
            plugins: ["EmbedFiles"]
        ),
        .target(name: "CountdownStoreUI", dependencies: ["CountdownStore"]),
        // Which engine a location string names, and the opening of either.
        .target(name: "CountdownStoreLocation", dependencies: ["CountdownStore", "CountdownStorePostgres"]),
        // The git commit the tool is built from, read before each build (`countdown --version`).
        .target(name: "CountdownBuildInfo", plugins: ["BuildInfo"]),
        .executableTarget(
            name: "countdown",
            dependencies: [
                "CountdownStore",
                "CountdownBuildInfo",
                "CountdownStoreLocation",
                "CountdownStorePostgres",
                "CountdownStoreServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A host app in miniature: the ticker in a ServiceGroup beside a service of the host's.
        .executableTarget(
            name: "CountdownHostExample",
            dependencies: [
                "CountdownStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Examples/CountdownHostExample"
        ),
        // A process the reliability suites start, stop and kill.
        .executableTarget(
            name: "CountdownTortureHelper",
            dependencies: [
                "CountdownStore", "CountdownStoreCore", "CountdownStorePostgres", "CSQLiteTestVFS",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Tests/Helpers/CountdownTortureHelper"
        ),
        // An SQLite VFS for the helper: simulated power loss, and a kill in the middle of a checkpoint.
        .target(name: "CSQLiteTestVFS", path: "Tests/Helpers/CountdownTestVFS"),
        // `swift run -c release CountdownBenchmarks`: our figures beside raw SQLite's and raw
        // postgres-nio's for the same work. It depends on `countdown` so that the tool it runs
        // (the mass-expiry cases start `countdown run`) is built beside it, from the same sources.
        .executableTarget(
            name: "CountdownBenchmarks",
            dependencies: [
                "CountdownStore",
                "countdown",
                "CountdownStorePostgres",
                "CSQLiteShim",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/CountdownBenchmarks"
        ),
        // Turns files (the engines' `Migrations/<engine>/*.sql`, the dashboard's page) into Swift
        // source at build time, as each target's `embedded-files.json` says, so binaries carry them.
        .executableTarget(name: "EmbedFilesTool"),
        .plugin(
            name: "EmbedFiles",
            capability: .buildTool(),
            dependencies: ["EmbedFilesTool"]
        ),
        .plugin(name: "BuildInfo", capability: .buildTool()),
        .testTarget(
            name: "CountdownStoreTests",
            dependencies: [
                "CountdownStore",
                "CountdownStorePostgres",
                "CountdownStoreServer",
                "CountdownStoreUI",
                "CountdownStoreLocation",
                "CountdownHostExample",
                "countdown",
                "CountdownTortureHelper",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            // Files that real failures left behind, unpacked by the tests that use them.
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Strict settings for every target of ours, in one place.
for target in package.targets where [.executable, .test, .regular].contains(target.type) {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableExperimentalFeature("StrictConcurrency=complete"))
    target.swiftSettings = settings
}
