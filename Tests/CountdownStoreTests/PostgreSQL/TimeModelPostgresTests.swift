import Foundation
import Testing

@testable import CountdownStoreCore

/// The time model where hosts read clocks of their own, which only PostgreSQL's hosts do (on
/// SQLite every process reads one boot clock): a host that counted time as gap before the
/// holder's checkpoint counted it active expires nothing early.
@Suite("Time model on PostgreSQL")
struct TimeModelPostgresTests {
    @Test(
        "Regression: a host that counted time as gap before the holder's checkpoint counted it active expires nothing early",
        arguments: [TestEngine.postgres])
    func readingBeforeTheHoldersCheckpointShiftsNothing(engine: TestEngine) async throws {
        // Two hosts whose clocks read 7 ms apart (as two hosts' readings of one server do). The
        // other host read the clocks while nobody held the lease, counting those 7 ms as gap;
        // the holder then took the lease with a checkpoint 7 ms earlier that counts them active.
        // The other host's next readings used to keep its gap and add the active time: A + G ran
        // 7 ms ahead of W there, and it recorded a countdown's expiry 7 ms before its deadline.
        // PostgreSQL alone: on SQLite every process reads one boot clock.
        let fixture = try Fixture(engine: engine)
        let ahead = VirtualClock(
            start: Date(millisecondsSince1970: fixture.clock.systemMilliseconds + 7),
            uptime: .milliseconds(fixture.clock.bootMilliseconds + 7))
        let holder = try await fixture.open()
        let other = try await fixture.open(clock: ahead)
        let before = try await other.now()
        #expect(before.active == 0 && before.gap == 7, "nobody ticks: the 7 ms are gap")

        try await holder.heartbeat()
        let started = try await holder.start("k", duration: .milliseconds(100))
        for step in 1...150 {
            fixture.clock.advance(by: .milliseconds(1))
            ahead.advance(by: .milliseconds(1))
            if step % 50 == 0 { try await holder.heartbeat() }
            let now = try await other.now()
            #expect(now.wall - now.active - now.gap == before.wall - 7, "W − (A + G) stays the checkpoint's at \(now)")
            if let seen = try await other.countdown("k"), seen.state == .expired {
                #expect(
                    seen.expiredAt?.millisecondsSince1970 == started.startedAt.millisecondsSince1970 + 100,
                    "expired when it reached zero, at step \(step), now \(now)")
            }
        }
        try await other.start("another", duration: .seconds(1))  // records the expiry of k
        let event = try #require(try await events(other, key: "k", kind: "expired").first)
        #expect(event.deadlineAtMs == started.startedAt.millisecondsSince1970 + 100)
        try await other.close()
        try await holder.close()
    }
}
