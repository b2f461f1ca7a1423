import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The views of an SQLite file as the `sqlite3` command line reads them, with no help from the
/// library: ISO-8601 instants and the remaining time, computed at query time.
@Suite("Views on SQLite")
struct ViewSQLiteTests {
    @Test(
        "sqlite3 at the command line shows the items with ISO-8601 instants and remaining time",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func sqlite3CommandLineReadsTheViews() async throws {
        let folder = try TemporaryFolder()
        let before = Date()
        let store = try CountdownStore(path: folder.path())
        try await store.start("order-1042", duration: .minutes(15), group: "payments")
        try await store.close()

        let ran = try HelperProcess.run(
            URL(fileURLWithPath: "/usr/bin/sqlite3"),
            [folder.path(), "SELECT key, group_name, state, remaining_ms, deadline_at FROM active_countdowns"])
        // Remaining time goes down by the real time that passed meanwhile, however slow the
        // machine (plus a few ms for the whole milliseconds each clock reading is rounded to).
        let passedMs = Int64(Date().timeIntervalSince(before) * 1000) + 5
        let text = ran.stdout
        let fields = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").map(String.init)
        #expect(ran.status == 0)
        #expect(fields.count == 5, "\(text)")
        #expect(fields.prefix(3) == ["order-1042", "payments", "running"])
        let remaining = try #require(Int64(fields[3]))
        #expect(remaining <= 900_000 && remaining >= 900_000 - passedMs, "\(remaining) ms left after \(passedMs) ms")
        #expect(ViewTests.isISO(fields[4]), "\(fields[4])")
    }
}
