import Foundation

// Recording expiries inside a write transaction: marking each countdown that came due expired,
// with its expiry event. Moving the clocks records those due (`Time/CountdownStore+ClockStep.swift`),
// as do the operations that find one; this folder calls nothing but the transaction.

extension CountdownStore {
    /// Records the expiry of at most `limit` running countdowns due at `now` on the timelines
    /// whose soonest deadline (in `timelines`) has been reached, oldest first (the most overdue
    /// on its own timeline came due earliest), each with its expiry event; returns
    /// them, and the soonest deadline on each timeline of those left due (`nil`: none left).
    static func recordDueExpiries(
        _ tx: WriteTransaction, _ now: ClocksNow, on timelines: SoonestDeadlines, limit: Int
    ) throws -> ([ItemRecord], SoonestDeadlines?) {
        var due: [ItemRecord] = []
        // Only the timelines whose soonest deadline has been reached.
        for policy in CountdownPolicy.allCases where timelines[policy] != nil {
            due += try tx.dueForExpiry(policy: policy, dueBy: now.timeline(policy), limit: limit + 1)
        }
        due.sort { ($0.sortRemainingMs(at: now), $0.key) < ($1.sortRemainingMs(at: now), $1.key) }
        var left: SoonestDeadlines?
        if due.count > limit {
            var soonest = SoonestDeadlines()
            for item in due[limit...] {
                guard let deadline = item.deadlineMs else { continue }
                switch item.policy {
                case .wall: soonest.wall = min(soonest.wall ?? deadline, deadline)
                case .active: soonest.active = min(soonest.active ?? deadline, deadline)
                }
            }
            left = soonest
            due.removeSubrange(limit...)
        }
        var events: [EventRecord] = []
        events.reserveCapacity(due.count)
        for index in due.indices { events.append(expiry(&due[index], now)) }
        try tx.recordExpiries(due, events: events)
        return (due, left)
    }

    /// Records the expiry of a countdown, with its expiry event.
    static func expire(_ item: inout ItemRecord, _ tx: WriteTransaction, _ time: ClocksNow) throws {
        let event = expiry(&item, time)
        try tx.update(item)
        try tx.append(event)
    }

    /// Marks a countdown expired at `time` and returns its expiry event, writing nothing.
    static func expiry(_ item: inout ItemRecord, _ time: ClocksNow) -> EventRecord {
        let (deadlineAt, late) = item.expire(at: time)
        return EventRecord(
            .expired, item: item, at: time, deadlineAtMs: deadlineAt, firedAtMs: time.wall, lateMs: late,
            payload: item.payload)
    }

    /// `item` as a write must see it: a countdown that has come due but whose expiry is still to
    /// record (the writes before recorded a batch at most) has it recorded first, with its event,
    /// so that the change comes after it, as for every reader it already has.
    static func withDueExpiryRecorded(_ item: ItemRecord?, _ tx: WriteTransaction, _ time: ClocksNow) throws
        -> ItemRecord?
    {
        guard var item, item.isDue(at: time) else { return item }
        try expire(&item, tx, time)
        return item
    }
}
