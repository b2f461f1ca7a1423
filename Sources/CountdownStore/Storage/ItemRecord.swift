import Foundation

/// One row of the `countdowns` table, as stored.
package struct ItemRecord: Sendable, Hashable {
    package var id: Int64?
    package var key: String
    package var group: String?
    package var kind: CountdownKind
    package var policy: CountdownPolicy
    package var state: CountdownState
    package var durationMs: Int64?
    package var generation: Int64
    package var startOffsetMs: Int64
    package var gapAtStartMs: Int64
    package var startedAtMs: Int64
    package var pausedMs: Int64
    package var pausedAtMs: Int64?
    package var deadlineMs: Int64?
    package var finalElapsedMs: Int64?
    package var endedAtMs: Int64?
    package var expiredAtMs: Int64?
    package var payload: CountdownPayload?
    package var updatedAtMs: Int64

    /// A row with every column given.
    package init(id: Int64?, key: String, group: String?, kind: CountdownKind, policy: CountdownPolicy, state: CountdownState, durationMs: Int64?, generation: Int64, startOffsetMs: Int64, gapAtStartMs: Int64, startedAtMs: Int64, pausedMs: Int64, pausedAtMs: Int64?, deadlineMs: Int64?, finalElapsedMs: Int64?, endedAtMs: Int64?, expiredAtMs: Int64?, payload: CountdownPayload?, updatedAtMs: Int64) {
        self.id = id
        self.key = key
        self.group = group
        self.kind = kind
        self.policy = policy
        self.state = state
        self.durationMs = durationMs
        self.generation = generation
        self.startOffsetMs = startOffsetMs
        self.gapAtStartMs = gapAtStartMs
        self.startedAtMs = startedAtMs
        self.pausedMs = pausedMs
        self.pausedAtMs = pausedAtMs
        self.deadlineMs = deadlineMs
        self.finalElapsedMs = finalElapsedMs
        self.endedAtMs = endedAtMs
        self.expiredAtMs = expiredAtMs
        self.payload = payload
        self.updatedAtMs = updatedAtMs
    }
}

extension ItemRecord {
    /// Every column, in the order ``init(_:)`` and ``bind(_:)`` use: queries select exactly
    /// these, so rows decode by position rather than by name.
    static let columns = """
        id, key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, updated_at_ms
        """

    /// `SELECT <every column> FROM countdowns`.
    static let select = "SELECT \(columns) FROM countdowns"

    /// Inserts a new key, binding ``bind(_:)``'s values; does nothing when the key exists.
    static let insertNewSQL = """
        INSERT INTO countdowns (\(columns))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (key) DO NOTHING
        """

    static let updateSQL = """
        UPDATE countdowns SET id = ?1, key = ?2, group_name = ?3, kind = ?4, policy = ?5, state = ?6,
            duration_ms = ?7, generation = ?8, start_offset_ms = ?9, gap_at_start_ms = ?10, started_at_ms = ?11,
            paused_ms = ?12, paused_at_ms = ?13, deadline_ms = ?14, final_elapsed_ms = ?15, ended_at_ms = ?16,
            expired_at_ms = ?17, payload = ?18, updated_at_ms = ?19
        WHERE id = ?1
        """

    /// Decodes a row of ``columns``; a damaged value throws rather than traps.
    init(_ row: Columns) throws {
        id = try row.int(0)
        key = try row.text(1)
        group = row.optionalText(2)
        kind = try Self.decode(try row.text(3), as: CountdownKind.self, column: "kind")
        policy = try Self.decode(try row.text(4), as: CountdownPolicy.self, column: "policy")
        state = try Self.decode(try row.text(5), as: CountdownState.self, column: "state")
        durationMs = row.optionalInt(6)
        generation = try row.int(7)
        startOffsetMs = try row.int(8)
        gapAtStartMs = try row.int(9)
        startedAtMs = try row.int(10)
        pausedMs = try row.int(11)
        pausedAtMs = row.optionalInt(12)
        deadlineMs = row.optionalInt(13)
        finalElapsedMs = row.optionalInt(14)
        endedAtMs = row.optionalInt(15)
        expiredAtMs = row.optionalInt(16)
        payload = row.payload(17)
        updatedAtMs = try row.int(18)
    }

    private static func decode<T: RawRepresentable<String>>(_ raw: String, as: T.Type, column: String) throws -> T {
        guard let value = T(rawValue: raw) else {
            throw CountdownError(.unreadableDatabase, "unexpected \(column) \(quoted(raw)) in the countdowns table")
        }
        return value
    }

    /// Binds the values of ``columns``, in order.
    func bind(_ values: inout Bindings) {
        values.add(id)
        values.add(key)
        values.add(group)
        values.add(kind.rawValue)
        values.add(policy.rawValue)
        values.add(state.rawValue)
        values.add(durationMs)
        values.add(generation)
        values.add(startOffsetMs)
        values.add(gapAtStartMs)
        values.add(startedAtMs)
        values.add(pausedMs)
        values.add(pausedAtMs)
        values.add(deadlineMs)
        values.add(finalElapsedMs)
        values.add(endedAtMs)
        values.add(expiredAtMs)
        values.add(payload)
        values.add(updatedAtMs)
    }
}
