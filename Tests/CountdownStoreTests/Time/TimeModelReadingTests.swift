import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Readings of the clocks (SPEC section 3), on an SQLite store: a transaction that straddles a
/// millisecond counts it once, on a clock that moves at every reading. The behaviours of the time
/// model on every engine are in `EngineSuite/TimeModelTests.swift`.
@Suite("Time model readings")
struct TimeModelReadingTests {
    @Test("Regression: a transaction that straddles a millisecond counts it once, on every clock")
    func straddlingTransactionsCountEachMillisecondOnce() async throws {
        // A clock on which every reading of the boot clock finds a millisecond gone by: each
        // transaction straddles one. The store used to extrapolate with one reading and anchor
        // the new checkpoint at another, so W, A and G gained a millisecond per transaction.
        let clock = SteppingClock()
        let folder = try TemporaryFolder()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        try await store.heartbeat()
        let start = try await store.now()
        let bootAtStart = clock.peekBoot
        for _ in 0..<200 { try await store.heartbeat() }
        let end = try await store.now()
        let passed = clock.peekBoot - bootAtStart
        #expect(end.wall - start.wall <= passed, "W moved \(end.wall - start.wall) ms in \(passed) ms")
        #expect(end.active + end.gap - start.active - start.gap <= passed, "A + G moved more than \(passed) ms")
        #expect(end.wall - start.wall >= passed - 2, "W kept up with the boot clock")
    }
}

/// A clock that moves one millisecond every time its boot clock is read.
final class SteppingClock: StoreClock, @unchecked Sendable {
    // Safe: `boot` and `system` are read and written under `lock`.
    private let lock = NSLock()
    private var boot: Int64 = 1_000_000
    private var system: Int64 = 1_795_000_000_000

    var systemMilliseconds: Int64 { lock.withLock { system } }
    var bootMilliseconds: Int64 {
        lock.withLock {
            boot += 1
            system += 1
            return boot
        }
    }
    var bootIdentity: String? { "stepping-boot" }
    /// The boot clock without moving it.
    var peekBoot: Int64 { lock.withLock { boot } }

    func sleep(untilBootMilliseconds deadline: Int64) async throws {
        while bootMilliseconds < deadline { try Task.checkCancellation() }
    }
}
