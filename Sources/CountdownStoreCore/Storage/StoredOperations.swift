import Foundation

/// The store's clocks at one instant, with the checkpoint they were extrapolated from, as an
/// engine's own operations read them (see ``StoredOperations``).
package struct OperationInstant: Sendable, Hashable {
    /// W now.
    package var wall: Int64
    /// A now.
    package var active: Int64
    /// G now.
    package var gap: Int64
    /// Whether the active timeline advances now.
    package var ticking: Bool
    /// W at the checkpoint.
    package var baseWall: Int64
    /// W's floor at the checkpoint.
    package var baseFloor: Int64
    /// A at the checkpoint.
    package var baseActive: Int64
    /// G at the checkpoint.
    package var baseGap: Int64
}

extension OperationInstant {
    /// The instant `time`.
    init(_ time: ClocksNow) {
        self.init(
            wall: time.wall, active: time.active, gap: time.gap, ticking: time.ticking,
            baseWall: time.base.heartbeatAt, baseFloor: time.base.wallFloor, baseActive: time.base.active,
            baseGap: time.base.gap)
    }
}

/// What one of an engine's own operations did to the item it names.
package struct StoredOutcome: Sendable {
    /// What happened: `started`, `replaced`, `active` (a start refused: the key's item is
    /// active), `kept`, `cancelled`, `extended`, `not_found`, `wrong_state`, `too_long` or
    /// `past_max_wait`.
    package var outcome: String
    /// The item as the operation left it (as it is, for a refusal); `nil` for `not_found`.
    package var item: ItemRecord?
    /// How late the expiry the operation recorded first was, on the item's own timeline: `nil`
    /// when it recorded none.
    package var lateMs: Int64?

    /// An outcome with its item.
    package init(outcome: String, item: ItemRecord?, lateMs: Int64?) {
        self.outcome = outcome
        self.item = item
        self.lateMs = lateMs
    }
}

/// A transaction whose database runs some of the store's operations itself, in functions of the
/// store's schema that any client can call (a SQL contract): the store calls them instead of
/// writing rows, so that each of these operations has one implementation on that engine, the
/// one other languages call.
///
/// Each runs in the transaction, at the instant it is given, and writes its rows and events
/// (each event numbered as every writer's are). A refusal comes back as an outcome, not an
/// error: the expiry the operation found due and recorded first stays recorded.
package protocol StoredOperations {
    /// Starts a countdown (a stopwatch without `durationMs`) under `key`; `whenActive` is
    /// `refuse`, `keep` or `replace` (``WhenActive``).
    func start(
        key: String, durationMs: Int64?, group: String?, payload: CountdownPayload?, policy: CountdownPolicy,
        rule: CountdownRule?, maxWaitMs: Int64?, whenActive: String, at instant: OperationInstant
    ) throws -> StoredOutcome
    /// Starts each of `items` together, as a start with `keep` each: one outcome for each, in
    /// order. Only their key, duration, group, payload, policy and rule count.
    func start(each items: [ItemRecord], at instant: OperationInstant) throws -> [StoredOutcome]
    /// Cancels the running or paused item under `key`.
    func cancel(key: String, at instant: OperationInstant) throws -> StoredOutcome
    /// Adds `byMs` to the duration of the active countdown under `key`, in a new generation.
    func extend(key: String, byMs: Int64, at instant: OperationInstant) throws -> StoredOutcome
    /// Claims the next events of the consumer `consumer` for the reader `claimant` (see
    /// ``CountdownStore/claimEvents(consumer:claimant:filter:probing:)``): those `filter` lets
    /// through, at most `maxEvents`, expiries of a generation their key moved on from left out.
    /// Empty: nothing to claim now.
    func claim(
        consumer: String, claimant: String, maxEvents: Int, clockMs: Int64, timeoutMs: Int64, wallMs: Int64,
        kinds: [String]?, group: String?, key: String?
    ) throws -> [EventRecord]
    /// Records that the reader `claimant` handled the events of its claim up to `eventID`, and
    /// renews the claim; `false`, changing nothing, when the acknowledgement is stale.
    func acknowledge(
        consumer: String, claimant: String, eventID: Int64, clockMs: Int64, timeoutMs: Int64, wallMs: Int64
    ) throws -> Bool
}
