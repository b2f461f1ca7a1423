import CSQLiteShim
import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// Other processes' writers beside a busy ticker, with real processes of the `countdown` tool:
/// a writer that waits for the write lock says so, a ticker's pause between two batches lets it
/// in, and opening the store changes nothing of its log files that it need not.
extension RealProcesses {
    @Suite(
        "Writers beside a busy ticker",
        .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
    struct WritersBesideTickerTests {
        /// A connection of this test's own that holds the write lock of the store at `path` until
        /// ``release()``: a writer of another process must wait meanwhile.
        final class LockHolder: Sendable {
            let queue: DatabaseQueue

            init(_ path: String) throws {
                var configuration = Configuration()
                configuration.allowsUnsafeTransactions = true
                queue = try DatabaseQueue(path: path, configuration: configuration)
                try queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            }

            func release() throws {
                try queue.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
            }

            /// Whether a writer of another process says it waits for the lock (see shim.c).
            var othersWait: Bool {
                queue.writeWithoutTransaction { db in countdown_writers_waiting(db.sqliteConnection, 1) == 1 }
            }
        }

        /// A store at `path` with its log files in place, left open (as a running ticker leaves it).
        static func openStore(_ path: String) async throws -> CountdownStore {
            let store = try CountdownStore(path: path)
            try await store.start("first", duration: .hours(1))
            return store
        }

        @Test("A `countdown start` that waits for the write lock says so while it waits, and no longer once it wrote")
        func waitingWriterSaysSo() async throws {
            let folder = try TemporaryFolder()
            let path = folder.path("w.sqlite")
            let store = try await Self.openStore(path)
            let holder = try LockHolder(path)
            #expect(!holder.othersWait, "nobody waits yet")
            let writer = try HelperProcess(["--db", path, "start", "waiting", "1h"], executable: countdownBinary)
            try await eventually("the waiting `countdown start` says it waits", limit: 8) { holder.othersWait }
            try holder.release()
            _ = try await writer.waitForExit(seconds: 30)
            #expect(!holder.othersWait, "the writer that wrote no longer says it waits")
            #expect(try await store.countdown("waiting") != nil)
            try await store.close()
        }

        @Test("A ticker's pause between batches goes on until the writer of another process that waits has the lock")
        func pauseLetsTheWaitingWriterIn() async throws {
            let folder = try TemporaryFolder()
            let path = folder.path("p.sqlite")
            let store = try await Self.openStore(path)
            let engine = try #require(store.engine as? SQLiteEngine)
            let holder = try LockHolder(path)
            let writer = try HelperProcess(["--db", path, "start", "waiting", "1h"], executable: countdownBinary)
            try await eventually("the waiting `countdown start` says it waits", limit: 8) { holder.othersWait }
            // The pause (none of its own, a bound far beyond the test's) begins while the writer
            // waits behind the lock this test holds; the lock is released meanwhile.
            let pause = Task { await engine.leaveWritesToOthers(for: .zero, waitingAtMost: .seconds(60)) }
            try await Task.sleep(for: .milliseconds(100))
            try holder.release()
            await pause.value
            // The pause ended only once the writer had the lock: it no longer waits.
            #expect(!holder.othersWait, "the pause ended while a writer of another process still waited")
            _ = try await writer.waitForExit(seconds: 30)
            #expect(try await store.countdown("waiting") != nil)
            try await store.close()
        }

        @Test(
            "Opening the store as root leaves the WAL's owner and inode times alone when the owner is already the database's",
            .enabled(if: geteuid() == 0))
        func noNeedlessChangeOfOwner() async throws {
            let folder = try TemporaryFolder()
            let path = folder.path("o.sqlite")
            let store = try await Self.openStore(path)
            func changed(_ file: String) throws -> timespec {
                var status = stat()
                guard stat(file, &status) == 0 else { throw CountdownError(.storageFailure, "no \(file)") }
                return status.st_ctim
            }
            // The -wal file alone: a reader writes its marks into the -shm file, which changes its times.
            let before = try changed(path + "-wal")
            // Later than the coarse clock of the file system's times, so that a change would show.
            try await Task.sleep(for: .milliseconds(50))
            let shown = try HelperProcess.run(countdownBinary, ["--db", path, "show", "first", "--json"])
            #expect(shown.status == 0, "countdown show: \(shown.stderr)")
            let after = try changed(path + "-wal")
            #expect(before.tv_sec == after.tv_sec && before.tv_nsec == after.tv_nsec, "the -wal file's owner was set again")
            try await store.close()
        }

        @Test("A log file made by root for a database of another owner is still given the database's owner", .enabled(if: geteuid() == 0))
        func ownerStillFollowsTheDatabase() async throws {
            let folder = try TemporaryFolder()
            let path = folder.path("u.sqlite")
            let store = try await Self.openStore(path)
            try await store.close()
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
            #expect(chown(path, 4242, 4242) == 0)
            let started = try HelperProcess.run(countdownBinary, ["--db", path, "start", "second", "1h"])
            #expect(started.status == 0, "countdown start: \(started.stderr)")
            // The tool closed the store, and SQLite removed the WAL: open one that stays.
            let reopened = try CountdownStore(path: path)
            try await reopened.start("third", duration: .hours(1))
            for file in [path + "-wal", path + "-shm"] {
                let attributes = try FileManager.default.attributesOfItem(atPath: file)
                #expect((attributes[.ownerAccountID] as? NSNumber)?.intValue == 4242, "\(file) is not the database owner's")
            }
            try await reopened.close()
        }
    }
}
