import CountdownStoreCore
import Foundation
import HTTPTypes
import Hummingbird

/// The routes of a ``CountdownDashboard``: each handler turns its request into one call of the
/// library and its answer (or refusal) into JSON.
struct APIRoutes<Context: RequestContext>: Sendable {
    static var maximumBody: Int { APILimits.maximumBody }
    static var maximumLimit: Int { APILimits.maximumLimit }

    let dashboard: CountdownDashboard
    var store: CountdownStore { dashboard.store }

    /// What every page, file and answer is served with: no script, style, frame or form from
    /// anywhere but the page's own origin, no sniffing, no referrer.
    static var securityHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return headers
    }

    /// One route: a path, a method it takes, and what answers it.
    struct Route: Sendable {
        var path: RouterPath
        var method: HTTPRequest.Method
        var handler: @Sendable (Request, Context) async throws -> Response

        init(
            _ path: RouterPath, _ method: HTTPRequest.Method,
            _ handler: @escaping @Sendable (Request, Context) async throws -> Response
        ) {
            self.path = path
            self.method = method
            self.handler = handler
        }
    }

    /// Every route of the page and the API, in one list: ``add(to:)`` registers each, and
    /// answers every other method of its path with 405 and the methods this list gives it.
    var routes: [Route] {
        var routes: [Route] = [
            Route("", .get) { request, _ in try page(request) },
            Route("dashboard.js", .get) { _, _ in
                asset(DashboardAssets.script, type: "text/javascript; charset=utf-8")
            },
            Route("dashboard-actions.js", .get) { _, _ in
                asset(DashboardAssets.actions, type: "text/javascript; charset=utf-8")
            },
            Route("dashboard.css", .get) { _, _ in asset(DashboardAssets.style, type: "text/css; charset=utf-8") },
            Route("healthz", .get) { _, _ in await answer { try await health() } },
            Route("api/status", .get) { _, _ in await answer { try await status() } },
            Route("api/countdowns", .get) { request, _ in await answer { try await list(request) } },
            Route("api/countdowns", .post) { request, _ in await answer { try await start(request) } },
            Route("api/countdowns/:key", .get) { _, context in await answer { try await item(try key(context)) } },
            Route("api/countdowns/:key/events", .get) { request, context in
                await answer { try await events(request, key: try key(context)) }
            },
            Route("api/countdowns/:key/:action", .post) { request, context in
                await action(request, key: { try key(context) }, name: context.parameters.get("action") ?? "")
            },
            // The same, with the key in the query (`?key=`): the page uses these, as a browser
            // collapses the path segments `.` and `..`, which are keys like any other.
            Route("api/item", .get) { request, _ in await answer { try await item(try queryKey(request)) } },
            Route("api/item/events", .get) { request, _ in
                await answer { try await events(request, key: try queryKey(request)) }
            },
            Route("api/item/:action", .post) { request, context in
                await action(request, key: { try queryKey(request) }, name: context.parameters.get("action") ?? "")
            },
            Route("api/stream", .get) { _, _ in await stream() },
            Route("api/openapi.json", .get) { _, _ in
                var headers = Self.securityHeaders
                headers[.contentType] = "application/json; charset=utf-8"
                headers[.cacheControl] = "no-cache"
                return Response(
                    status: .ok, headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
            },
        ]
        if let registry = dashboard.metricsRegistry {
            routes.append(
                Route("metrics", .get) { _, _ in
                    var text = [UInt8]()
                    registry.emit(into: &text)
                    var headers = Self.securityHeaders
                    headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
                    headers[.cacheControl] = "no-store"
                    return Response(
                        status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
                })
        }
        return routes
    }

    func add(to parent: some RouterMethods<Context>) {
        let router = parent.group().add(
            middleware: RequestGuard<Context>(
                allowedHosts: dashboard.allowedHosts, allowedOrigins: dashboard.allowedOrigins))
        // Methods a path does not take: the name is checked, the method refused before anything else.
        let refusing = parent.group().add(
            middleware: RequestGuard<Context>(
                allowedHosts: dashboard.allowedHosts, allowedOrigins: [], checksWrites: false))
        let routes = routes
        for route in routes {
            router.on(route.path, method: route.method, use: route.handler)
        }
        // Every other method of a path answers 405 with the methods it takes.
        for (path, methods) in Self.methodsByPath(routes) {
            for method in Self.refusedMethods where !methods.contains(method) {
                refusing.on(path, method: method) { _, _ in Self.methodNotAllowed(methods) }
            }
        }
    }

    /// Each path of `routes` once, in the order of its first route, with the methods it takes.
    static func methodsByPath(_ routes: [Route]) -> [(path: RouterPath, methods: [HTTPRequest.Method])] {
        var table: [(path: RouterPath, methods: [HTTPRequest.Method])] = []
        for route in routes {
            if let index = table.firstIndex(where: { $0.path == route.path }) {
                table[index].methods.append(route.method)
            } else {
                table.append((route.path, [route.method]))
            }
        }
        return table
    }

    /// `GET api/stream`: the event stream, or its refusal.
    private func stream() async -> Response {
        do {
            var response = try EventStream(hub: dashboard.hub).response()
            response.headers.append(contentsOf: Self.securityHeaders)
            return response
        } catch let error as APIError {
            // Refused before anything was read (too many streams): the store is not asked either.
            return Self.plainRefusal(error)
        } catch {
            return await refusal(APIError.from(error, logger: dashboard.logger))
        }
    }

    // MARK: - The page

    /// The page, at the path with a trailing slash (its files and API are relative to it).
    private func page(_ request: Request) throws -> Response {
        let path = request.uri.path
        guard path.hasSuffix("/") else {
            var headers = Self.securityHeaders
            let query = request.uri.query.map { "?" + $0 } ?? ""
            headers[.location] = (path.split(separator: "/").last.map(String.init) ?? "") + "/" + query
            return Response(status: .permanentRedirect, headers: headers)
        }
        return asset(DashboardAssets.html, type: "text/html; charset=utf-8")
    }

    private func asset(_ text: String, type: String) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: - Answers

    /// Runs `work` and answers with its JSON, or with the refusal it threw; either way with the
    /// store's wall clock in `X-Countdown-Now-Ms`, from which the page counts down.
    private func answer(status: HTTPResponse.Status = .ok, _ work: () async throws -> any Encodable & Sendable) async
        -> Response
    {
        do {
            return try await json(try await work(), status: status)
        } catch {
            return await refusal(APIError.from(error, logger: dashboard.logger))
        }
    }

    private func json(_ value: any Encodable & Sendable, status: HTTPResponse.Status = .ok) async throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        var headers = Self.securityHeaders
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        if let now = try? await store.now() {
            headers[HTTPField.Name("X-Countdown-Now-Ms")!] = String(now.wall)
        }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The methods answered 405 where a path does not take them (OPTIONS is CORS's).
    static var refusedMethods: [HTTPRequest.Method] {
        [.get, .post, .put, .delete, .patch, .trace, .connect, HTTPRequest.Method("QUERY")!]
    }

    /// 405, with the methods the path takes in `Allow`.
    static func methodNotAllowed(_ methods: [HTTPRequest.Method]) -> Response {
        let names = methods.map(\.rawValue).joined(separator: ", ")
        var response = plainRefusal(
            APIError(.methodNotAllowed, code: "methodNotAllowed", "this path takes \(names) only"))
        response.headers[.allow] = names
        return response
    }

    /// A refusal made before any route runs, without the store's clock.
    static func plainRefusal(_ error: APIError) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var headers = securityHeaders
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        if let seconds = error.retryAfter { headers[.retryAfter] = String(seconds) }
        let data = (try? encoder.encode(ErrorJSON(error: .init(code: error.code, message: error.message)))) ?? Data()
        return Response(status: error.status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    private func refusal(_ error: APIError) async -> Response {
        let body = ErrorJSON(error: .init(code: error.code, message: error.message))
        var response = (try? await json(body, status: error.status)) ?? Response(status: error.status)
        if let seconds = error.retryAfter { response.headers[.retryAfter] = String(seconds) }
        return response
    }

    // MARK: - Reads

    private func health() async throws -> [String: String] {
        _ = try await store.now()
        return ["status": "ok"]
    }

    private func status() async throws -> StatusJSON {
        async let counts = store.counts()
        async let clock = store.clockStatus()
        async let consumers = store.consumerStatuses()
        return StatusJSON(
            counts: try await counts, clock: try await clock, consumers: try await consumers,
            instanceID: store.instanceID,
            readOnly: { if case .readOnly = dashboard.writeAccess { return true } else { return false } }())
    }

    private func list(_ request: Request) async throws -> PageJSON {
        let query = request.uri.queryParameters
        let stateText = query.get("state") ?? "active"
        guard let filter = StateFilter(rawValue: stateText) else {
            throw APIError.invalid(
                "invalid state \(quoted(stateText)): must be one of "
                    + "\(StateFilter.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        let group = query.get("group").flatMap { $0.isEmpty ? nil : $0 }
        var limit = 100
        if let text = query.get("limit") {
            guard let value = Int(text), (1...Self.maximumLimit).contains(value) else {
                throw APIError.invalid(
                    "invalid limit \(quoted(text)): must be a whole number from 1 to \(Self.maximumLimit)")
            }
            limit = value
        }
        let cursor = try query.get("after").flatMap { $0.isEmpty ? nil : $0 }.map(CursorText.decode)
        let page = try await store.list(filter, group: group, limit: limit, after: cursor)
        var now = page.items.first?.computedAt
        if now == nil { now = try await store.now() }
        let time = now ?? StoreTime(wall: 0, active: 0, gap: 0)
        return PageJSON(
            items: page.items, next: try page.next.map(CursorText.encode),
            now: StoreTime.iso8601(milliseconds: time.wall),
            nowMs: time.wall)
    }

    private func item(_ key: String) async throws -> Countdown {
        guard let item = try await store.countdown(key) else { throw CountdownError.notFound(key) }
        return item
    }

    private func events(_ request: Request, key: String) async throws -> EventsJSON {
        var limit = 50
        if let text = request.uri.queryParameters.get("limit") {
            guard let value = Int(text), (1...Self.maximumLimit).contains(value) else {
                throw APIError.invalid(
                    "invalid limit \(quoted(text)): must be a whole number from 1 to \(Self.maximumLimit)")
            }
            limit = value
        }
        return EventsJSON(items: try await store.recentEvents(of: key, limit: limit).map(EventJSON.init))
    }

    // MARK: - Writes

    /// Refuses a write the dashboard's access does not allow; reads nothing of the request first.
    private func authorize(_ request: Request) throws {
        switch dashboard.writeAccess {
        case .open: return
        case .readOnly: throw APIError.readOnly
        case .bearerToken(let token):
            guard token.count >= CountdownDashboard.minimumTokenLength else { throw APIError.tokenTooShort }
            guard BearerToken(token).accepts(request.headers[.authorization]) else { throw APIError.unauthorized }
        }
    }

    private func body<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
        let buffer = try await request.body.collect(upTo: Self.maximumBody)
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw APIError.invalid("invalid JSON body: \(DecodingText.describe(error))")
        }
    }

    private func start(_ request: Request) async throws -> Countdown {
        try authorize(request)
        let body = try await body(request, as: StartBody.self)
        let policy = try Self.parse(body.policy, as: CountdownPolicy.self, what: "policy") ?? .wall
        let whenActive = try Self.parse(body.whenActive, as: WhenActive.self, what: "when_active") ?? .refuse
        let payload = body.payload.map(CountdownPayload.text)
        switch body.kind ?? "countdown" {
        case "countdown":
            guard let text = body.duration else {
                throw CountdownError(
                    .invalidDuration, "missing duration: give one like 90s, 15m or 1h30m (or \"kind\": \"stopwatch\")")
            }
            let duration = try DurationText.parse(text)
            return try await store.start(
                body.key, duration: duration, group: body.group, policy: policy, payload: payload,
                whenActive: whenActive)
        case "stopwatch":
            guard body.duration == nil else {
                throw APIError.invalid("a stopwatch has no duration: leave \"duration\" out")
            }
            return try await store.startStopwatch(
                body.key, group: body.group, policy: policy, payload: payload, whenActive: whenActive)
        case let other:
            throw APIError.invalid("invalid kind \(quoted(other)): must be countdown or stopwatch")
        }
    }

    /// `POST …/{action}`: a cooldown answers 200 or 429 (``cooldown(_:key:)``), every other
    /// action the item after the change.
    private func action(_ request: Request, key: () throws -> String, name: String) async -> Response {
        if name == "cooldown" {
            do {
                return try await cooldown(request, key: try key())
            } catch {
                return await refusal(APIError.from(error, logger: dashboard.logger))
            }
        }
        return await answer { try await act(request, key: try key(), action: name) }
    }

    /// The actions of `POST …/{action}`: every ``CountdownAction``, then the calls of the rules.
    static var actions: [String] { CountdownAction.allCases.map(\.name) + ruleActions }

    /// The actions of `POST …/{action}` that are a rule's call rather than a ``CountdownAction``.
    static var ruleActions: [String] { ["cooldown", "debounce"] }

    /// Refuses an action that is not one: 405 for `events` (a GET path), 404 for any other name.
    private static func checkAction(_ action: String) throws {
        if action == "events" {
            throw APIError(.methodNotAllowed, code: "methodNotAllowed", "this path takes GET only")
        }
        guard actions.contains(action) else {
            throw APIError(
                .notFound, code: "unknownAction",
                "unknown action \(quoted(action)): one of \(actions.joined(separator: ", "))")
        }
    }

    private func act(_ request: Request, key: String, action name: String) async throws -> Countdown {
        try Self.checkAction(name)
        try authorize(request)
        guard let action = CountdownAction(name: name) else {
            // The one rule's call that answers with the item (a cooldown answers on its own).
            return try await debounce(request, key: key)
        }
        let amount =
            action.takesDuration ? try DurationText.parse(try await body(request, as: AmountBody.self).duration) : nil
        return try await action.perform(on: store, key: key, by: amount)
    }

    /// Starts a cooldown unless one runs: 200 with `{"allowed": true, "countdown"}` when it
    /// started, 429 with `Retry-After` (whole seconds, rounded up, at least 1) and
    /// `{"allowed": false, "remaining_ms", "ends_at", "countdown"}` while it runs.
    private func cooldown(_ request: Request, key: String) async throws -> Response {
        try Self.checkAction("cooldown")
        try authorize(request)
        let body = try await body(request, as: CooldownBody.self)
        let duration = try Self.duration(body.duration, field: "duration")
        let policy = try Self.parse(body.policy, as: CountdownPolicy.self, what: "policy") ?? .wall
        let payload = body.payload.map(CountdownPayload.text)
        let outcome = try await store.cooldown(
            key, duration: duration, group: body.group, policy: policy, payload: payload)
        guard case .coolingDown(let remaining, _, _) = outcome else {
            return try await json(CooldownJSON(outcome: outcome))
        }
        var response = try await json(CooldownJSON(outcome: outcome), status: .tooManyRequests)
        response.headers[.retryAfter] = String(CooldownJSON.retryAfter(remaining))
        return response
    }

    /// One call of a debounce: the item after it.
    private func debounce(_ request: Request, key: String) async throws -> Countdown {
        let body = try await body(request, as: DebounceBody.self)
        let quiet = try Self.duration(body.quiet, field: "quiet")
        let maxWait = try Self.duration(body.maxWait, field: "max_wait")
        let policy = try Self.parse(body.policy, as: CountdownPolicy.self, what: "policy") ?? .wall
        return try await store.debounce(
            key, quiet: quiet, maxWait: maxWait, group: body.group, policy: policy,
            payload: body.payload.map(CountdownPayload.text))
    }

    // MARK: - Parsing

    /// The duration of the body's `field`, whose refusal names the field and its text.
    private static func duration(_ text: String?, field: String) throws -> Duration {
        guard let text else {
            throw CountdownError(.invalidDuration, "missing \(field): give a duration like 90s, 15m or 1h30m")
        }
        return try DurationText.parse(text, naming: field)
    }

    /// The `key` of the path, percent-decoded (a key may hold any character, `/` included).
    private func key(_ context: Context) throws -> String {
        let raw = context.parameters.get("key") ?? ""
        guard let key = raw.removingPercentEncoding else {
            throw APIError(
                .badRequest, code: CountdownError.Code.invalidKey.name,
                "invalid key \(quoted(raw)): bad percent-encoding")
        }
        return key
    }

    /// The `key` of the query.
    private func queryKey(_ request: Request) throws -> String {
        guard let key = request.uri.queryParameters.get("key") else {
            throw APIError(.badRequest, code: CountdownError.Code.invalidKey.name, "missing key: give it as ?key=")
        }
        return key
    }

    private static func parse<T: RawRepresentable & CaseIterable>(_ text: String?, as type: T.Type, what: String) throws
        -> T?
    where T.RawValue == String {
        guard let text else { return nil }
        guard let value = T(rawValue: text) else {
            throw APIError.invalid(
                "invalid \(what) \(quoted(text)): must be one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }
}

/// The bounds of what the API reads and answers.
enum APILimits {
    /// The largest request body read (a payload is at most 64 KiB; escaped in JSON it may be more).
    static let maximumBody = 256 * 1024
    /// The largest page of `GET api/countdowns`.
    static let maximumLimit = 1000
}

/// A list cursor as text for a URL: its JSON in base64url.
enum CursorText {
    static func encode(_ cursor: ListCursor) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try encoder.encode(cursor).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=", with: "")
    }

    static func decode(_ text: String) throws -> ListCursor {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard text.utf8.count <= 4096, let data = Data(base64Encoded: base64),
            let cursor = try? JSONDecoder().decode(ListCursor.self, from: data)
        else {
            throw APIError.invalid(
                "invalid cursor \(quoted(text)): pass back the \"next\" of the previous page unchanged")
        }
        return cursor
    }
}

/// What a `DecodingError` says, in one line that names the field.
enum DecodingText {
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let names = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "the body" : "\"" + names.joined(separator: ".") + "\""
        }
        switch error {
        case .keyNotFound(let key, _): return "missing \"\(key.stringValue)\""
        case .typeMismatch(let type, let context):
            return "\(path(context)) must be \(type == String.self ? "a string" : "\(type)")"
        case .valueNotFound(let type, let context):
            return "\(path(context)) must be \(type == String.self ? "a string" : "\(type)"), not null"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context)) is not valid"
        @unknown default: return "not the expected JSON"
        }
    }
}
