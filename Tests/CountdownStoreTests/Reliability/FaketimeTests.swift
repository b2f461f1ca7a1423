import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// libfaketime's `faketime` wrapper, whose presence says the package is installed.
let faketimeBinary = "/usr/bin/faketime"

extension RealProcesses {
    /// The real binary under libfaketime with `FAKETIME_DONT_FAKE_MONOTONIC=1`: only the wall
    /// clock moves, as when someone sets the system clock. No early expiry, no extension, a clock
    /// event recorded, and nothing of the fake left behind.
    ///
    /// The library is preloaded into the tool itself, not through the `faketime` wrapper: the
    /// wrapper creates a semaphore named by its own process ID in `/dev/shm` and refuses to start
    /// when one of that name exists ("faketime: sem_open: File exists"), and a wrapper that was
    /// killed leaves its semaphore behind; in a long run a new wrapper gets that ID again, and the
    /// tool never started.
    ///
    /// (With a positive offset, libdispatch's own worker-pool timer spins a core under libfaketime
    /// in any Swift program; the store's sleeps do not use dispatch timers, so its timing holds.)
    @Suite("Clock under libfaketime", .enabled(if: FileManager.default.fileExists(atPath: libfaketime)))
    struct FaketimeTests {
        @Test("countdown run under a wall clock moved ±1 h, ±24 h fires at the real deadline and leaves the store on real time", arguments: ["+1h", "-1h", "+1d", "-1d"])
        func runUnderAFakedClock(offset: String) async throws {
            let folder = try TemporaryFolder()
            let path = folder.path()
            let store = try CountdownStore(path: path)
            try await store.start("soon", duration: .milliseconds(1500))
            let started = try #require(try await store.countdown("soon")?.startedAt)
            try await store.close()

            // Through a shell that execs the tool (same pid), as the fleet's hosts: preloaded
            // straight into a Swift program its parent starts, libfaketime leaves the program
            // without its arguments (it prints its help and exits).
            let run = try HelperProcess(
                ["--db", path, "run", "--consumer", "fake"], executable: countdownBinary, shell: "exec",
                environment: ["LD_PRELOAD": libfaketime, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"])
            let reader = try readOnly(path)
            try await eventually("the countdown expired", watching: run) {
                try reader.read { db in try String.fetchOne(db, sql: "SELECT state FROM countdowns WHERE key = 'soon'") } == "expired"
            }
            try await Task.sleep(for: .milliseconds(300))
            run.kill(SIGTERM)
            let lines = await run.finish()
            #expect(run.process.terminationStatus == 0)
            let line = try #require(lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first)
            #expect((line["late_ms"] as? Int).map { $0 >= 0 && $0 < 1000 } == true, "fired at the real deadline: \(line)")
            #expect(line["deadline_at"] as? String == StoreTime.iso8601(started.addingTimeInterval(1.5)), "neither early nor extended")

            // Back on the real clock: the store did not keep the fake.
            let after = try CountdownStore(path: path)
            let now = try await after.now()
            #expect(abs(now.wall - Date().millisecondsSince1970) < 5_000, "the store clock is real time, not \(offset)")
            let edits = try await after.recentEvents(kinds: [.clockEdited], limit: 10)
            #expect(!edits.isEmpty, "the faked clock was recorded as an edit")
            let fresh = try await after.start("after", duration: .minutes(1))
            #expect(abs(fresh.startedAt.timeIntervalSinceNow) < 5, "new items start on real time")
            try await after.close()
        }
    }
}
