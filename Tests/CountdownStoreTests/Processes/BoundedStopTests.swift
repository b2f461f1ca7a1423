import CountdownStorePostgres
import Foundation
import Logging
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

extension RealProcesses {
/// A host asked to stop ends within its lease duration plus a few seconds, whatever the database
/// does (SPEC section 7): a PostgreSQL server gone (`pg_ctl stop -m immediate`) or hung (its
/// processes stopped with SIGSTOP, connections open, nothing answering), and it says in a
/// warning what it could not write. And on SQLite, a store that only reads never waits behind
/// another process's write lock.
///
/// Each PostgreSQL scenario has a server of its own. Every wait is bounded by far more than the
/// lease: the tests assert only that a stop ended before the bound, never how long it took.
@Suite("Bounded stopping", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)), .timeLimit(.minutes(3)))
struct BoundedStopTests {
    /// The tool's lease duration (its default).
    static let lease = CountdownStore.Configuration().leaseDuration
    /// How long a stop may take before the test fails: the lease plus a wide margin for a busy
    /// machine (a stop that waits for the database without a bound takes a minute, or forever).
    static let limitSeconds = Double(lease.milliseconds) / 1000 + 10

    /// What a test does to its server.
    enum Failure: String, CaseIterable, CustomTestStringConvertible {
        /// `pg_ctl stop -m immediate`: connections drop, nothing listens.
        case gone
        /// The postmaster and its backends stopped with SIGSTOP: connections stay open, nothing answers.
        case hung

        var testDescription: String { rawValue }
    }

    /// A server of the test's own, in the state `failure` asks for, for as long as `body` runs;
    /// then it is resumed (if hung) and discarded.
    static func withServer(_ body: (TestPostgres, _ fail: @escaping @Sendable (Failure) async throws -> Void) async throws -> Void) async throws {
        let server = try TestPostgres.dedicated()
        let frozen = Locked<[Int32]>([])
        defer {
            // Resumed before it is stopped, so that the cleanup works.
            for pid in frozen.withLock({ $0 }).reversed() { kill(pid, SIGCONT) }
            server.discard()
        }
        try await body(server) { failure in
            switch failure {
            case .gone:
                try await onThread { Result { try server.pgCtl(["stop", "-m", "immediate"]) } }.get()
            case .hung:
                let pids = try serverProcesses(server)
                frozen.withLock { $0 = pids }
                for pid in pids { kill(pid, SIGSTOP) }
            }
        }
    }

    /// The postmaster of `server`, then each of its children (the backends and helpers).
    static func serverProcesses(_ server: TestPostgres) throws -> [Int32] {
        let folder = try #require(server.folder)
        let pidFile = try String(contentsOfFile: "\(folder)/data/postmaster.pid", encoding: .utf8)
        let postmaster = try #require(pidFile.split(separator: "\n").first.flatMap { Int32($0.trimmingCharacters(in: .whitespaces)) })
        let children = (try? String(contentsOfFile: "/proc/\(postmaster)/task/\(postmaster)/children", encoding: .utf8)) ?? ""
        return [postmaster] + children.split(separator: " ").compactMap { Int32($0) }
    }

    /// The URL of a new schema on `server`.
    static func url(_ server: TestPostgres) -> String {
        server.url + "?sslmode=disable&schema=" + PostgresFixtures.newSchema()
    }

    /// Runs `body` in a task of its own and waits for it at most `seconds` (real time): `nil`,
    /// with an issue naming `what`, when it has not returned by then (the task is left behind).
    static func bounded<T: Sendable>(
        _ what: String, seconds: Double = limitSeconds, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T? {
        let task = Task { try await body() }
        let deadline = Date().addingTimeInterval(seconds)
        let done = Locked(false)
        Task {
            _ = await task.result
            done.withLock { $0 = true }
        }
        while !done.withLock({ $0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        guard done.withLock({ $0 }) else {
            Issue.record("\(what) did not return within \(Int(seconds)) s")
            task.cancel()
            return nil
        }
        return try await task.value
    }

    // MARK: countdown run

    @Test(
        "countdown run --consumer on PostgreSQL, asked to stop with SIGTERM while its server is gone or hung, exits 0 within the bound with a warning of what it could not write",
        .enabled(if: TestPostgres.serverBinariesAvailable), arguments: Failure.allCases)
    func runStops(_ failure: Failure) async throws {
        try await Self.withServer { server, fail in
            let url = Self.url(server)
            let folder = try TemporaryFolder()
            let started = try HelperProcess.run(countdownBinary, ["--db", url, "start", "due", "200ms"], limit: 60)
            #expect(started.status == 0, "\(started.stderr)")
            // The tool's stdout goes to a file, read while it runs.
            let output = folder.path("run.out")
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let run = try HelperProcess(
                ["--db", url, "run", "--consumer", "c"], executable: countdownBinary, shell: "exec >>'\(output)'; exec")
            try await eventually("run printed the expiry", watching: run) {
                return (try? String(contentsOfFile: output, encoding: .utf8))?.contains("\"key\":\"due\"") == true
            }
            try await Task.sleep(for: .milliseconds(1500))  // heartbeats go on: the run holds the lease

            try await fail(failure)
            try await Task.sleep(for: .seconds(1))  // the run's next statements meet the failure
            run.kill(SIGTERM)
            _ = try await run.waitForExit(seconds: Self.limitSeconds, status: 0)
            let stderr = run.stderr
            #expect(
                stderr.contains("warning") && stderr.contains("could not write the final heartbeat and give up the countdown lease"),
                "the stop says what it could not write: \(stderr.suffix(3000))")
        }
    }

    // MARK: In process

    @Test(
        "A cancelled ticker and close() return within the bound, with warnings, while the PostgreSQL server is gone or hung",
        .enabled(if: TestPostgres.serverBinariesAvailable), arguments: Failure.allCases)
    func closeReturns(_ failure: Failure) async throws {
        try await Self.withServer { server, fail in
            let records = RecordingLogHandler.Records()
            let configuration = CountdownStore.Configuration(logger: Logger(label: "stop") { _ in RecordingLogHandler(records: records) })
            let store = try await CountdownStore(postgresURL: Self.url(server), configuration: configuration)
            try await store.start("due", duration: .milliseconds(100))
            let ticker = CountdownTicker(store: store)
            let running = Task { try await ticker.run() }
            // A reader of a named consumer holds a claim on the expiry and never acknowledges it.
            let mailer = try await store.consumer("mailer")
            var events = try await mailer.events(.expiries).makeAsyncIterator()
            #expect(try await events.next()?.key == "due")
            try await eventually("the ticker holds the lease") {
                if case .held = ticker.leaseStatus { return true }
                return false
            }

            try await fail(failure)
            try await Task.sleep(for: .seconds(1))
            running.cancel()
            _ = try await Self.bounded("the cancelled ticker's run()") { _ = await running.result }
            _ = try await Self.bounded("close()") { try await store.close() }
            let warnings = records.all.filter { $0.0 == .warning }.map(\.1)
            #expect(
                warnings.contains { $0.hasPrefix("could not write the final heartbeat and give up the countdown lease") },
                "the ticker says it could not give up the lease: \(warnings)")
            #expect(
                warnings.contains { $0.hasPrefix("could not give up the claims of consumer mailer or write the final heartbeat and give up the lease while closing") },
                "close() says what it could not write: \(warnings)")
            withExtendedLifetime(events) {}  // its claim stays taken until the store closed
        }
    }

    @Test(
        "With a stop timeout longer than a pause of its server, close() waits for the server and leaves nothing to run out",
        .enabled(if: TestPostgres.serverBinariesAvailable))
    func stopTimeoutWaitsThroughAPause() async throws {
        try await Self.withServer { server, fail in
            let records = RecordingLogHandler.Records()
            var configuration = CountdownStore.Configuration(logger: Logger(label: "stop") { _ in RecordingLogHandler(records: records) })
            configuration.stopTimeout = .seconds(60)
            let url = Self.url(server)
            let store = try await CountdownStore(postgresURL: url, configuration: configuration)
            try await store.start("screen", duration: .minutes(5), policy: .active)
            try await store.heartbeat()
            #expect(try await store.clockStatus().leaseHolder != nil, "the store holds the lease")

            try await fail(.hung)
            // The server answers again after longer than the default bound (the lease, 2 s).
            let resumed = Task {
                try await Task.sleep(for: .seconds(4))
                for pid in try Self.serverProcesses(server) { kill(pid, SIGCONT) }
            }
            _ = try await Self.bounded("close()", seconds: 60) { try await store.close() }
            try await resumed.value
            let warnings = records.all.filter { $0.0 == .warning }.map(\.1)
            #expect(!warnings.contains { $0.contains("could not") }, "close() wrote everything: \(warnings)")
            let reopened = try await CountdownStore(postgresURL: url)
            #expect(try await reopened.clockStatus().leaseHolder == nil, "the final heartbeat freed the lease")
            try await reopened.close()
        }
    }

    // MARK: SQLite

    @Test(
        "countdown show on SQLite exits 0, without waiting for it, while another process holds the write lock (BEGIN IMMEDIATE)",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func showWhileAnotherProcessWrites() async throws {
        let folder = try TemporaryFolder()
        let db = folder.path("store.sqlite")
        let started = try HelperProcess.run(countdownBinary, ["--db", db, "start", "order-1", "15m"])
        #expect(started.status == 0, "\(started.stderr)")
        let locked = folder.path("locked")
        let done = folder.path("done")
        let hold = folder.path("hold.sh")
        try """
            touch '\(locked)'
            i=0
            while [ ! -e '\(done)' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            """.write(toFile: hold, atomically: true, encoding: .utf8)
        // sqlite3 takes the write lock, says so, and holds it until the test is done or 30 s pass.
        let holder = try HelperProcess(
            [db, "BEGIN IMMEDIATE;", ".shell sh \(hold)", "COMMIT;"], executable: URL(fileURLWithPath: "/usr/bin/sqlite3"))
        defer { _ = FileManager.default.createFile(atPath: done, contents: nil) }
        try await eventually("sqlite3 holds the write lock", watching: holder) { FileManager.default.fileExists(atPath: locked) }
        let writer = try HelperProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), ["-cmd", ".timeout 0", db, "BEGIN IMMEDIATE;"])
        #expect(writer.status != 0 && writer.stderr.contains("locked"), "the lock is held: \(writer.status) \(writer.stderr)")

        // A store that waited for the lock at opening or closing would wait the whole busy
        // timeout (then go on without it): the bound is below that.
        let limit = Double(CountdownStore.SQLiteOptions().busyTimeout.milliseconds) / 2000
        let shown = try HelperProcess.run(countdownBinary, ["--db", db, "show", "order-1", "--json"], limit: limit)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("\"key\":\"order-1\""), "\(shown.stdout)")
        #expect(!FileManager.default.fileExists(atPath: done) && holder.process.isRunning, "the write lock was still held when show exited")

        _ = FileManager.default.createFile(atPath: done, contents: nil)
        _ = await holder.finish(limit: 30, status: 0)
    }
}
}
