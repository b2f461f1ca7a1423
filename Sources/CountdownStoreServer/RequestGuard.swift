import CountdownStoreCore
import Foundation
import HTTPTypes
import Hummingbird

extension CountdownDashboard {
    /// The names a dashboard answers for, in the request's `Host`: a request for any other name
    /// is refused with 421 before any route runs.
    ///
    /// A web page the operator visits can point a name of its own at 127.0.0.1 (DNS rebinding)
    /// and then read whatever answers there as its own origin; such a request carries the
    /// page's name in `Host`. Loopback names (`localhost`, `*.localhost`) and addresses given
    /// as numbers (`127.0.0.1:8080`, `[::1]:8080`, the address bound), which no rebinding can
    /// produce, are always answered.
    public struct AllowedHosts: Sendable, Hashable {
        /// Names answered besides the loopback names and addresses, lowercased, without a port.
        public let names: Set<String>
        /// Whether every `Host` is answered: the host's own middleware in front checks it.
        public let anyHost: Bool

        /// Only the loopback names and addresses given as numbers.
        public static let loopback = AllowedHosts(names: [], anyHost: false)

        /// Every `Host`: for a host whose own middleware checks the name (a reverse proxy that
        /// routes by name does too).
        public static let any = AllowedHosts(names: [], anyHost: true)

        /// The loopback names and addresses, and `names` (each a host name without a port,
        /// such as `ops.example.com`; a leading `*.` allows its subdomains).
        public static func names(_ names: [String]) -> AllowedHosts {
            AllowedHosts(names: Set(names.map { $0.lowercased() }), anyHost: false)
        }

        /// Whether a request whose `Host` is `authority` is answered.
        func allows(_ authority: String) -> Bool {
            if anyHost { return true }
            guard let host = Self.hostPart(of: authority) else { return false }
            if host.hasPrefix("[") || Self.isIPv4(host) { return true }
            if host == "localhost" || host.hasSuffix(".localhost") || names.contains(host) { return true }
            return names.contains { $0.hasPrefix("*.") && host.hasSuffix($0.dropFirst()) }
        }

        /// The host of `authority` lowercased, without the port and a trailing dot; `nil` when it
        /// is not a host.
        static func hostPart(of authority: String) -> String? {
            var text = Substring(authority.lowercased())
            if text.hasPrefix("[") {
                guard let end = text.firstIndex(of: "]") else { return nil }
                let rest = text[text.index(after: end)...]
                guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isASCIIDigit)) else {
                    return nil
                }
                return String(text[...end])
            }
            if let colon = text.lastIndex(of: ":") {
                guard text[text.index(after: colon)...].allSatisfy(\.isASCIIDigit) else { return nil }
                text = text[..<colon]
            }
            if text.hasSuffix(".") { text = text.dropLast() }
            guard !text.isEmpty, text.allSatisfy({ $0.isASCIIAlphanumeric || $0 == "-" || $0 == "." || $0 == "_" })
            else { return nil }
            return String(text)
        }

        static func isIPv4(_ host: String) -> Bool {
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4
                && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCIIDigit) && Int($0)! <= 255 }
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
    fileprivate var isASCIIAlphanumeric: Bool { isASCII && (isLetter || isNumber) }
}

/// Checks who is asking before any route runs: the `Host` must be one the dashboard answers
/// for (421 otherwise), and a write must come from a page of the dashboard's own origin (or one
/// it allows) with a JSON body, which no cross-site form and no `no-cors` fetch can send (403 and
/// 415 otherwise).
struct RequestGuard<Context: RequestContext>: RouterMiddleware {
    let allowedHosts: CountdownDashboard.AllowedHosts
    let allowedOrigins: Set<String>
    /// Whether writes are checked (origin, JSON): not in front of routes that only refuse.
    var checksWrites = true

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            try check(request)
        } catch let error as APIError {
            return APIRoutes<Context>.plainRefusal(error)
        }
        return try await next(request, context)
    }

    private func check(_ request: Request) throws {
        guard let authority = request.head.authority, allowedHosts.allows(authority) else {
            let shown =
                request.head.authority.map { "host \(quoted(String($0.prefix(200))))" }
                ?? "a request without a Host header"
            throw APIError(
                .misdirectedRequest, code: "unknownHost",
                "this server does not answer for \(shown): "
                    + "use the address it listens on, or start it with --allow-host NAME"
            )
        }
        // POST is the API's only write; any other method is refused by its route (405).
        guard checksWrites, request.method == .post else { return }
        try checkSameOrigin(request, authority: authority)
        try checkJSON(request)
    }

    /// A write from another site's page is refused: by `Sec-Fetch-Site` where the browser sends
    /// it, by `Origin` otherwise. A request without either (`curl`, a program) is no browser's.
    private func checkSameOrigin(_ request: Request, authority: String) throws {
        let origin = request.headers[.origin]
        if let origin, allowedOrigins.contains(origin) { return }
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site != "same-origin" && site != "none" {
            throw APIError(
                .forbidden, code: "crossSite",
                "this write comes from another site's page "
                    + "(Sec-Fetch-Site: \(quoted(String(site.prefix(100))))): it is refused"
            )
        }
        if let origin, origin != "http://" + authority && origin != "https://" + authority {
            throw APIError(
                .forbidden, code: "crossSite",
                "this write comes from another origin (\(quoted(String(origin.prefix(200))))): "
                    + "it is refused unless the server allows that origin (--cors-origin)"
            )
        }
    }

    /// Every write carries `Content-Type: application/json`, with a body or without one: a form
    /// cannot send it, and a cross-site `fetch` cannot send it without asking first (CORS).
    private func checkJSON(_ request: Request) throws {
        let type = request.headers[.contentType] ?? ""
        let mediaType =
            type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard mediaType == "application/json" else {
            throw APIError(
                .unsupportedMediaType, code: "notJSON",
                "a write needs Content-Type: application/json (with an empty body where it takes none); got "
                    + (type.isEmpty ? "none" : quoted(String(type.prefix(100)))))
        }
    }
}
