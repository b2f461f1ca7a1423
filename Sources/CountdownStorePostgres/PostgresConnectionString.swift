import CountdownStoreCore
import Foundation
import PostgresNIO

/// A connection string as libpq reads it, taken apart: the URL form
/// (`postgres://USER:PASSWORD@H1:P1,H2:P2/DB?PARAM=VALUE&…`) or the `key=value` form
/// (`host=h1,h2 port=5432 dbname=orders sslmode=verify-full`), completed from the `PG*`
/// environment variables and the password file where the string leaves a value out.
///
/// Every parameter either has libpq's meaning or is refused by name: a string that connects
/// with `psql` connects here the same way, or fails at once saying what is not supported.
package struct PostgresConnectionString: Sendable {
    /// One server to try: a host name or address and port, or a Unix socket folder.
    package struct Server: Sendable, Hashable, CustomStringConvertible {
        /// A host name, an IP address, or a folder (starting with `/`) holding the server's socket.
        package var host: String
        package var port: Int
        /// The name its certificate must carry, when `host` is an address given by `hostaddr`
        /// (libpq connects to `hostaddr` and checks the name `host` gives).
        package var certificateName: String?

        /// The server at `host` (a name, an address, or a socket folder) and `port`.
        package init(host: String, port: Int, certificateName: String? = nil) {
            self.host = host
            self.port = port
            self.certificateName = certificateName
        }

        /// Whether this server is reached through a Unix socket.
        package var isSocket: Bool { host.hasPrefix("/") }

        package var description: String {
            isSocket ? "\(host)/.s.PGSQL.\(port)" : (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        }
    }

    /// libpq's `sslmode`.
    package enum SSLMode: String, Sendable, CaseIterable {
        /// Never TLS.
        case disable
        /// Without TLS first; with TLS (unverified) if the server refuses a plain connection.
        case allow
        /// TLS if the server offers it, unverified; without TLS otherwise. libpq's default.
        case prefer
        /// TLS, unverified (unless `sslrootcert` is given: then as `verify-ca`).
        case require
        /// TLS, the certificate signed by a trusted root; the host name not checked.
        case verifyCA = "verify-ca"
        /// TLS, the certificate signed by a trusted root and naming the host.
        case verifyFull = "verify-full"
    }

    /// libpq's `target_session_attrs`: which of the servers tried is taken.
    package enum TargetSessionAttributes: String, Sendable, CaseIterable {
        /// The first that accepts a connection (a store still moves on from one that refuses
        /// its writes as read-only).
        case any
        /// The first that accepts writes (`transaction_read_only` off).
        case readWrite = "read-write"
        /// The first that is not in recovery (not a standby).
        case primary
    }

    package var servers: [Server]
    package var user: String
    package var password: String?
    package var database: String
    package var sslMode: SSLMode
    /// `sslrootcert`: a file of trusted root certificates, or `system` for the system's roots.
    package var sslRootCert: String?
    /// `sslcert` and `sslkey`: a client certificate and its key, in PEM files.
    package var sslCert: String?
    package var sslKey: String?
    /// `connect_timeout` (libpq's default: none; the store's: 10 s).
    package var connectTimeout: Duration
    package var applicationName: String?
    package var targetSessionAttributes: TargetSessionAttributes
    /// `load_balance_hosts=random`: the servers are tried in a random order.
    package var loadBalance: Bool
    /// `options`: command-line options sent to the server at connection start (`-c name=value`).
    package var options: String?
    /// `?schema=`, this package's own.
    package var schema: String?
    /// `?wakeups=notify|poll`, this package's own.
    package var wakeUps: PostgresWakeUps?
    /// The string without its password, for messages.
    package var redacted: String

    /// The parameters a string may hold, libpq's and this package's (`schema`, `wakeups`).
    package static let knownParameters = [
        "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "connect_timeout", "application_name",
        "fallback_application_name", "sslmode", "sslrootcert", "sslcert", "sslkey", "target_session_attrs",
        "load_balance_hosts", "options", "channel_binding", "schema", "wakeups",
    ]

    /// Where the `~/.pgpass` and environment values come from, so that tests can hand their own.
    package struct Environment: Sendable {
        package var variables: [String: String]
        /// The home folder (`~/.pgpass`).
        package var home: String?
        /// The operating system's user name: the default user.
        package var systemUser: String

        package init(variables: [String: String], home: String?, systemUser: String) {
            self.variables = variables
            self.home = home
            self.systemUser = systemUser
        }

        /// This process's environment.
        package static var process: Environment {
            let variables = ProcessInfo.processInfo.environment
            let home = variables["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            return Environment(variables: variables, home: home, systemUser: NSUserName())
        }
    }

    /// Parses `text` (a `postgres://` or `postgresql://` URL, or `key=value` pairs), completing
    /// it from `environment`.
    package init(_ text: String, environment: Environment = .process, defaultApplicationName: String? = nil)
        throws(CountdownError)
    {
        let shown = Self.redact(text)
        func invalid(_ why: String) -> CountdownError {
            CountdownError(
                .invalidArgument, "invalid PostgreSQL connection string \(quoted(shown, limit: 200)): \(why)")
        }
        let pairs: [(String, String)]
        if Self.isURL(text) {
            pairs = try Self.urlPairs(text, invalid: invalid)
        } else {
            pairs = try Self.keywordPairs(text, invalid: invalid)
        }
        var values: [String: String] = [:]
        for (key, value) in pairs {
            guard Self.knownParameters.contains(key) else {
                let hint = key == "ssl" ? "" : " (known: \(Self.knownParameters.joined(separator: ", ")))"
                throw invalid("unknown parameter \(quoted(key))\(hint)")
            }
            values[key] = value
        }
        let variables = environment.variables
        func value(_ key: String, _ variable: String?) -> String? {
            if let given = values[key] { return given }
            guard let variable, let fromEnvironment = variables[variable], !fromEnvironment.isEmpty else { return nil }
            return fromEnvironment
        }

        // Servers: hosts (or addresses) and ports, one port for all or one each. With
        // `hostaddr`, the addresses are connected to and the names in `host` checked in certificates.
        func list(_ text: String) -> [String] {
            text.split(separator: ",", omittingEmptySubsequences: false).map {
                String($0).trimmingCharacters(in: .whitespaces)
            }
        }
        let names = list(value("host", "PGHOST") ?? "")
        let addresses = value("hostaddr", "PGHOSTADDR").map(list)
        if let addresses, names != [""], addresses.count != names.count {
            throw invalid("\(addresses.count) hostaddr for \(names.count) hosts (give one address per host)")
        }
        let hosts = addresses ?? names
        let portText = value("port", "PGPORT") ?? ""
        let ports =
            portText.isEmpty ? [] : portText.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard ports.count <= 1 || ports.count == hosts.count else {
            throw invalid("\(ports.count) ports for \(hosts.count) hosts (give one port, or one per host)")
        }
        var servers: [Server] = []
        for (index, host) in hosts.enumerated() {
            let portValue =
                ports.isEmpty ? "" : ports[ports.count == 1 ? 0 : index].trimmingCharacters(in: .whitespaces)
            var port = 5432
            if !portValue.isEmpty {
                guard let number = Int(portValue), (1...65535).contains(number) else {
                    throw invalid("port \(quoted(portValue)) is not a number from 1 to 65535")
                }
                port = number
            }
            let name = addresses != nil && names != [""] ? names[index] : nil
            servers.append(
                Server(host: host.isEmpty ? Self.defaultSocketFolder : host, port: port, certificateName: name))
        }
        self.servers = servers

        user = value("user", "PGUSER") ?? environment.systemUser
        database = value("dbname", "PGDATABASE") ?? user
        guard !user.isEmpty else { throw invalid("it names no user") }

        guard let mode = SSLMode(rawValue: value("sslmode", "PGSSLMODE") ?? "prefer") else {
            throw invalid(
                "unknown sslmode \(quoted(value("sslmode", "PGSSLMODE") ?? "")) (known: "
                    + "\(SSLMode.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        // libpq's defaults: the files of ~/.postgresql, when they exist.
        func defaultFile(_ name: String) -> String? {
            guard let home = environment.home else { return nil }
            let path = ((home as NSString).appendingPathComponent(".postgresql") as NSString).appendingPathComponent(
                name)
            return FileManager.default.fileExists(atPath: path) ? path : nil
        }
        sslRootCert = value("sslrootcert", "PGSSLROOTCERT") ?? defaultFile("root.crt")
        sslCert = value("sslcert", "PGSSLCERT")
        sslKey = value("sslkey", "PGSSLKEY")
        if sslCert == nil, sslKey == nil, let certificate = defaultFile("postgresql.crt"),
            let key = defaultFile("postgresql.key")
        {
            sslCert = certificate
            sslKey = key
        }
        // As libpq: `require` with a root certificate file verifies the chain, as `verify-ca`.
        sslMode = mode == .require && sslRootCert != nil ? .verifyCA : mode
        if sslCert != nil && sslKey == nil || sslKey != nil && sslCert == nil {
            throw invalid("sslcert and sslkey go together (a client certificate and its key)")
        }
        if let binding = values["channel_binding"], !["disable", "prefer"].contains(binding) {
            throw invalid("channel_binding \(quoted(binding)) is not supported (supported: disable, prefer)")
        }

        if let timeout = value("connect_timeout", "PGCONNECT_TIMEOUT") {
            // libpq: whole seconds; zero or less waits without end (here: capped at the default
            // of libpq's callers, as a store never waits without a bound). At least 2 s.
            guard let seconds = Int(timeout.trimmingCharacters(in: .whitespaces)) else {
                throw invalid("connect_timeout \(quoted(timeout)) is not a whole number of seconds")
            }
            connectTimeout = seconds <= 0 ? .seconds(10) : .seconds(max(2, seconds))
        } else {
            connectTimeout = .seconds(10)
        }
        applicationName =
            value("application_name", "PGAPPNAME") ?? values["fallback_application_name"] ?? defaultApplicationName

        let attributes = value("target_session_attrs", "PGTARGETSESSIONATTRS") ?? "any"
        switch attributes {
        case "read-only", "standby", "prefer-standby":
            throw invalid(
                "target_session_attrs \(quoted(attributes)) would take a server that refuses writes, "
                    + "and the store writes (use any, read-write or primary)"
            )
        default:
            guard let taken = TargetSessionAttributes(rawValue: attributes) else {
                throw invalid(
                    "unknown target_session_attrs \(quoted(attributes)) (known: "
                        + "\(TargetSessionAttributes.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            targetSessionAttributes = taken
        }
        switch value("load_balance_hosts", "PGLOADBALANCEHOSTS") ?? "disable" {
        case "disable": loadBalance = false
        case "random": loadBalance = true
        case let other: throw invalid("unknown load_balance_hosts \(quoted(other)) (known: disable, random)")
        }
        options = value("options", "PGOPTIONS")

        schema = values["schema"]
        if let wake = values["wakeups"] {
            guard let known = PostgresWakeUps(rawValue: wake) else {
                throw invalid("unknown wakeups \(quoted(wake)) (known: notify, poll)")
            }
            wakeUps = known
        }

        password = value("password", "PGPASSWORD")
        if password == nil {
            let file =
                value("passfile", "PGPASSFILE")
                ?? environment.home.map { ($0 as NSString).appendingPathComponent(".pgpass") }
            if let file {
                password = Self.passwordFromFile(file, servers: servers, database: database, user: user)
            }
        }
        redacted = shown
    }

    /// The folder of the server's socket when a string names no host (Debian's libpq's default).
    package static let defaultSocketFolder = "/var/run/postgresql"

    /// Whether `text` is a connection string rather than a file's path: a `postgres://` or
    /// `postgresql://` URL, or `key=value` pairs starting with a known keyword.
    package static func isConnectionString(_ text: String) -> Bool {
        if isURL(text) { return true }
        let trimmed = text.drop { $0 == " " }
        guard let equals = trimmed.firstIndex(of: "=") else { return false }
        let keyword = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
        return knownParameters.contains(keyword) && keyword != "schema" && keyword != "wakeups"
    }

    private static func isURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    // MARK: URL form

    /// The URL's parts as keyword pairs, in libpq's order (the query's parameters last, so
    /// that they override what the authority says, as libpq does not allow both).
    private static func urlPairs(_ text: String, invalid: (String) -> CountdownError) throws(CountdownError) -> [(
        String, String
    )] {
        func decoded(_ part: Substring, _ what: String) throws(CountdownError) -> String {
            guard let value = String(part).removingPercentEncoding else {
                throw invalid("the \(what) is not valid percent-encoding")
            }
            return value
        }
        guard let scheme = text.range(of: "://") else { throw invalid("expected postgres://") }
        var rest = text[scheme.upperBound...]
        var pairs: [(String, String)] = []
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        // The user information ends at the last "@" (a password may hold one, percent-encoded or not).
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                let user = try decoded(userInfo[..<colon], "user")
                if !user.isEmpty { pairs.append(("user", user)) }
                pairs.append(("password", try decoded(userInfo[userInfo.index(after: colon)...], "password")))
            } else if !userInfo.isEmpty {
                pairs.append(("user", try decoded(userInfo, "user")))
            }
        }
        if !rest.isEmpty {
            var hosts: [String] = []
            var ports: [String] = []
            for spec in rest.split(separator: ",", omittingEmptySubsequences: false) {
                var host: Substring
                var port: Substring = ""
                if spec.hasPrefix("[") {
                    guard let close = spec.firstIndex(of: "]") else {
                        throw invalid("the IPv6 address \(quoted(String(spec))) has no closing ]")
                    }
                    host = spec[spec.index(after: spec.startIndex)..<close]
                    let after = spec[spec.index(after: close)...]
                    if after.hasPrefix(":") {
                        port = after.dropFirst()
                    } else if !after.isEmpty {
                        throw invalid("unexpected \(quoted(String(after))) after the address")
                    }
                } else if let colon = spec.lastIndex(of: ":") {
                    host = spec[..<colon]
                    port = spec[spec.index(after: colon)...]
                } else {
                    host = spec
                }
                hosts.append(try decoded(host, "host"))
                ports.append(try decoded(port, "port"))
            }
            pairs.append(("host", hosts.joined(separator: ",")))
            // A host without a port takes the default one, as in libpq.
            if ports.contains(where: { !$0.isEmpty }) {
                pairs.append(("port", ports.map { $0.isEmpty ? "5432" : $0 }.joined(separator: ",")))
            }
        }
        if !path.isEmpty { pairs.append(("dbname", try decoded(path, "database name"))) }
        for item in query.split(separator: "&") where !item.isEmpty {
            guard let equals = item.firstIndex(of: "=") else {
                throw invalid("the parameter \(quoted(String(item))) has no value")
            }
            let key = try decoded(item[..<equals], "parameter name")
            let value = try decoded(item[item.index(after: equals)...], "value of \(key)")
            if key == "ssl" {
                // libpq's URI form takes JDBC's `ssl=true` for `sslmode=require`.
                guard value == "true" else {
                    throw invalid("ssl \(quoted(value)): only ssl=true is understood (use sslmode)")
                }
                pairs.append(("sslmode", "require"))
                continue
            }
            pairs.append((key, value))
        }
        return pairs
    }

    // MARK: key=value form

    /// `key = value` pairs separated by spaces; a value in single quotes may hold spaces, and
    /// `\'` and `\\` within it.
    private static func keywordPairs(_ text: String, invalid: (String) -> CountdownError) throws(CountdownError) -> [(
        String, String
    )] {
        var pairs: [(String, String)] = []
        var characters = Array(text)[...]
        func skipSpaces() {
            while let first = characters.first, first.isWhitespace { characters = characters.dropFirst() }
        }
        while true {
            skipSpaces()
            guard !characters.isEmpty else { break }
            var key = ""
            while let first = characters.first, first != "=", !first.isWhitespace {
                key.append(first)
                characters = characters.dropFirst()
            }
            skipSpaces()
            guard characters.first == "=" else {
                throw invalid("expected a postgres:// URL or key=value pairs; \(quoted(key)) has no value")
            }
            characters = characters.dropFirst()
            skipSpaces()
            var value = ""
            if characters.first == "'" {
                characters = characters.dropFirst()
                var closed = false
                while let first = characters.first {
                    characters = characters.dropFirst()
                    if first == "\\", let next = characters.first {
                        value.append(next)
                        characters = characters.dropFirst()
                    } else if first == "'" {
                        closed = true
                        break
                    } else {
                        value.append(first)
                    }
                }
                guard closed else { throw invalid("the value of \(quoted(key)) has no closing quote") }
            } else {
                while let first = characters.first, !first.isWhitespace {
                    if first == "\\", characters.count > 1 {
                        characters = characters.dropFirst()
                    }
                    value.append(characters.first!)
                    characters = characters.dropFirst()
                }
            }
            pairs.append((key, value))
        }
        return pairs
    }

    // MARK: Password file

    /// The password the file at `path` gives for the first server, `database` and `user`
    /// (`hostname:port:database:username:password` lines, `*` matching anything, `\:` and `\\`
    /// escaped), as libpq reads it: not at all when others may read the file.
    static func passwordFromFile(_ path: String, servers: [Server], database: String, user: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_mode & 0o077 == 0,
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else { return nil }
        for server in servers {
            let host = server.isSocket ? "localhost" : server.host
            for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
                var fields: [String] = [""]
                var escaped = false
                for character in line {
                    if escaped {
                        fields[fields.count - 1].append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == ":" && fields.count < 5 {
                        fields.append("")
                    } else {
                        fields[fields.count - 1].append(character)
                    }
                }
                guard fields.count == 5 else { continue }
                let wanted = [host, "\(server.port)", database, user]
                if zip(fields, wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
            }
        }
        return nil
    }

    /// `text` with the password (if any) replaced by `***`.
    package static func redact(_ text: String) -> String {
        if isURL(text) {
            var result = text
            if let scheme = result.range(of: "://") {
                let authorityEnd = result[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" } ?? result.endIndex
                let authority = result[scheme.upperBound..<authorityEnd]
                if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                    result.replaceSubrange(result.index(after: colon)..<at, with: "***")
                }
            }
            if let range = result.range(of: "password=[^&]*", options: .regularExpression) {
                result.replaceSubrange(range, with: "password=***")
            }
            return result
        }
        guard let range = text.range(of: "password\\s*=\\s*('([^'\\\\]|\\\\.)*'|[^\\s]*)", options: .regularExpression)
        else { return text }
        var result = text
        result.replaceSubrange(range, with: "password=***")
        return result
    }
}
