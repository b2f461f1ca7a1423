import CountdownStoreCore
import Foundation
import PostgresNIO

// What a connection string's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` mean for one
// connection, with libpq's meanings: `prefer` and `require` encrypt without checking who
// answers; `verify-ca` checks the certificate's chain; `verify-full` its host name too.

extension PostgresConnectionString {
    /// The TLS settings of a connection in `mode` (`nil`: without TLS).
    func tlsConfiguration(_ mode: SSLMode) throws -> TLSConfiguration? {
        guard mode != .disable else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        switch mode {
        case .disable:
            return nil
        case .allow, .prefer, .require:
            tls.certificateVerification = .none
        case .verifyCA:
            tls.certificateVerification = .noHostnameVerification
        case .verifyFull:
            tls.certificateVerification = .fullVerification
        }
        if let root = sslRootCert, root != "system", mode == .verifyCA || mode == .verifyFull {
            tls.trustRoots = .file(root)
        } else if mode == .verifyCA || mode == .verifyFull {
            tls.trustRoots = .default
        }
        if let sslCert, let sslKey {
            tls.certificateChain = try NIOSSLCertificate.fromPEMFile(sslCert).map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: sslKey, format: .pem))
        }
        return tls
    }

    /// Checks that the files the TLS settings name can be read, so that a wrong path is
    /// reported as such, at once.
    func checkTLSFiles() throws(CountdownError) {
        guard sslMode != .disable else { return }
        var files: [(String, String)] = []
        if let root = sslRootCert, root != "system", sslMode == .verifyCA || sslMode == .verifyFull {
            files.append(("sslrootcert", root))
        }
        if let sslCert { files.append(("sslcert", sslCert)) }
        if let sslKey { files.append(("sslkey", sslKey)) }
        for (name, path) in files where !FileManager.default.isReadableFile(atPath: path) {
            throw CountdownError(.invalidArgument, "\(name) \(quoted(path)) is not a readable file")
        }
        if sslMode == .verifyCA || sslMode == .verifyFull, let root = sslRootCert, root != "system" {
            do {
                _ = try NIOSSLCertificate.fromPEMFile(root)
            } catch {
                throw CountdownError(.invalidArgument, "sslrootcert \(quoted(root)) holds no PEM certificate: \(error)")
            }
        }
        if let sslCert, let sslKey {
            do {
                _ = try tlsConfiguration(.require)
            } catch {
                throw CountdownError(
                    .invalidArgument,
                    "sslcert \(quoted(sslCert)) and sslkey \(quoted(sslKey)) "
                        + "are not a PEM certificate and key: \(error)"
                )
            }
        }
    }

    /// Startup parameters for every connection: the application's name and `options`.
    var startupParameters: [(String, String)] {
        var parameters: [(String, String)] = []
        if let applicationName, !applicationName.isEmpty { parameters.append(("application_name", applicationName)) }
        if let options, !options.isEmpty { parameters.append(("options", options)) }
        return parameters
    }

    /// A pool's configuration for `server`, with TLS as `mode` says (after ``allow``'s choice).
    func clientConfiguration(for server: Server, tls mode: SSLMode, extraParameters: [(String, String)]) throws
        -> PostgresClient.Configuration
    {
        var configuration: PostgresClient.Configuration
        if server.isSocket {
            configuration = PostgresClient.Configuration(
                unixSocketPath: server.host + "/.s.PGSQL.\(server.port)", username: user, password: password,
                database: database)
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch mode {
            case .disable: tls = .disable
            case .allow, .prefer: tls = .prefer(try tlsConfiguration(mode) ?? .makeClientConfiguration())
            case .require, .verifyCA, .verifyFull:
                tls = .require(try tlsConfiguration(mode) ?? .makeClientConfiguration())
            }
            configuration = PostgresClient.Configuration(
                host: server.host, port: server.port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.connectTimeout = connectTimeout
        configuration.options.tlsServerName = server.certificateName
        configuration.options.additionalStartupParameters = startupParameters + extraParameters
        return configuration
    }

    /// A single connection's configuration for `server` (the probe that picks a server).
    func connectionConfiguration(
        for server: Server, tls mode: SSLMode, extraParameters: [(String, String)]
    ) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if server.isSocket {
            configuration = PostgresConnection.Configuration(
                unixSocketPath: server.host + "/.s.PGSQL.\(server.port)", username: user, password: password,
                database: database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch mode {
            case .disable:
                tls = .disable
            case .allow, .prefer:
                tls = .prefer(
                    try NIOSSLContext(configuration: try tlsConfiguration(mode) ?? .makeClientConfiguration()))
            case .require, .verifyCA, .verifyFull:
                tls = .require(
                    try NIOSSLContext(configuration: try tlsConfiguration(mode) ?? .makeClientConfiguration()))
            }
            configuration = PostgresConnection.Configuration(
                host: server.host, port: server.port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.connectTimeout = .nanoseconds(Int64(connectTimeout.components.seconds) * 1_000_000_000)
        configuration.options.tlsServerName = server.certificateName
        configuration.options.additionalStartupParameters = startupParameters + extraParameters
        return configuration
    }
}

extension PostgresConnectionString {
    /// A pool's configuration for the first server, without picking one (the benchmarks' raw client).
    package var clientConfiguration: PostgresClient.Configuration {
        get throws {
            try clientConfiguration(for: servers[0], tls: sslMode == .allow ? .disable : sslMode, extraParameters: [])
        }
    }
}
