import Foundation

/// Where the next page of ``CountdownStore/list(_:group:limit:after:)`` begins.
///
/// Pass it back unchanged with the same filter and group. A walk through every page lists each
/// item at most once; items that change state meanwhile (a countdown that reaches zero between
/// two pages) are listed where they were when their source was read, or not at all. It is
/// `Codable`, so a cursor can travel through an HTTP API.
public struct ListCursor: Sendable, Hashable, Codable {
    /// The filter the walk lists.
    var filter: StateFilter
    /// The group the walk lists, if one.
    var group: String?
    /// Where the walk is among running and paused items; `nil` once it has moved on to ended ones.
    var active: ActiveCursor?
    /// Where the walk is among ended items, once there.
    var ended: EndedPosition?
}

/// One page of ``CountdownStore/list(_:group:limit:after:)``.
public struct CountdownPage: Sendable, Hashable {
    /// The items of this page, in the filter's order.
    public var items: [Countdown]
    /// Where the next page begins, or `nil` when this page is the last.
    public var next: ListCursor?
}

/// Where a walk through ended items (newest first) is in each of its sources.
struct EndedPosition: Sendable, Hashable, Codable {
    /// The last item listed: its end instant and key. Recorded items go on strictly after it.
    var last: SortPosition?
    /// The last countdown listed that had come due unrecorded, per policy: its deadline and key.
    var wall: SortPosition?
    var active: SortPosition?
}

extension CountdownStore {
    /// Running and/or paused items from `cursor` on: countdowns by remaining time (running ones
    /// not yet due), then stopwatches by key.
    static func activeSlice(
        _ tx: any RepositoryReading, _ now: ClocksNow, group: String?, states: Set<CountdownState>, limit: Int,
        after cursor: ActiveCursor?
    ) throws -> (items: [ItemRecord], next: ActiveCursor?) {
        let orderTime = cursor?.time ?? now.clocks
        var ranked: [(remaining: Int64, item: ItemRecord)] = []
        let inStopwatches = cursor != nil && cursor?.remainingMs == nil
        if !inStopwatches {
            if states.contains(.running) {
                for policy in CountdownPolicy.allCases {
                    let timeline = orderTime.timeline(policy)
                    let after = cursor.flatMap { c in
                        c.remainingMs.map { SortPosition(value: $0 + timeline, key: c.key) }
                    }
                    ranked += try tx.running(
                        policy: policy, group: group, after: after, notDueBy: now.timeline(policy), limit: limit
                    ).map { ($0.sortRemainingMs(at: orderTime), $0) }
                }
            }
            if states.contains(.paused) {
                let after = cursor.flatMap { c in c.remainingMs.map { SortPosition(value: $0, key: c.key) } }
                ranked += try tx.paused(group: group, after: after, limit: limit).map {
                    ($0.sortRemainingMs(at: orderTime), $0)
                }
            }
            ranked.sort { ($0.remaining, $0.item.key) < ($1.remaining, $1.item.key) }
            ranked = Array(ranked.prefix(limit))
        }
        var page = ranked.map { (remaining: Optional($0.remaining), item: $0.item) }
        if page.count < limit {
            let afterKey = inStopwatches ? cursor?.key : nil
            page += try tx.activeStopwatches(states, group: group, afterKey: afterKey, limit: limit - page.count)
                .map { (remaining: nil, item: $0) }
        }
        let next =
            page.count == limit
            ? page.last.map { ActiveCursor(time: orderTime, remainingMs: $0.remaining, key: $0.item.key) } : nil
        return (page.map(\.item), next)
    }

    /// Expired and/or cancelled items from `position` on, newest first: each ordered by the
    /// instant it ended (for an expired one, the instant it reached zero), then by key, both
    /// descending. Countdowns that have reached zero without their expiry recorded yet come from
    /// the deadline indexes, the others from the indexes of recorded ends; the sources are merged.
    static func endedSlice(
        _ tx: any RepositoryReading, _ now: ClocksNow, group: String?, states: Set<CountdownState>, sinceMs: Int64?,
        limit: Int, after position: EndedPosition?
    ) throws -> (items: [ItemRecord], next: EndedPosition?) {
        enum Source { case wall, active, recorded }
        var candidates: [(end: SortPosition, source: Source, item: ItemRecord)] = []
        if states.contains(.expired) {
            for policy in CountdownPolicy.allCases {
                let before = policy == .wall ? position?.wall : position?.active
                let due = try tx.runningLatestFirst(
                    policy: policy, dueBy: now.timeline(policy), group: group, before: before, limit: limit)
                for item in due {
                    let end = item.dueAtMs(at: now)
                    if let sinceMs, end < sinceMs { break }
                    candidates.append(
                        (SortPosition(value: end, key: item.key), policy == .wall ? .wall : .active, item))
                }
            }
            candidates += try tx.expired(sinceMs: sinceMs, group: group, after: position?.last, limit: limit)
                .map { (SortPosition(value: $0.expiredAtMs ?? 0, key: $0.key), .recorded, $0) }
        }
        if states.contains(.cancelled) {
            candidates += try tx.cancelled(group: group, after: position?.last, limit: limit)
                .map { (SortPosition(value: $0.endedAtMs ?? 0, key: $0.key), .recorded, $0) }
        }
        candidates.sort { ($0.end.value, $0.end.key) > ($1.end.value, $1.end.key) }
        let page = candidates.prefix(limit)
        var next = position ?? EndedPosition()
        for candidate in page {
            next.last = candidate.end
            let deadline = SortPosition(value: candidate.item.deadlineMs ?? 0, key: candidate.item.key)
            switch candidate.source {
            case .wall: next.wall = deadline
            case .active: next.active = deadline
            case .recorded: break
            }
        }
        return (page.map(\.item), page.count == limit ? next : nil)
    }

    /// One page of the items in the states `filter` names, in its order; see
    /// ``list(_:group:limit:after:)``.
    static func listPage(
        _ tx: any RepositoryReading, _ now: ClocksNow, filter: StateFilter, group: String?, limit: Int,
        after cursor: ListCursor?
    ) throws -> (items: [ItemRecord], next: ListCursor?) {
        let activeStates: Set<CountdownState> =
            switch filter {
            case .active, .all: [.running, .paused]
            case .running: [.running]
            case .paused: [.paused]
            case .expired, .cancelled: []
            }
        let endedStates: Set<CountdownState> =
            switch filter {
            case .expired: [.expired]
            case .cancelled: [.cancelled]
            case .all: [.expired, .cancelled]
            case .active, .running, .paused: []
            }
        var items: [ItemRecord] = []
        if !activeStates.isEmpty && cursor?.ended == nil {
            let slice = try activeSlice(
                tx, now, group: group, states: activeStates, limit: limit, after: cursor?.active)
            if let next = slice.next {
                return (slice.items, ListCursor(filter: filter, group: group, active: next, ended: nil))
            }
            items = slice.items
        }
        guard !endedStates.isEmpty, items.count < limit else { return (items, nil) }
        let slice = try endedSlice(
            tx, now, group: group, states: endedStates, sinceMs: nil, limit: limit - items.count, after: cursor?.ended)
        return (
            items + slice.items, slice.next.map { ListCursor(filter: filter, group: group, active: nil, ended: $0) }
        )
    }
}
