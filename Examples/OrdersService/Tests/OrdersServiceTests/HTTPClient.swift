import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real HTTP client (URLSession) for the service on 127.0.0.1, every request bounded.
struct HTTPClient: Sendable {
    /// What came back: the status and the body parsed as JSON.
    struct Reply: @unchecked Sendable {
        // Safe: the JSON is parsed once and only read afterwards.
        let status: Int
        let headers: [String: String]
        let json: [String: Any]

        /// The value at a path of object keys, `nil` when absent.
        private func value(_ path: [String]) -> Any? {
            path.reduce(json as Any?) { value, key in (value as? [String: Any])?[key] }
        }

        /// A string at a path.
        func string(_ path: String...) -> String? {
            value(path) as? String
        }

        /// A whole number at a path.
        func int(_ path: String...) -> Int? {
            (value(path) as? NSNumber)?.intValue
        }

        /// The objects of an array at `key`.
        func objects(_ key: String) -> [[String: Any]] {
            json[key] as? [[String: Any]] ?? []
        }
    }

    let port: Int
    private let session: URLSession

    init(port: Int) {
        self.port = port
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 15
        configuration.timeoutIntervalForResource = 30
        session = URLSession(configuration: configuration)
    }

    func get(_ path: String) async throws -> Reply {
        try await send("GET", path, body: nil)
    }

    func post(_ path: String, _ body: String? = nil) async throws -> Reply {
        try await send("POST", path, body: body)
    }

    /// Sends one request and returns the status and the body as text, with `headers` set.
    func text(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// Sends one request; the body is raw text, so malformed JSON can be sent too.
    func send(_ method: String, _ path: String, body: String?) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        let json = data.isEmpty ? [:] : (try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:])
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Reply(status: http.statusCode, headers: headers, json: json)
    }
}

/// Asks `condition` again (real time, every 20 ms) until it holds; fails after `limit` seconds.
func eventually(_ what: String, limit: Double = 20, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out after \(Int(limit)) s waiting until \(what)")
    throw CancellationError()
}

/// A folder of its own for one test, removed afterwards.
final class TemporaryFolder: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}
