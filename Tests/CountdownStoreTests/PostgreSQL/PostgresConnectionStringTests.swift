@testable import CountdownStorePostgres
import Foundation
import Testing

@testable import CountdownStoreCore

/// Connection strings as libpq reads them: both forms, several hosts, the TLS parameters, the
/// `PG*` variables and the password file, and a refusal naming whatever is not supported.
@Suite("PostgreSQL connection strings")
struct PostgresConnectionStringTests {
    typealias Server = PostgresConnectionString.Server

    /// An environment with only `variables`, the home folder `home` and the system user `me`.
    private func environment(_ variables: [String: String] = [:], home: String? = nil) -> PostgresConnectionString.Environment {
        PostgresConnectionString.Environment(variables: variables, home: home, systemUser: "me")
    }

    private func parse(_ text: String, _ variables: [String: String] = [:], home: String? = nil) throws(CountdownError) -> PostgresConnectionString {
        try PostgresConnectionString(text, environment: environment(variables, home: home))
    }

    /// The refusal of `text`, which must be an invalid-argument error.
    private func refusal(_ text: String, _ variables: [String: String] = [:]) -> String {
        do {
            _ = try parse(text, variables)
            Issue.record("\(text) was accepted")
            return ""
        } catch {
            #expect(error.code == .invalidArgument, "\(text): \(error)")
            return error.message
        }
    }

    @Test("A multi-host URL with target_session_attrs, as libpq, pgx and JDBC users write it")
    func multiHostURL() throws {
        let string = try parse("postgres://u:p%40ss@h1:5432,h2:5433/orders?target_session_attrs=read-write&connect_timeout=3&application_name=billing")
        #expect(string.servers == [Server(host: "h1", port: 5432), Server(host: "h2", port: 5433)])
        #expect(string.user == "u" && string.password == "p@ss" && string.database == "orders")
        #expect(string.targetSessionAttributes == .readWrite)
        #expect(string.connectTimeout == .seconds(3))
        #expect(string.applicationName == "billing")
        #expect(string.sslMode == .prefer, "libpq's default")
        #expect(string.redacted == "postgres://u:***@h1:5432,h2:5433/orders?target_session_attrs=read-write&connect_timeout=3&application_name=billing")
        // A host without a port takes the default one; IPv6 in brackets; a socket folder percent-encoded.
        #expect(try parse("postgresql://u@h1,[::1]:6000/db").servers == [Server(host: "h1", port: 5432), Server(host: "::1", port: 6000)])
        #expect(try parse("postgres://u@%2Frun%2Fpostgresql:5433/db").servers == [Server(host: "/run/postgresql", port: 5433)])
        #expect(try parse("postgres://u@/db?host=/tmp/sockets").servers == [Server(host: "/tmp/sockets", port: 5432)])
        #expect(try parse("postgres://u@h/db?ssl=true").sslMode == .require, "JDBC's ssl=true, as libpq takes it")
    }

    @Test("The key=value form, with quoted values and one port for every host")
    func keywordForm() throws {
        let string = try parse(#"host=db1,db2 port=6432 dbname='my orders' user=app password='it\'s a \\secret' sslmode=verify-full sslrootcert=/etc/ca.pem"#)
        #expect(string.servers == [Server(host: "db1", port: 6432), Server(host: "db2", port: 6432)])
        #expect(string.database == "my orders" && string.user == "app")
        #expect(string.password == #"it's a \secret"#)
        #expect(string.sslMode == .verifyFull && string.sslRootCert == "/etc/ca.pem")
        #expect(!string.redacted.contains("secret"), "the password is hidden: \(string.redacted)")
        #expect(try parse("host = db1 port = 5433 dbname = x").servers == [Server(host: "db1", port: 5433)])
        #expect(try parse("host=db1,db2 port=5433,5434 dbname=x").servers.map(\.port) == [5433, 5434])
        let byAddress = try parse("host=db1.internal,db2.internal hostaddr=10.0.0.1,10.0.0.2 dbname=x")
        #expect(byAddress.servers == [
            Server(host: "10.0.0.1", port: 5432, certificateName: "db1.internal"), Server(host: "10.0.0.2", port: 5432, certificateName: "db2.internal"),
        ])
        #expect(refusal("host=a,b hostaddr=10.0.0.1 dbname=x").contains("1 hostaddr for 2 hosts"))
        #expect(PostgresConnectionString.isConnectionString("host=db1 dbname=x"))
        #expect(PostgresConnectionString.isConnectionString("postgresql://u@h/db"))
        #expect(!PostgresConnectionString.isConnectionString("/var/lib/countdown/countdowns.sqlite"))
        #expect(!PostgresConnectionString.isConnectionString("weird=file.sqlite"))
    }

    @Test("sslmode keeps libpq's meanings; require with a root certificate verifies the chain")
    func sslModes() throws {
        for mode in ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] {
            #expect(try parse("postgres://u@h/db?sslmode=\(mode)").sslMode.rawValue == mode)
        }
        #expect(try parse("postgres://u@h/db?sslmode=require&sslrootcert=/ca.pem").sslMode == .verifyCA)
        #expect(try parse("postgres://u@h/db?sslmode=verify-full&sslrootcert=system").sslRootCert == "system")
        #expect(refusal("postgres://u@h/db?sslmode=sometimes").contains("unknown sslmode 'sometimes'"))
        #expect(refusal("postgres://u@h/db?sslcert=/c.pem").contains("sslcert and sslkey go together"))
        #expect(refusal("postgres://u@h/db?channel_binding=require").contains("channel_binding 'require' is not supported"))
        #expect(try parse("postgres://u@h/db?channel_binding=prefer").servers.count == 1)
    }

    @Test("Parameters not supported, ports that do not match and sessions that refuse writes are refused by name")
    func refusals() {
        let unknown = refusal("postgres://u@h/db?gssencmode=disable")
        #expect(unknown.contains("unknown parameter 'gssencmode'") && unknown.contains("known: host"), "\(unknown)")
        #expect(refusal("host=h keepalives_idle=5").contains("unknown parameter 'keepalives_idle'"))
        #expect(refusal("host=h1,h2,h3 port=1,2").contains("2 ports for 3 hosts"))
        #expect(refusal("postgres://u@h:99999/db").contains("port '99999'"))
        #expect(refusal("postgres://u@h/db?target_session_attrs=standby").contains("the store writes"))
        #expect(refusal("postgres://u@h/db?target_session_attrs=whatever").contains("unknown target_session_attrs 'whatever'"))
        #expect(refusal("postgres://u@h/db?connect_timeout=soon").contains("connect_timeout 'soon'"))
        #expect(refusal("host=h dbname='unclosed").contains("no closing quote"))
        #expect(refusal("postgres://u:secret@h/db?bad=1").contains("u:***@h") == true)
        #expect(!refusal("postgres://u:secret@h/db?bad=1").contains("secret"))
    }

    @Test("The PG* variables fill in what the string leaves out, and never override it")
    func environmentVariables() throws {
        let variables = [
            "PGHOST": "envhost", "PGPORT": "6543", "PGUSER": "envuser", "PGPASSWORD": "envpass", "PGDATABASE": "envdb",
            "PGSSLMODE": "require", "PGSSLROOTCERT": "/env/ca.pem", "PGAPPNAME": "envapp", "PGCONNECT_TIMEOUT": "4",
            "PGTARGETSESSIONATTRS": "primary",
        ]
        let filled = try parse("postgres://", variables)
        #expect(filled.servers == [Server(host: "envhost", port: 6543)])
        #expect(filled.user == "envuser" && filled.password == "envpass" && filled.database == "envdb")
        #expect(filled.sslMode == .verifyCA, "require with PGSSLROOTCERT verifies the chain")
        #expect(filled.applicationName == "envapp" && filled.connectTimeout == .seconds(4) && filled.targetSessionAttributes == .primary)
        let given = try parse("postgres://u:p@h:5000/db?sslmode=disable&application_name=mine&target_session_attrs=any", variables)
        #expect(given.servers == [Server(host: "h", port: 5000)] && given.user == "u" && given.password == "p" && given.database == "db")
        #expect(given.sslMode == .disable && given.applicationName == "mine" && given.targetSessionAttributes == .any)
        // Nothing given anywhere: the system user, a database of its name, Debian's socket folder.
        let bare = try parse("")
        #expect(bare.user == "me" && bare.database == "me" && bare.servers == [Server(host: "/var/run/postgresql", port: 5432)])
        #expect(try PostgresConnectionString("host=h", environment: environment(), defaultApplicationName: "countdown").applicationName == "countdown")
    }

    @Test("The password file answers for the first matching line, and is ignored when others may read it")
    func passwordFile() throws {
        let folder = try TemporaryFolder()
        let file = folder.path("pgpass")
        try """
            # comment
            other:5432:*:app:wrong
            db\\:1:5432:orders:app:first
            *:*:*:app:any-host
            localhost:5432:*:app:socket
            """.write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        #expect(try parse("host=db:1 dbname=orders user=app passfile=\(file)").password == "first")
        #expect(try parse("host=elsewhere dbname=orders user=app", ["PGPASSFILE": file]).password == "any-host")
        #expect(try parse("host=elsewhere dbname=orders user=nobody", ["PGPASSFILE": file]).password == nil)
        #expect(try parse("host=h dbname=orders user=app password=given passfile=\(file)").password == "given")
        // ~/.pgpass when nothing names a file.
        try FileManager.default.copyItem(atPath: file, toPath: folder.path(".pgpass"))
        chmod(folder.path(".pgpass"), 0o600)
        #expect(try parse("host=elsewhere dbname=orders user=app", home: folder.url.path).password == "any-host")
        // ~/.postgresql/root.crt, as libpq: then require verifies the chain.
        try FileManager.default.createDirectory(atPath: folder.path(".postgresql"), withIntermediateDirectories: true)
        #expect(try parse("host=h sslmode=require", home: folder.url.path).sslMode == .require)
        #expect(FileManager.default.createFile(atPath: folder.path(".postgresql/root.crt"), contents: Data()))
        let withRoot = try parse("host=h sslmode=require", home: folder.url.path)
        #expect(withRoot.sslMode == .verifyCA && withRoot.sslRootCert == folder.path(".postgresql/root.crt"))
        chmod(file, 0o644)
        #expect(try parse("host=db:1 dbname=orders user=app passfile=\(file)").password == nil, "a file others may read is ignored, as libpq does")
    }
}
