import CountdownStoreServer
import Foundation
import HTTPTypes
import Hummingbird
import MetricsTestKit
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The code of the article "Watching a store", run.
@Suite("Article: Watching a store")
struct WatchingArticleTests {
    @Test("Metrics go to the factory of the configuration")
    func metricsFactory() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let metricsFactory = TestMetrics()

        var configuration = CountdownStore.Configuration()
        configuration.metrics = .init(factory: metricsFactory)  // nil: the bootstrapped backend
        let store = try CountdownStore(path: path, configuration: configuration)

        try await store.start("order-1042", duration: .seconds(900), group: "payments")
        #expect(metricsFactory.counters(label: "countdown_items_started_total").reduce(0) { $0 + $1.totalValue } == 1)
        try await store.close()
    }

    /// The host's own middleware in front of the dashboard: operators only.
    struct OperatorsOnly<Context: RequestContext>: RouterMiddleware {
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            guard request.headers[HTTPField.Name("X-Operator")!] == "yes" else { return Response(status: .forbidden) }
            return try await next(request, context)
        }
    }

    @Test("Mounted under a path of the host's router, behind the host's middleware, over real HTTP")
    func mounted() async throws {
        let folder = try TemporaryFolder()
        let store = try CountdownStore(path: folder.path())
        let router = Router()

        let dashboard = CountdownDashboard(store: store, writeAccess: .open, allowedHosts: .names(["ops.example.com"]))
        let operators = router.group("countdowns").add(middleware: OperatorsOnly())
        dashboard.addRoutes(to: operators)

        let port = Locked(0)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port ?? 0 } })
        let serving = Task { try await app.run() }
        defer { serving.cancel() }
        try await eventually("the server listens") { port.withLock { $0 } != 0 }
        let base = "http://127.0.0.1:\(port.withLock { $0 })/countdowns"
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 15
        let session = URLSession(configuration: configuration)

        func send(_ method: String, _ path: String, operator isOperator: Bool, body: String? = nil, type: String = "application/json")
            async throws -> (Int, String)
        {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = method
            if isOperator { request.setValue("yes", forHTTPHeaderField: "X-Operator") }
            if method == "POST" { request.setValue(type, forHTTPHeaderField: "Content-Type") }
            request.httpBody = body.map { Data($0.utf8) }
            let (data, response) = try await session.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }

        #expect(try await send("GET", "/api/countdowns", operator: false).0 == 403, "the host's middleware stands in front")
        let started = try await send("POST", "/api/countdowns", operator: true, body: #"{"key": "order-1042", "duration": "15m"}"#)
        #expect(started.0 == 200, "\(started.1)")
        let listed = try await send("GET", "/api/countdowns", operator: true)
        #expect(listed.0 == 200 && listed.1.contains("\"key\":\"order-1042\""), "\(listed.1)")
        let form = try await send("POST", "/api/countdowns", operator: true, body: #"{"key": "forged", "duration": "15m"}"#, type: "text/plain")
        #expect(form.0 == 415, "a cross-site form's body type is refused: \(form.1)")
        let page = try await send("GET", "/", operator: true)
        #expect(page.0 == 200 && page.1.contains("dashboard.js"))
        serving.cancel()
        _ = await serving.result
        try await store.close()
    }
}
