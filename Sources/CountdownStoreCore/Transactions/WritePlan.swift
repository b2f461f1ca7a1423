import Foundation

/// One write of the store's items, checked and planned: what it does (for its metrics and for
/// whether it moves the checkpoint) and its body. The same plan runs in the store's own
/// transaction, through group commit, or in a transaction the host holds
/// (``CountdownTransaction``): one implementation of each operation, whichever runs it.
struct WritePlan<T: Sendable>: Sendable {
    /// What the write does.
    let operation: WriteOperation
    /// How a group commit inserts the start of a new key with the group's other new keys (for
    /// the starts of single keys).
    var start: GroupedStart?
    /// Whether the write goes through group commit (a batch of starts is one write of its own).
    var grouped = true
    /// Whether the write records no expiry while a live lease is held: a named consumer's
    /// acknowledgement, which delivers what the holder's ticker records rather than doing its work.
    var leavesExpiriesToHolder = false
    /// Whether the write changes items or events, so that waiters (the ticker, event streams)
    /// look again once it commits (recorded expiries wake them whatever this says).
    var notifies = true
    /// The write itself, in a transaction whose clocks were moved to `now`.
    let body: @Sendable (WriteTransaction, ClocksNow) throws -> T

    init(
        _ operation: WriteOperation, start: GroupedStart? = nil, grouped: Bool = true,
        leavesExpiriesToHolder: Bool = false, notifies: Bool = true,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> T
    ) {
        self.operation = operation
        self.start = start
        self.grouped = grouped
        self.leavesExpiriesToHolder = leavesExpiriesToHolder
        self.notifies = notifies
        self.body = body
    }
}

extension CountdownStore {
    /// Runs `plan` in a transaction of the store's own: grouped with other callers' writes
    /// unless the plan says otherwise.
    func run<T: Sendable>(_ plan: WritePlan<T>) async throws(CountdownError) -> T {
        guard plan.grouped else {
            return try await writing(
                plan.operation, notifies: plan.notifies, leavingExpiriesToHolder: plan.leavesExpiriesToHolder,
                plan.body)
        }
        return try await groupedWriting(plan.operation, notifies: plan.notifies, plan.body)
    }

    /// Runs the start `plan`: the group inserts its key with the other new keys.
    func run(_ plan: WritePlan<Countdown>) async throws(CountdownError) -> Countdown {
        guard let start = plan.start else {
            return try await groupedWriting(plan.operation, notifies: plan.notifies, plan.body)
        }
        return try await groupedWriting(plan.operation, notifies: plan.notifies, start: start, plan.body)
    }

    /// Runs the change `plan`, whose refusal comes back as a value (so that an expiry it found
    /// commits whatever it says), and throws that refusal.
    func run(_ plan: WritePlan<Result<Countdown, CountdownError>>) async throws(CountdownError) -> Countdown {
        try await groupedWriting(plan.operation, notifies: plan.notifies, plan.body).get()
    }
}
