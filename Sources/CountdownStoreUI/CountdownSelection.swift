import CountdownStore

/// Which countdowns and stopwatches a ``CountdownListModel`` follows.
public enum CountdownSelection: Sendable, Hashable {
    /// The items in the states `state` names, of one group or of every group (`nil`), in the
    /// order ``CountdownStore/list(_:group:limit:)`` gives them.
    case items(state: StateFilter = .active, group: String? = nil)
    /// These keys, in any state, in the order `list` would give them; a key with no item has no row.
    case keys([String])

    /// Every running and paused item.
    public static let active = CountdownSelection.items()

    /// The running and paused items of `group`.
    public static func group(_ group: String) -> CountdownSelection { .items(group: group) }

    /// Whether beats can change this selection's rows: only running items count.
    var hasActiveItems: Bool {
        switch self {
        case .items(let state, _): state != .expired && state != .cancelled
        case .keys: true
        }
    }

    /// Whether `item` belongs to the selection, by state and group (for items that a beat brought).
    func includes(_ item: Countdown) -> Bool {
        switch self {
        case .keys(let keys):
            return keys.contains(item.key)
        case .items(let state, let group):
            guard group == nil || item.group == group else { return false }
            switch state {
            case .active: return item.state.isActive
            case .running: return item.state == .running
            case .paused: return item.state == .paused
            case .expired: return item.state == .expired
            case .cancelled: return item.state == .cancelled
            case .all: return true
            }
        }
    }
}
