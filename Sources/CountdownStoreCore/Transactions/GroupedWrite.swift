import Foundation

/// One write waiting to be committed with others: its body, and where its caller waits.
///
/// The write's value never travels through the group as an untyped value: the body keeps it in
/// its caller's ``WriteValue`` (typed), and the group only learns whether the write succeeded.
final class GroupedWrite: @unchecked Sendable {
    // `@unchecked Sendable`: `outcome` and `continuation` are set by the task that leads the group
    // holding this write, before it resumes the caller, which reads them only after it is resumed
    // (the lock of ``WriteGroups`` orders the rest).
    let operation: WriteOperation
    let notifies: Bool
    /// The write's own work, in the group's transaction: it keeps its value in its caller's box.
    let body: @Sendable (WriteTransaction, ClocksNow) throws -> Void
    /// When the caller asked: its duration counts from here (the wait included).
    let asked = ContinuousClock.now
    /// For the start of a key, how a group may insert it with the group's other new keys.
    let start: GroupedStart?
    /// For the start of a key, keeps the countdown a group inserted for its caller.
    let keepStarted: @Sendable (ItemRecord, ClocksNow) -> Void
    /// Whether the write committed (its value is in its caller's box) or was refused; `nil`
    /// until its group gives it an outcome.
    var outcome: Result<Void, CountdownError>?
    /// Where the caller waits: queued for a group, or for the group it leads to end.
    var continuation: CheckedContinuation<GroupRole, Never>?

    /// Resumes the caller, if it waits (once: the continuation is used up).
    func resume(_ role: GroupRole) {
        // Read under no lock: only the task that leads the group holding this write reaches it,
        // and the continuation was set before the write was queued or its group's task began.
        let continuation = self.continuation
        self.continuation = nil
        continuation?.resume(returning: role)
    }

    init(
        _ operation: WriteOperation, notifies: Bool, start: GroupedStart? = nil,
        keepStarted: @escaping @Sendable (ItemRecord, ClocksNow) -> Void = { _, _ in },
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> Void
    ) {
        self.operation = operation
        self.notifies = notifies
        self.start = start
        self.keepStarted = keepStarted
        self.body = body
    }
}

/// Where a grouped write's value waits for its caller, typed: set inside the group's
/// transaction (again, should the write run once more by itself), read by the caller once the
/// group has given the write its outcome.
final class WriteValue<T: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: set by the task that commits the write's group, read by the caller
    // after that task resumed it (see ``GroupedWrite``).
    var value: T?
}

/// The start of a key as a group inserts it together with its other new keys (one statement
/// where the engine can): the item at the group's instant, and its event. A key that turns out to
/// exist runs the write's own body instead, which decides as it would alone (refuse, keep, replace).
struct GroupedStart: Sendable {
    let key: String
    let item: @Sendable (ClocksNow) -> ItemRecord
    let event: @Sendable (ItemRecord, ClocksNow) -> EventRecord
}

/// What a waiting caller is resumed for.
enum GroupRole: Sendable {
    /// Its write has its outcome.
    case done
    /// It leads these writes (its own first) in the next transaction; `siblings` callers of the
    /// group before were just answered, are not in this group, and may be about to write again.
    case lead([GroupedWrite], siblings: Int)
}
