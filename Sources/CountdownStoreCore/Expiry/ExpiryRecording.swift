import Foundation

// Recording expiries inside a write transaction: marking each countdown that came due expired,
// with its expiry event. Moving the clocks records those due (`Time/CountdownStore+ClockStep.swift`),
// as do the operations that find one; this folder calls nothing but the transaction.

extension CountdownStore {
    /// Records the expiry of at most `limit` running countdowns due at `now` on the timelines
    /// whose soonest deadline (in `timelines`) has been reached, each with its expiry event;
    /// returns them, and the soonest deadline on each timeline of those left due (`nil`: none
    /// left).
    ///
    /// When no more than `limit` are due, they are all recorded, oldest first (the most overdue on
    /// its own timeline came due earliest). When more are due (a backlog), the batch is shared
    /// between groups (``fairBatch(_:_:on:oldest:limit:rotation:)``): every group with a due
    /// countdown has its oldest ones in it, so that no group waits behind another's backlog.
    static func recordDueExpiries(
        _ tx: WriteTransaction, _ now: ClocksNow, on timelines: SoonestDeadlines, limit: Int,
        rotation: Locked<MemoryState>? = nil
    ) throws -> ([ItemRecord], SoonestDeadlines?) {
        var due: [ItemRecord] = []
        // Only the timelines whose soonest deadline has been reached.
        for policy in CountdownPolicy.allCases where timelines[policy] != nil {
            due += try tx.dueForExpiry(policy: policy, dueBy: now.timeline(policy), limit: limit + 1)
        }
        due.sort(by: { Self.recordedBefore($0, $1, now) })
        var left: SoonestDeadlines?
        if due.count > limit {
            let chosen = try fairBatch(tx, now, on: timelines, oldest: due, limit: limit, rotation: rotation)
            var soonest = SoonestDeadlines()
            for item in due where !chosen.keys.contains(item.key) {
                guard let deadline = item.deadlineMs else { continue }
                switch item.policy {
                case .wall: soonest.wall = min(soonest.wall ?? deadline, deadline)
                case .active: soonest.active = min(soonest.active ?? deadline, deadline)
                }
            }
            left = soonest
            due = chosen.items
        }
        var events: [EventRecord] = []
        events.reserveCapacity(due.count)
        for index in due.indices { events.append(expiry(&due[index], now)) }
        try tx.recordExpiries(due, events: events)
        return (due, left)
    }

    /// The order of recording: the most overdue on its own timeline first, then by key.
    static func recordedBefore(_ lhs: ItemRecord, _ rhs: ItemRecord, _ now: ClocksNow) -> Bool {
        (lhs.sortRemainingMs(at: now), lhs.key) < (rhs.sortRemainingMs(at: now), rhs.key)
    }

    /// How many groups one batch of a backlog visits at most, going on from where the last one
    /// stopped: a store of more groups than this shares its batches among them in turn.
    static let groupsVisitedPerBatch = 256

    /// One batch of a backlog, `limit` countdowns, shared between the groups that have any due:
    /// the oldest due of each group visited (an equal share of the batch for each, at least one),
    /// then, in what is left of the batch, the oldest due of all (`oldest`: the `limit + 1`
    /// oldest, in the order of recording). Within a group the countdowns chosen are always its
    /// oldest due, so each group's expiries are recorded oldest first. The countdowns of no group
    /// count as one group. Returns the countdowns chosen, in the order of recording, and their keys.
    static func fairBatch(
        _ tx: WriteTransaction, _ now: ClocksNow, on timelines: SoonestDeadlines, oldest: [ItemRecord], limit: Int,
        rotation: Locked<MemoryState>?
    ) throws -> (items: [ItemRecord], keys: Set<String>) {
        var dueBy = SoonestDeadlines()
        for policy in CountdownPolicy.allCases where timelines[policy] != nil {
            switch policy {
            case .wall: dueBy.wall = now.timeline(.wall)
            case .active: dueBy.active = now.timeline(.active)
            }
        }
        // The groups with a countdown due: those of no group first, then the named ones from
        // where the last batch stopped.
        var groups: [String?] = []
        var noGroup = false
        for policy in CountdownPolicy.allCases where dueBy[policy] != nil && !noGroup {
            noGroup = try !tx.dueForExpiry(policy: policy, dueBy: now.timeline(policy), groups: [nil], limit: 1)
                .isEmpty
        }
        if noGroup { groups.append(nil) }
        let start = rotation?.withLock { $0.groupRotation.after } ?? ""
        let budget = groupsVisitedPerBatch
        var visited = try tx.runningGroups(after: start, limit: budget, dueBy: dueBy)
        // Where the next batch goes on: after the last group visited, or from the first again.
        var next = visited.count == budget ? visited.last?.name ?? "" : ""
        if visited.count < budget, !start.isEmpty {
            // Past the last group: the visit goes on from the first, up to where it started.
            let wrapped = try tx.runningGroups(after: "", limit: budget - visited.count, dueBy: dueBy)
            // Up to the first group visited already (compared by name alone: the database's
            // collation orders them).
            let seen = Set(visited.map(\.name))
            let before = wrapped.prefix { !seen.contains($0.name) }
            visited += before
            if before.count == wrapped.count, visited.count == budget { next = visited.last?.name ?? "" }
        }
        let dueGroups = visited.filter(\.due).map(\.name)
        let room = max(0, limit - groups.count)
        if dueGroups.count > room, room > 0 { next = dueGroups[room - 1] }
        groups += dueGroups.prefix(room).map { Optional($0) }
        rotation?.withLock { $0.groupRotation.after = next }
        var chosen: [ItemRecord] = []
        var keys: Set<String> = []
        if groups.count > 1 {
            let share = max(1, limit / groups.count)
            // A group with a whole share among the oldest due of all has its oldest there, in
            // order, before the end of every timeline's part of them (which may stop short of
            // that timeline's due): only the other groups are read. The big group of a backlog
            // is not read again, through the index entries its recorded countdowns leave behind.
            let lastOfTimeline = CountdownPolicy.allCases.compactMap { policy in
                oldest.lastIndex { $0.policy == policy }
            }
            let cutOff = lastOfTimeline.min() ?? 0
            let batchGroups = Set(groups)
            var inOldest: [String?: Int] = [:]
            var served: Set<String?> = []
            for (index, item) in oldest.enumerated() where index <= cutOff && batchGroups.contains(item.group) {
                inOldest[item.group, default: 0] += 1
                if inOldest[item.group] == share { served.insert(item.group) }
            }
            let read = groups.filter { !served.contains($0) }
            for policy in CountdownPolicy.allCases where dueBy[policy] != nil && !read.isEmpty {
                for item in try tx.dueForExpiry(
                    policy: policy, dueBy: now.timeline(policy), groups: read, limit: share)
                where keys.insert(item.key).inserted {
                    chosen.append(item)
                }
            }
            var taken: [String?: Int] = [:]
            for item in oldest where served.contains(item.group) && taken[item.group, default: 0] < share {
                taken[item.group, default: 0] += 1
                if keys.insert(item.key).inserted { chosen.append(item) }
            }
            // Both timelines of a group may have given a share: each group keeps its oldest.
            chosen.sort(by: { Self.recordedBefore($0, $1, now) })
            var perGroup: [String?: Int] = [:]
            chosen = chosen.filter { item in
                perGroup[item.group, default: 0] += 1
                return perGroup[item.group, default: 0] <= share
            }
            keys = Set(chosen.map(\.key))
        }
        for item in oldest where chosen.count < limit && keys.insert(item.key).inserted {
            chosen.append(item)
        }
        chosen.sort(by: { Self.recordedBefore($0, $1, now) })
        return (chosen, keys)
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

/// Where the next expiry batch of a backlog goes on visiting the groups of running countdowns:
/// a store of more groups than one batch visits shares its batches among them in turn.
struct GroupRotation {
    /// The last group visited (`""`: start from the first).
    var after = ""
}
