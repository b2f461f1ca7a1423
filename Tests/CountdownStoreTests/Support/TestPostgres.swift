import Foundation
import Logging
import PostgresNIO
import Testing

/// The PostgreSQL server of the PostgreSQL suites: the one `COUNTDOWN_POSTGRES_URL` names
/// (`postgres://USER[:PASSWORD]@HOST:PORT/DB`), or else a throwaway server this test process
/// starts once, from the machine's PostgreSQL binaries (`pg_config --bindir`): `initdb` into a
/// temporary folder, run as the `postgres` user when the tests run as root (PostgreSQL refuses
/// root), listening on 127.0.0.1 and a socket in that folder. A watchdog process stops it and
/// removes the folder as soon as this test process has ended, however it ended.
struct TestPostgres: Sendable {
    let host: String
    let port: Int
    let username: String
    let password: String?
    let database: String
    /// The folder of a throwaway server (its socket, data, log, and PgBouncer's files); `nil`
    /// for a server named by `COUNTDOWN_POSTGRES_URL`.
    let folder: String?
    /// The folder of the server's binaries.
    let binaries: String

    /// The URL of the server's `database`, as the tool and the library take it.
    var url: String {
        "postgres://\(username)\(password.map { ":\($0)" } ?? "")@\(host):\(port)/\(database)"
    }

    /// The server, started at first use; every suite of the process shares it.
    static func shared() throws -> TestPostgres {
        try started.get()
    }

    private static let started: Result<TestPostgres, any Error> = Result {
        if let url = ProcessInfo.processInfo.environment["COUNTDOWN_POSTGRES_URL"], !url.isEmpty {
            return try existing(url)
        }
        return try throwaway()
    }

    /// A client configuration for this server's `database`.
    func configuration(database: String? = nil) -> PostgresClient.Configuration {
        PostgresClient.Configuration(
            host: host, port: port, username: username, password: password,
            database: database ?? self.database, tls: .disable)
    }

    /// Runs `body` with a client of this server, running for the body's duration; through the
    /// server's Unix socket with `viaSocket` (a throwaway server's, for one that refuses plain TCP).
    func withClient<T: Sendable>(
        database: String? = nil, viaSocket: Bool = false, _ body: (PostgresClient) async throws -> T
    ) async throws -> T {
        var configuration = configuration(database: database)
        if viaSocket, let folder {
            configuration = PostgresClient.Configuration(
                unixSocketPath: "\(folder)/.s.PGSQL.\(port)", username: username, password: password, database: database ?? self.database)
        }
        let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "test-postgres"))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    // MARK: Starting

    private static func existing(_ url: String) throws -> TestPostgres {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme),
              let host = components.host
        else { throw HarnessError("invalid COUNTDOWN_POSTGRES_URL \"\(url)\": expected postgres://USER@HOST:PORT/DB") }
        let database = String(components.path.drop { $0 == "/" })
        return TestPostgres(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: database.isEmpty ? "postgres" : database,
            folder: nil, binaries: try binaryFolder())
    }

    private static func throwaway(
        environment: [String: String] = [:], listenAddresses: String = "127.0.0.1", settings extra: [String] = [], hba: String? = nil
    ) throws -> TestPostgres {
        let binaries = try binaryFolder()
        let folder = try temporaryFolder()
        let asRoot = getuid() == 0
        if asRoot { try run("/bin/chown", ["postgres:postgres", folder]) }
        let port = try freeLocalPort()
        try runAsServer(asRoot, "\(binaries)/initdb", ["-D", "\(folder)/data", "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        if let hba {
            try hba.write(toFile: "\(folder)/data/pg_hba.conf", atomically: false, encoding: .utf8)
        }
        // fsync off: the suites kill hosts and restart the server cleanly; none simulates the
        // machine losing power, and CI runs them faster without a sync per commit.
        let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        try runAsServer(asRoot, "/usr/bin/env", settings + [
            "\(binaries)/pg_ctl",
            "-D", "\(folder)/data", "-l", "\(folder)/server.log", "-w", "-t", "60",
            "-o", (["-p \(port) -k \(folder) -c listen_addresses=\(listenAddresses) -c fsync=off -c max_connections=300"] + extra.map { "-c \($0)" }).joined(separator: " "),
            "start",
        ])
        try startWatchdog(folder: folder, binaries: binaries, asRoot: asRoot)
        return TestPostgres(host: "127.0.0.1", port: port, username: "postgres", password: nil, database: "postgres", folder: folder, binaries: binaries)
    }

    /// Whether this machine has the server binaries a throwaway server is started from.
    static var serverBinariesAvailable: Bool { (try? binaryFolder()) != nil }

    /// A throwaway server of the caller's own, for a test that restarts its server, terminates
    /// its connections or moves its clock (the shared one must stay up for the other suites).
    /// `environment` is the server processes' (e.g. libfaketime's `LD_PRELOAD`);
    /// `listenAddresses` its `listen_addresses` (loopback connections come from 127.0.0.1,
    /// which the server trusts). The caller ends it with ``discard()``; the watchdog does at the
    /// latest when the test process ends.
    /// `settings` are more of the server's settings (`name=value`, e.g. TLS's files), and `hba`
    /// the contents of its `pg_hba.conf`, if not initdb's (trust for everyone).
    static func dedicated(
        environment: [String: String] = [:], listenAddresses: String = "127.0.0.1", settings: [String] = [], hba: String? = nil
    ) throws -> TestPostgres {
        try throwaway(environment: environment, listenAddresses: listenAddresses, settings: settings, hba: hba)
    }

    /// A streaming standby of this throwaway server, made as operators make one
    /// (`pg_basebackup -R -X stream`) and started on a port of its own; it inherits the
    /// primary's settings at the time of the backup. The caller ends it with ``discard()``.
    func startStandby() throws -> TestPostgres {
        let asRoot = getuid() == 0
        let standby = try Self.temporaryFolder()
        if asRoot { try Self.run("/bin/chown", ["postgres:postgres", standby]) }
        let port = try freeLocalPort()
        try Self.runAsServer(asRoot, "\(binaries)/pg_basebackup", [
            "-h", host, "-p", "\(self.port)", "-U", username, "-D", "\(standby)/data", "-R", "-X", "stream", "--no-sync",
            // At once: the default waits for a spread checkpoint, minutes on a busy primary.
            "--checkpoint=fast",
        ])
        try Self.runAsServer(asRoot, "\(binaries)/pg_ctl", [
            "-D", "\(standby)/data", "-l", "\(standby)/server.log", "-w", "-t", "60",
            "-o", "-p \(port) -k \(standby) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
            "start",
        ])
        try Self.startWatchdog(folder: standby, binaries: binaries, asRoot: asRoot)
        return TestPostgres(host: "127.0.0.1", port: port, username: username, password: nil, database: database, folder: standby, binaries: binaries)
    }

    /// Runs `pg_ctl` on this throwaway server's data folder (as the `postgres` user when the
    /// tests run as root), e.g. `["restart", "-m", "fast"]`; waits for it, at most 60 s.
    func pgCtl(_ arguments: [String]) throws {
        guard let folder else { throw HarnessError("pg_ctl runs only on a throwaway server") }
        try Self.runAsServer(getuid() == 0, "\(binaries)/pg_ctl", ["-D", "\(folder)/data", "-l", "\(folder)/server.log", "-w", "-t", "60"] + arguments)
    }

    /// Stops this throwaway server (and its PgBouncer) at once and removes its folder.
    func discard() {
        guard let folder else { return }
        if let pid = try? String(contentsOfFile: "\(folder)/pgbouncer.pid", encoding: .utf8), let number = Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(number, SIGKILL)
        }
        try? pgCtl(["stop", "-m", "immediate"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Where `initdb` and `pg_ctl` are: `pg_config --bindir` (Debian keeps them off `PATH`).
    private static func binaryFolder() throws -> String {
        if let folder = try? run("/usr/bin/env", ["pg_config", "--bindir"]).trimmingCharacters(in: .whitespacesAndNewlines),
           FileManager.default.isExecutableFile(atPath: "\(folder)/pg_ctl") {
            return folder
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: >) where FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/pg_ctl") {
            return "/usr/lib/postgresql/\(version)/bin"
        }
        throw HarnessError("no PostgreSQL server binaries (pg_config --bindir, /usr/lib/postgresql/*/bin): install Debian's postgresql package, or set COUNTDOWN_POSTGRES_URL")
    }

    private static func temporaryFolder() throws -> String {
        var template = Array("/tmp/countdown-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("cannot create a temporary folder: errno \(errno)") }
        let folder = String(cString: made)
        chmod(folder, 0o755)
        return folder
    }

    /// Stops the server (and a PgBouncer) and removes the folder once this process has ended.
    private static func startWatchdog(folder: String, binaries: String, asRoot: Bool) throws {
        let server = asRoot ? "runuser -u postgres -- " : ""
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            [ -f '\(folder)/pgbouncer.pid' ] && kill -KILL "$(cat '\(folder)/pgbouncer.pid')" 2>/dev/null
            \(server)'\(binaries)/pg_ctl' -D '\(folder)/data' stop -m immediate
            rm -rf '\(folder)'
            """
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        watchdog.arguments = ["-c", script]
        // Nothing inherited: `swift test` (and a `tee` behind it) must not wait for this process.
        watchdog.standardInput = FileHandle.nullDevice
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try watchdog.run()
    }

    private static func runAsServer(_ asRoot: Bool, _ executable: String, _ arguments: [String]) throws {
        if asRoot {
            try run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments)
        } else {
            try run(executable, arguments)
        }
    }

    /// Runs a command to its end (at most 120 s) and returns its output; throws with its output
    /// when it fails. It is spawned and reaped directly (`posix_spawn`, `waitpid`): the server
    /// that `pg_ctl start` leaves behind inherits what a Foundation `Process` watches for its
    /// child's end, so such a `Process` would look alive for as long as the server runs.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("countdown-pg-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        #if canImport(Glibc)
        // Nothing else of the test process reaches the server: the descriptors it holds open
        // would count against the server's own (it refuses to start with too few) and keep
        // pipes that other children write to open.
        // (glibc 2.34 and later; looked up at run time, as Swift does not import it.)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        #endif
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw HarnessError("cannot start \(executable): error \(spawned)") }
        let command = ([executable] + arguments).joined(separator: " ")
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(120)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                throw HarnessError("\(command) did not finish within 120 s: \(text.suffix(2000))")
            }
            usleep(10_000)
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        // Exited normally with status 0: the low 7 bits (the signal) and the exit status are zero.
        guard status == 0 else {
            throw HarnessError("\(command) failed (wait status \(status)): \(text.suffix(2000))")
        }
        return text
    }

    // MARK: PgBouncer

    /// A PgBouncer in transaction-pooling mode in front of this server, started at first use
    /// (throwaway servers only); its port.
    func pgBouncerPort() throws -> Int {
        guard let folder else { throw HarnessError("PgBouncer runs only in front of the throwaway server") }
        return try Self.bouncers.withLock { ports in
            if let port = ports[folder] { return port }
            let port = try freeLocalPort()
            let configuration = """
                [databases]
                * = host=127.0.0.1 port=\(self.port) user=\(username)
                [pgbouncer]
                listen_addr = 127.0.0.1
                listen_port = \(port)
                unix_socket_dir = \(folder)
                auth_type = any
                pool_mode = transaction
                max_client_conn = 500
                default_pool_size = 40
                logfile = \(folder)/pgbouncer.log
                pidfile = \(folder)/pgbouncer.pid
                """
            let path = "\(folder)/pgbouncer.ini"
            try configuration.write(toFile: path, atomically: true, encoding: .utf8)
            let executable = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let executable else { throw HarnessError("no pgbouncer: install Debian's pgbouncer package") }
            if getuid() == 0 { try Self.run("/bin/chown", ["postgres:postgres", path]) }
            try Self.runAsServer(getuid() == 0, executable, ["-d", path])
            // `-d` returns once PgBouncer has forked, before the daemon listens (in a trace, it
            // binds after the command has exited): connect only once it does.
            let deadline = ContinuousClock.now + .seconds(10)
            while (try? LocalSocket(port: port)) == nil {
                guard ContinuousClock.now < deadline else {
                    let log = (try? String(contentsOfFile: "\(folder)/pgbouncer.log", encoding: .utf8)) ?? "(no log)"
                    throw HarnessError("PgBouncer does not listen on port \(port) within 10 s: \(log.suffix(2000))")
                }
                usleep(10_000)
            }
            ports[folder] = port
            return port
        }
    }

    private static let bouncers = HarnessLock<[String: Int]>([:])
}

/// A failure of the harness itself, with what to do about it.
struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A value behind a lock.
final class HarnessLock<Value>: @unchecked Sendable {
    // Safe: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
