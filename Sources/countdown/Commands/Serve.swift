import ArgumentParser
import CountdownStore
import CountdownStoreServer
import Foundation
import Hummingbird
import HummingbirdCore
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
                unless told otherwise, and answers only its own names (see --allow-host). Without a token \
                (--token-file, --token, else $COUNTDOWN_TOKEN) it is read-only: every write answers 401; with one, \
                a write needs Authorization: Bearer TOKEN and Content-Type: application/json. It takes part in the \
                store's lease like `countdown run`, so it expires countdowns too. SIGINT and SIGTERM stop it.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "The address to listen on.") var host = "127.0.0.1"
        @Option(help: "The port to listen on (0: any free port, printed at start).") var port = 8080
        @Option(
            help: ArgumentHelp(
                "The token writes must present, at least 16 characters (default: $COUNTDOWN_TOKEN; none: read-only). "
                    + "Prefer --token-file: a command line is visible to every user of the machine.",
                valueName: "token"))
        var token: String?
        @Option(help: ArgumentHelp("Read the token from this file (its first line).", valueName: "path"))
        var tokenFile: String?
        @Flag(
            help:
                """
                Let every request that reaches the server write, without a token: only behind a proxy that \
                authenticates. Cross-site writes are still refused.
                """
        )
        var openWrites = false
        @Option(help: "The most connections held at once; more wait to be accepted.") var maxConnections = 4096
        @Option(help: "The most event streams (/api/stream) open at once; beyond, 503 with Retry-After.")
        var maxStreams = 256
        @Flag(
            help:
                """
                Listen on an address other than loopback: only behind a proxy that terminates TLS, \
                since the token and the store would otherwise cross the network in clear.
                """
        )
        var behindTLSProxy = false
        @Option(
            help: ArgumentHelp(
                "Allow this origin's pages to call the API (CORS); none by default.", valueName: "origin"))
        var corsOrigin: String?
        @Option(
            name: .customLong("allow-host"),
            help: ArgumentHelp(
                "Also answer requests for this host name (repeatable; '*' for any). Loopback names and numeric "
                    + "addresses are always answered; any other Host is refused with 421.",
                valueName: "name"))
        var allowHosts: [String] = []

        func run() async throws {
            guard (0...65535).contains(port) else {
                throw CountdownError(.invalidArgument, "invalid port \(port): must be from 0 to 65535")
            }
            guard (1...100_000).contains(maxStreams) else {
                throw CountdownError(.invalidArgument, "invalid --max-streams \(maxStreams): must be from 1 to 100000")
            }
            guard (1...1_000_000).contains(maxConnections) else {
                throw CountdownError(
                    .invalidArgument, "invalid --max-connections \(maxConnections): must be from 1 to 1000000")
            }
            for name in allowHosts where name != "*" {
                guard name.wholeMatch(of: #/(\*\.)?[A-Za-z0-9][A-Za-z0-9._-]*/#) != nil else {
                    throw CountdownError(
                        .invalidArgument,
                        "invalid --allow-host \(quoted(name)): "
                            + "give a host name without scheme or port, such as ops.example.com, *.example.com or *"
                    )
                }
            }
            let token = try resolvedToken()
            if openWrites && token != nil {
                throw CountdownError(.invalidArgument, "invalid --open-writes with a token: give one or the other")
            }
            if !Self.isLoopback(host) && !behindTLSProxy {
                throw CountdownError(
                    .invalidArgument,
                    "refusing to listen on \(quoted(host)) without TLS: the token and the store would cross the "
                        + "network in clear. Listen on 127.0.0.1, or put the server behind a proxy that terminates TLS "
                        + "and pass --behind-tls-proxy"
                )
            }
            let registry = PrometheusCollectorRegistry()
            let store = try await global.openStore(
                metrics: .init(factory: PrometheusMetricsFactory(registry: registry)))
            let allowedHosts: CountdownDashboard.AllowedHosts =
                allowHosts.contains("*") ? .any : .names(allowHosts + [host])
            let dashboard = CountdownDashboard(
                store: store, writeAccess: openWrites ? .open : token.map { .bearerToken($0) } ?? .readOnly,
                metricsRegistry: registry,
                allowedHosts: allowedHosts, allowedOrigins: Set([corsOrigin].compactMap { $0 }), logger: toolLogger,
                maximumStreams: maxStreams)
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
            let (host, port) = (host, port)
            let access =
                openWrites
                ? "open writes: the proxy in front decides"
                : token == nil ? "read-only: no token" : "writes need the token"
            let limits = ConnectionLimits.standard
            let listening = Locked(false)
            let app = Application(
                router: router,
                server: .http1(configuration: .init(additionalChannelHandlers: [limits.handler()])),
                configuration: .init(
                    address: .hostname(host, port: port), serverName: nil, backlog: 4096,
                    availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)),
                onServerRunning: { channel in
                    let bound = channel.localAddress?.port ?? port
                    FileHandle.standardOutput.write(
                        Data("countdown serve: http://\(host):\(bound)/ (\(access))\n".utf8))
                    listening.withLock { $0 = true }
                }, logger: serverLogger)
            let ticker = CountdownTicker(store: store)
            let notifier = SystemdNotifier.shared
            let supervision = SystemdSupervision(notifier: notifier, ticker: ticker) {
                listening.withLock { $0 }
            }
            // Shut down in the reverse order: systemd hears of the stop first, then the open event
            // streams end (so that the server's stop is not held back), the server, the ticker.
            let group = ServiceGroup(
                configuration: .init(
                    services: [
                        .init(service: ticker),
                        .init(service: SupervisionService(supervision: supervision)),
                        .init(service: app),
                        .init(service: StreamsStopper(dashboard: dashboard)),
                        .init(service: StoppingNotice(notifier: notifier)),
                    ],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    cancellationSignals: [],
                    logger: toolLogger))
            try await group.run()
            try await store.close()
        }
    }
}

extension CountdownCommand.Serve {
    /// The shortest token taken: anything shorter is guessed too easily to guard writes.
    static let minimumTokenLength = 16

    /// The token from `--token-file`, `--token` or `$COUNTDOWN_TOKEN`, in that order; `nil` for none.
    func resolvedToken() throws -> String? {
        var candidate: (text: String, source: String)?
        if let tokenFile {
            guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
                throw CountdownError(.invalidArgument, "invalid --token-file \(quoted(tokenFile)): it cannot be read")
            }
            let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
            candidate = (line.trimmingCharacters(in: .whitespacesAndNewlines), "the token in \(quoted(tokenFile))")
        } else if let token {
            candidate = (token, "--token")
        } else if let environment = ProcessInfo.processInfo.environment["COUNTDOWN_TOKEN"], !environment.isEmpty {
            candidate = (environment, "$COUNTDOWN_TOKEN")
        }
        guard let candidate else { return nil }
        guard candidate.text.count >= Self.minimumTokenLength else {
            // The token itself is never shown: only its length.
            throw CountdownError(
                .invalidArgument,
                "invalid token: \(candidate.source) has \(candidate.text.count) characters; "
                    + "a token needs at least \(Self.minimumTokenLength) (for example: openssl rand -hex 24)"
            )
        }
        return candidate.text
    }

    /// Whether `host` is a loopback address or name.
    static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return name == "localhost" || name == "::1" || name.hasPrefix("127.")
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

/// Tells systemd, while the server runs, that it is ready, its status and that its ticker goes
/// round (``SystemdSupervision``), until a graceful shutdown begins.
struct SupervisionService: Service, CustomStringConvertible {
    let supervision: SystemdSupervision

    var description: String { "SystemdSupervision" }

    func run() async throws {
        guard supervision.notifier.isEnabled else {
            try? await gracefulShutdown()
            return
        }
        // It ends by a cancellation, once the shutdown begins: nothing to report.
        _ = try? await cancelWhenGracefulShutdown { try await supervision.run() }
    }
}

/// Tells systemd `STOPPING=1` once a graceful shutdown begins (SIGTERM, SIGINT).
struct StoppingNotice: Service, CustomStringConvertible {
    let notifier: SystemdNotifier

    var description: String { "SystemdStoppingNotice" }

    func run() async throws {
        try? await gracefulShutdown()
        notifier.notifyStopping()
    }
}
