import ArgumentParser
import CountdownStore
import CountdownStoreServer
import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle
import UnixSignals

extension CountdownCommand {
    /// `countdown serve`: the dashboard, the HTTP API and the metrics, with the ticker.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the live dashboard, the HTTP API and the metrics, and run the ticker.",
            discussion: """
                The dashboard is at http://HOST:PORT/, the API under /api/, server-sent events of every change at \
                /api/stream, the metrics in Prometheus text at /metrics, and /healthz. It listens on 127.0.0.1 \
                unless told otherwise. Without a token (--token, else $COUNTDOWN_TOKEN) it is read-only: every \
                write answers 401; with one, a write needs Authorization: Bearer TOKEN. It takes part in the \
                store's lease like `countdown run`, so it expires countdowns too. SIGINT and SIGTERM stop it.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "The address to listen on.") var host = "127.0.0.1"
        @Option(help: "The port to listen on (0: any free port, printed at start).") var port = 8080
        @Option(help: ArgumentHelp("The token writes must present (default: $COUNTDOWN_TOKEN; none: read-only).", valueName: "token"))
        var token: String?
        @Option(help: ArgumentHelp("Allow this origin's pages to call the API (CORS); none by default.", valueName: "origin"))
        var corsOrigin: String?

        func run() async throws {
            guard (0...65535).contains(port) else {
                throw CountdownError(.invalidArgument, "invalid port \(port): must be from 0 to 65535")
            }
            let environmentToken = ProcessInfo.processInfo.environment["COUNTDOWN_TOKEN"]
            let token = [token, environmentToken].compactMap { $0 }.first { !$0.isEmpty }
            let registry = PrometheusCollectorRegistry()
            let store = try await global.openStore(metrics: .init(factory: PrometheusMetricsFactory(registry: registry)))
            let dashboard = CountdownDashboard(
                store: store, writeAccess: token.map { .bearerToken($0) } ?? .readOnly, metricsRegistry: registry)
            let router = Router()
            if let corsOrigin {
                router.add(
                    middleware: CORSMiddleware(
                        allowOrigin: CORSMiddleware<BasicRequestContext>.AllowOriginExtended.custom(corsOrigin),
                        allowHeaders: [.authorization, .contentType], allowMethods: [.get, .post],
                        exposedHeaders: ["X-Countdown-Now-Ms"]))
            }
            dashboard.addRoutes(to: router)
            var serverLogger = toolLogger
            serverLogger.logLevel = .error
            let (host, port, readOnly) = (host, port, token == nil)
            let app = Application(
                router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil),
                onServerRunning: { channel in
                    let bound = channel.localAddress?.port ?? port
                    let access = readOnly ? "read-only: no token" : "writes need the token"
                    FileHandle.standardOutput.write(Data("countdown serve: http://\(host):\(bound)/ (\(access))\n".utf8))
                }, logger: serverLogger)
            let group = ServiceGroup(
                configuration: .init(
                    services: [
                        .init(service: CountdownTicker(store: store)),
                        .init(service: app),
                        // Shut down first: the open event streams end, so the server's stop is not held back.
                        .init(service: StreamsStopper(dashboard: dashboard)),
                    ],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    cancellationSignals: [],
                    logger: toolLogger))
            try await group.run()
            try await store.close()
        }
    }
}

/// Ends the dashboard's event streams once a graceful shutdown begins.
struct StreamsStopper: Service {
    let dashboard: CountdownDashboard

    func run() async throws {
        try? await gracefulShutdown()
        dashboard.stopStreams()
    }
}
