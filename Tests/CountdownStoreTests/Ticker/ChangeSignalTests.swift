import Testing

@testable import CountdownStoreCore

/// Who a change wakes: a reader of one group's events sleeps through another group's expiry
/// batches, and wakes for its own, for any other change, and at its alarm.
@Suite("Change signal")
struct ChangeSignalTests {
    /// Waits on `signal` for `group`'s events (an alarm a minute ahead) in a task of its own,
    /// once `signal` shows it waiting.
    static func waiter(_ signal: ChangeSignal, _ clock: VirtualClock, group: String?) async throws -> Task<Void, any Error> {
        let version = signal.version
        let before = signal.waitingGroups.count
        let task = Task {
            try await signal.wait(after: version, orUntilBoot: clock.bootMilliseconds + 60_000, on: clock, forEventsOf: group)
        }
        // Bounded: the task registers its wait at once.
        for _ in 0..<100_000 where signal.waitingGroups.count == before { await Task.yield() }
        try #require(signal.waitingGroups.count == before + 1, "the waiter is waiting")
        return task
    }

    @Test("Another group's expiry batch wakes the readers of no group and of that group, not the readers of other groups")
    func scopedBumps() async throws {
        let signal = ChangeSignal()
        let clock = VirtualClock()
        let vip = try await Self.waiter(signal, clock, group: "vip")
        let sale = try await Self.waiter(signal, clock, group: "sale")
        let everyone = try await Self.waiter(signal, clock, group: nil)
        signal.bump(eventsOfGroups: ["sale", "tenant-1"])
        try await sale.value
        try await everyone.value
        #expect(signal.waitingGroups == ["vip"], "the VIP's reader sleeps on")
        // Any change that is not another group's batch alone wakes it.
        signal.bump()
        try await vip.value
        #expect(signal.waitingGroups.isEmpty)
    }

    @Test("A reader of one group wakes for a batch that holds its group's expiries, at its alarm, and at once for a change made before it waited")
    func ownGroupAlarmAndEarlierChange() async throws {
        let signal = ChangeSignal()
        let clock = VirtualClock()
        let vip = try await Self.waiter(signal, clock, group: "vip")
        signal.bump(eventsOfGroups: ["sale", "vip"])
        try await vip.value

        let later = try await Self.waiter(signal, clock, group: "vip")
        signal.bump(eventsOfGroups: ["sale"])
        #expect(signal.waitingGroups == ["vip"])
        clock.advance(by: .seconds(61))
        try await later.value

        // A batch of another group that committed between the reader's look and its wait ends
        // the wait at once: the reader looks again rather than miss a change of its own.
        let version = signal.version
        signal.bump(eventsOfGroups: ["sale"])
        try await signal.wait(after: version, orUntilBoot: clock.bootMilliseconds + 60_000, on: clock, forEventsOf: "vip")
        #expect(signal.waitingGroups.isEmpty)
    }
}
