import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Opening never refuses a file that SQLite itself opens and finds intact, and still refuses,
/// untouched, one that is damaged.
@Suite("Opening")
struct OpeningTests {
    /// The folder of files that real failures left behind.
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    /// Unpacks `name` (a `.tar.xz`) into `folder`.
    static func unpack(_ name: String, into folder: TemporaryFolder) throws {
        let tar = try HelperProcess(["xJf", fixtures.appendingPathComponent(name).path, "-C", folder.url.path], executable: URL(fileURLWithPath: "/bin/tar"))
        _ = tar.finishNow(limit: 60)
    }

    @Test("Regression: a store killed in the middle of a checkpoint (file shorter than its header says, the pages in the WAL) opens by itself, nothing lost")
    func killedMidCheckpoint() async throws {
        let folder = try TemporaryFolder()
        try Self.unpack("killed-mid-checkpoint.tar.xz", into: folder)
        let path = folder.path("store.sqlite")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let header = try #require(FileHandle(forReadingAtPath: path)).readData(ofLength: 100)
        let pages = header[28..<32].reduce(0) { $0 << 8 | Int($1) }
        #expect(pages * 4096 > size, "the fixture is still the case it stands for")

        let store = try CountdownStore(path: path)
        let diagnostics = try await store.diagnostics()
        #expect(diagnostics.integrity == ["ok"])
        #expect(try await store.list(.all, limit: 100).count == 21)
        try await store.start("after", duration: .seconds(60))
        try await store.close()
        let reader = try readOnly(path)
        let (integrity, count) = try await reader.read { db in
            (try String.fetchAll(db, sql: "PRAGMA integrity_check"), try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns") ?? 0)
        }
        #expect(integrity == ["ok"] && count == 22)
    }

    @Test("Regression: the fixture opens with `countdown list`, and `doctor` reports it intact", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
    func killedMidCheckpointWithTheTool() async throws {
        let folder = try TemporaryFolder()
        try Self.unpack("killed-mid-checkpoint.tar.xz", into: folder)
        let path = folder.path("store.sqlite")
        let list = try HelperProcess(["--db", path, "list", "--state", "all", "--json"], executable: countdownBinary)
        let listed = await list.finish(limit: 60).joined()
        let items = try #require(try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]], "\(list.stderr)")
        #expect(items.count == 21)
        let doctor = try HelperProcess(["--db", path, "doctor", "--json"], executable: countdownBinary)
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(await doctor.finish(limit: 60).joined().utf8)) as? [String: Any], "\(doctor.stderr)")
        #expect(report["integrity"] as? [String] == ["ok"] || report["integrity"] as? String == "ok", "\(report)")
    }

    @Test("Regression: a store killed after its migrations but before its first clock row opens by itself and starts its clocks")
    func missingFirstClockRow() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let queue = try DatabaseOpening.open(path: path, busyTimeout: .seconds(1), durability: .normal)
        try SQLiteMigrator().migrate(queue)
        try queue.close()

        let store = try CountdownStore(path: path, configuration: .init(clock: VirtualClock()))
        try await store.start("a", duration: .seconds(10))
        #expect(try await store.countdown("a")?.remaining == .seconds(10))
        try await store.close()
    }

    @Test("A store with countdowns but no clock row is damaged: refused, and not a byte written")
    func clockRowDeletedFromAUsedStore() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let store = try CountdownStore(path: path, configuration: .init(clock: VirtualClock()))
        try await store.start("a", duration: .seconds(10))
        try await store.grdb.write { db in try db.execute(sql: "DELETE FROM countdown_clock") }
        try await store.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        #expect(throws: CountdownError.self) { try CountdownStore(path: path) }
        do {
            _ = try CountdownStore(path: path)
        } catch {
            #expect(error.code == .unreadableDatabase && error.message.contains("countdown_clock row is missing"), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test("Opening waits for another connection's write lock instead of failing, for a new store and an existing one")
    func openingBesideAWriter() async throws {
        let folder = try TemporaryFolder()
        for fresh in [true, false] {
            let path = folder.path(fresh ? "fresh.sqlite" : "existing.sqlite")
            if !fresh { try await CountdownStore(path: path).close() }
            // Another connection holds the write lock for a while.
            let holder = try DatabaseQueue(path: path)
            let held = Locked(false)
            let release = Task.detached {
                try holder.inTransaction(.immediate) { _ in
                    held.withLock { value in value = true }
                    Thread.sleep(forTimeInterval: 0.3)
                    return .commit
                }
            }
            try await eventually("the other connection holds the lock", limit: 10) { held.withLock { value in value } }
            let store = try CountdownStore(path: path)
            try await store.start("k", duration: .seconds(60))
            _ = try await release.value
            try await store.close()
            try holder.close()
        }
    }
}
