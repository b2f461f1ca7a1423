/// The events a write transaction appended, kept for its metrics until it commits.
struct EventTally: Sendable {
    /// One appended event: its kind, the policy of its item (if it has one), its group, its lateness.
    struct Entry: Sendable {
        var kind: String
        var policy: CountdownPolicy?
        var group: String?
        var lateMs: Int64?
    }

    var entries: [Entry] = []
}
