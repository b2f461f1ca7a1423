import CountdownStorePostgres
import Foundation
import Testing

@testable import CountdownStoreCore

/// A certificate authority of the test's own, a server certificate it signs for `localhost` and
/// 127.0.0.1, and a client certificate for the role `certuser`, made with `openssl`.
struct TestCertificates: Sendable {
    let folder: String
    var ca: String { "\(folder)/ca.pem" }
    var serverCertificate: String { "\(folder)/server.pem" }
    var serverKey: String { "\(folder)/server.key" }
    var clientCertificate: String { "\(folder)/client.pem" }
    var clientKey: String { "\(folder)/client.key" }
    /// A second authority, which signed none of these.
    var otherCA: String { "\(folder)/other-ca.pem" }

    static var opensslAvailable: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") }

    /// Makes them in `folder`; the server's key ends up owned by the `postgres` user when the
    /// tests run as root (the server refuses a key others may read, or that it does not own).
    init(folder: String) throws {
        self.folder = folder
        func openssl(_ arguments: [String]) throws { try TestPostgres.run("/usr/bin/openssl", arguments) }
        let days = "2"
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(folder)/ca.key", "-out", ca, "-days", days, "-subj", "/CN=countdown-test-ca"])
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(folder)/other-ca.key", "-out", otherCA, "-days", days, "-subj", "/CN=someone-else"])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: "\(folder)/server.ext", atomically: true, encoding: .utf8)
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", serverKey, "-out", "\(folder)/server.csr", "-subj", "/CN=localhost"])
        try openssl([
            "x509", "-req", "-in", "\(folder)/server.csr", "-CA", ca, "-CAkey", "\(folder)/ca.key", "-CAcreateserial",
            "-out", serverCertificate, "-days", days, "-extfile", "\(folder)/server.ext",
        ])
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", clientKey, "-out", "\(folder)/client.csr", "-subj", "/CN=certuser"])
        try openssl([
            "x509", "-req", "-in", "\(folder)/client.csr", "-CA", ca, "-CAkey", "\(folder)/ca.key", "-CAcreateserial",
            "-out", clientCertificate, "-days", days,
        ])
        chmod(folder, 0o755)
        for file in [ca, otherCA, serverCertificate, clientCertificate] { chmod(file, 0o644) }
        chmod(serverKey, 0o600)
        chmod(clientKey, 0o600)
        if getuid() == 0 { try TestPostgres.run("/bin/chown", ["postgres:postgres", serverKey]) }
    }
}

/// A server with TLS on, as Debian ships it and managed services run it: every `sslmode` with
/// libpq's meaning, `sslrootcert` with a CA of the test's own, client certificates, and TLS and
/// authentication failures reported as what they are.
@Suite(
    "PostgreSQL over TLS", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TestPostgres.serverBinariesAvailable && TestCertificates.opensslAvailable))
struct PostgresTLSTests {
    /// Plain connections are refused (as many managed services do); `secret` signs in with a
    /// password, `certuser` with its certificate, everyone else is trusted.
    static let hba = """
        local all all trust
        hostnossl all all 127.0.0.1/32 reject
        hostssl all secret 127.0.0.1/32 scram-sha-256
        hostssl all certuser 127.0.0.1/32 cert
        hostssl all all 127.0.0.1/32 trust
        hostssl all all ::1/128 trust
        """

    /// Runs `body` with a TLS server of its own and the certificates it uses.
    private func withServer(_ body: (TestPostgres, TestCertificates) async throws -> Void) async throws {
        let folder = try TemporaryFolder()
        let certificates = try TestCertificates(folder: folder.url.path)
        let server = try TestPostgres.dedicated(
            settings: [
                "ssl=on", "ssl_cert_file=\(certificates.serverCertificate)", "ssl_key_file=\(certificates.serverKey)",
                "ssl_ca_file=\(certificates.ca)", "password_encryption=scram-sha-256",
            ],
            hba: Self.hba)
        defer { server.discard() }
        try await server.withClient(viaSocket: true) { client in
            try await client.query("CREATE ROLE secret LOGIN PASSWORD 'right-password' SUPERUSER")
            try await client.query("CREATE ROLE certuser LOGIN SUPERUSER")
        }
        try await body(server, certificates)
    }

    /// The store's engine details for a string: opens, reads `doctor`'s figures, closes.
    private func details(_ url: String) async throws -> [String: String] {
        let store = try await CountdownStore(postgresURL: url)
        let diagnostics = try await store.diagnostics()
        try await store.close()
        return Dictionary(diagnostics.engineDetails.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// The error opening a store with `url` gives.
    private func openingError(_ url: String) async -> CountdownError? {
        do {
            let store = try await CountdownStore(postgresURL: url)
            try? await store.close()
            return nil
        } catch {
            return error
        }
    }

    @Test("prefer (the default), require, allow, verify-ca and verify-full with sslrootcert connect over TLS; disable is refused by the server, saying so")
    func modes() async throws {
        try await withServer { server, certificates in
            let base = "postgres://postgres@localhost:\(server.port)/postgres"
            for query in ["", "?sslmode=prefer", "?sslmode=require", "?sslmode=allow", "?sslmode=verify-ca&sslrootcert=\(certificates.ca)",
                          "?sslmode=verify-full&sslrootcert=\(certificates.ca)", "?sslmode=require&sslrootcert=\(certificates.ca)"] {
                let details = try await details(base + query)
                #expect(details["tls"]?.hasPrefix("TLSv1.") == true, "\(query): TLS is on: \(details)")
                #expect(details["role"] == "primary", "\(query): \(details)")
            }
            // The key=value form, with the environment's root certificate.
            let keywords = "host=localhost port=\(server.port) user=postgres dbname=postgres sslmode=verify-full sslrootcert=\(certificates.ca)"
            #expect(try await details(keywords)["tls"]?.hasPrefix("TLSv1.") == true)

            let refused = try #require(await openingError(base + "?sslmode=disable"))
            #expect(refused.code == .ioFailure)
            #expect(refused.message.contains("no encryption") || refused.message.contains("pg_hba.conf"), "the server's reason: \(refused.message)")
            #expect(!refused.message.contains("within"), "not reported as a time-out: \(refused.message)")
        }
    }

    @Test("A certificate that does not verify fails at once as a TLS failure: system roots, another CA")
    func verificationFailures() async throws {
        try await withServer { server, certificates in
            let base = "postgres://postgres@localhost:\(server.port)/postgres"
            for query in ["?sslmode=verify-full", "?sslmode=verify-ca&sslrootcert=system", "?sslmode=verify-full&sslrootcert=\(certificates.otherCA)"] {
                let error = try #require(await openingError(base + query), "\(query) must fail")
                #expect(error.code == .ioFailure)
                #expect(error.message.contains("TLS failed"), "\(query): \(error.message)")
                #expect(error.message.contains("localhost:\(server.port)"), "\(query) names the server: \(error.message)")
                #expect(!error.message.contains("within"), "not reported as a time-out: \(error.message)")
            }
            let missing = try #require(await openingError(base + "?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"))
            #expect(missing.code == .invalidArgument && missing.message.contains("/nonexistent/ca.pem"), "\(missing.message)")
        }
    }

    @Test("Authentication: a wrong password fails at once saying so; the password file and a client certificate sign in")
    func authentication() async throws {
        try await withServer { server, certificates in
            let wrong = try #require(await openingError("postgres://secret:wrong@localhost:\(server.port)/postgres?sslmode=require"))
            #expect(wrong.code == .ioFailure)
            #expect(wrong.message.contains("authentication failed") && wrong.message.contains("28P01"), "\(wrong.message)")
            #expect(!wrong.message.contains("wrong"), "the password is not shown: \(wrong.message)")

            let folder = try TemporaryFolder()
            let passfile = folder.path("pgpass")
            try "localhost:\(server.port):*:secret:right-password\n".write(toFile: passfile, atomically: true, encoding: .utf8)
            chmod(passfile, 0o600)
            let signedIn = try await details("postgres://secret@localhost:\(server.port)/postgres?sslmode=require&passfile=\(passfile)")
            #expect(signedIn["tls"]?.hasPrefix("TLSv1.") == true)

            let withCertificate = try await details(
                "postgres://certuser@localhost:\(server.port)/postgres?sslmode=verify-full&sslrootcert=\(certificates.ca)"
                    + "&sslcert=\(certificates.clientCertificate)&sslkey=\(certificates.clientKey)")
            #expect(withCertificate["role"] == "primary")
            let noCertificate = try #require(await openingError("postgres://certuser@localhost:\(server.port)/postgres?sslmode=require"))
            #expect(noCertificate.message.contains("certificate") || noCertificate.message.contains("28000"), "\(noCertificate.message)")
        }
    }

    @Test("The tool: doctor shows the server reached, its role and TLS; application_name reaches pg_stat_activity")
    func tool() async throws {
        try await withServer { server, certificates in
            let url = "host=localhost port=\(server.port) user=postgres dbname=postgres sslmode=verify-full sslrootcert=\(certificates.ca) application_name=billing-worker"
            let doctor = try HelperProcess.run(countdownBinary, ["--db", url, "doctor"], limit: 60)
            #expect(doctor.status == 0, "\(doctor.stderr)")
            #expect(doctor.stdout.contains("localhost:\(server.port)"), "\(doctor.stdout)")
            #expect(doctor.stdout.contains("primary") && doctor.stdout.contains("TLSv1."), "\(doctor.stdout)")

            let store = try await CountdownStore(postgresURL: url)
            try await store.start("order-1", duration: .seconds(60))
            let names = try await server.withClient(viaSocket: true) { client in
                var names: [String] = []
                let rows = try await client.query("SELECT application_name FROM pg_stat_activity WHERE application_name <> ''")
                for try await name in rows.decode(String.self) { names.append(name) }
                return names
            }
            #expect(names.contains("billing-worker"), "\(names)")
            try await store.close()

            let refused = try HelperProcess.run(countdownBinary, ["--db", "postgres://postgres@localhost:\(server.port)/postgres?sslmode=verify-full", "list"], limit: 60)
            #expect(refused.status != 0 && refused.stderr.contains("TLS failed"), "\(refused.stderr)")
            let unknown = try HelperProcess.run(countdownBinary, ["--db", "postgres://postgres@localhost:\(server.port)/postgres?keepalives=1", "list"], limit: 60)
            #expect(unknown.status == 64 && unknown.stderr.contains("unknown parameter 'keepalives'"), "\(unknown.stderr)")
        }
    }
}
