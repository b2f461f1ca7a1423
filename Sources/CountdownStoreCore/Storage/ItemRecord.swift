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
    /// The rule the countdown was started under, if any.
    package var rule: CountdownRule?
    /// A debounced countdown's maximum wait: the longest its duration grows.
    package var maxWaitMs: Int64?

    /// A row with every column given.
    package init(
        id: Int64?, key: String, group: String?, kind: CountdownKind, policy: CountdownPolicy, state: CountdownState,
        durationMs: Int64?, generation: Int64, startOffsetMs: Int64, gapAtStartMs: Int64, startedAtMs: Int64,
        pausedMs: Int64, pausedAtMs: Int64?, deadlineMs: Int64?, finalElapsedMs: Int64?, endedAtMs: Int64?,
        expiredAtMs: Int64?, payload: CountdownPayload?, updatedAtMs: Int64, rule: CountdownRule? = nil,
        maxWaitMs: Int64? = nil
    ) {
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
        self.rule = rule
        self.maxWaitMs = maxWaitMs
    }
}
