import CountdownStoreCore
import Foundation
import PostgresNIO

/// A `postgres://` URL taken apart (the benchmarks read their server's URL with it too).
package struct PostgresURL: Sendable {
    package var clientConfiguration: PostgresClient.Configuration
    /// The URL without its password, for messages.
    var redacted: String
    /// `?schema=`.
    var schema: String?
    /// `?wakeups=notify|poll`.
    var wakeUps: PostgresWakeUps?

    package init(_ text: String) throws(CountdownError) {
        let shown = Self.redact(text)
        func invalid(_ why: String) -> CountdownError {
            CountdownError(.invalidArgument, "invalid PostgreSQL URL \(quoted(shown, limit: 200)): \(why)")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme,
            ["postgres", "postgresql"].contains(scheme.lowercased())
        else {
            throw invalid("expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        guard let user = components.percentEncodedUser.flatMap({ $0.removingPercentEncoding }), !user.isEmpty else {
            throw invalid("it names no user")
        }
        let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        let database = String(components.path.drop { $0 == "/" }).removingPercentEncoding.flatMap { $0.isEmpty ? nil : $0 }
        var socketFolder: String?
        var tls = PostgresClient.Configuration.TLS.prefer(.makeClientConfiguration())
        for item in components.queryItems ?? [] {
            switch item.name {
            case "host":
                socketFolder = item.value
            case "schema":
                schema = item.value
            case "wakeups":
                guard let value = item.value.flatMap(PostgresWakeUps.init(rawValue:)) else {
                    throw invalid("unknown wakeups \(quoted(item.value ?? "")) (known: notify, poll)")
                }
                wakeUps = value
            case "sslmode":
                switch item.value {
                case "disable"?: tls = .disable
                case "prefer"?, "allow"?: tls = .prefer(.makeClientConfiguration())
                case "require"?, "verify-ca"?, "verify-full"?: tls = .require(.makeClientConfiguration())
                default: throw invalid("unknown sslmode \(quoted(item.value ?? ""))")
                }
            default:
                throw invalid("unknown parameter \(quoted(item.name)) (known: host, schema, sslmode, wakeups)")
            }
        }
        if let socketFolder, socketFolder.hasPrefix("/") {
            let port = components.port ?? 5432
            clientConfiguration = PostgresClient.Configuration(
                unixSocketPath: socketFolder + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            guard let host = socketFolder ?? components.host, !host.isEmpty else { throw invalid("it names no host") }
            if let port = components.port, !(1...65535).contains(port) { throw invalid("port \(port) is out of range") }
            clientConfiguration = PostgresClient.Configuration(
                host: host, port: components.port ?? 5432, username: user, password: password, database: database, tls: tls)
        }
        redacted = shown
    }

    /// `text` with the password (if any) replaced by `***`.
    static func redact(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.password != nil else { return text }
        components.password = "***"
        return components.string ?? text
    }
}
