// swift-tools-version: 6.2
import PackageDescription

// An example host: an HTTP service on Hummingbird that gives each order a payment deadline.
// It is a package of its own, so that Hummingbird never enters CountdownStore's dependency graph.
//
//     swift run --package-path Examples/OrdersService orders-service --data /tmp/orders
//     swift test --package-path Examples/OrdersService
let package = Package(
    name: "OrdersService",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "orders-service", targets: ["OrdersService"])
    ],
    dependencies: [
        // A local checkout: `name:` keeps the identity `CountdownStore` whatever the folder is called.
        .package(name: "CountdownStore", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
    ],
    targets: [
        // The service: routes, the host's own tables and the expiry handler.
        .target(
            name: "OrdersApp",
            dependencies: [
                .product(name: "CountdownStore", package: "CountdownStore"),
                .product(name: "CountdownStoreServer", package: "CountdownStore"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `orders-service`: the service as a program, stopped by SIGTERM or SIGINT.
        .executableTarget(
            name: "OrdersService",
            dependencies: ["OrdersApp"]
        ),
        // The service answering a real HTTP client on 127.0.0.1, in process on virtual time and
        // as a program that is stopped, killed and started again.
        .testTarget(
            name: "OrdersServiceTests",
            dependencies: [
                "OrdersApp",
                "OrdersService",
                .product(name: "CountdownStore", package: "CountdownStore"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableExperimentalFeature("StrictConcurrency=complete"))
    target.swiftSettings = settings
}
