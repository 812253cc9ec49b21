import FerryCore

/// `[ui] bell`: when the queue empties (nothing running, queued or waiting for a retry after something was),
/// the terminal's bell rings once, so a user in another window hears that the work is done.
public struct QueueBell: Sendable {
    private var hadWork = false

    public init() {}

    /// Whether this snapshot is the moment to ring.
    public mutating func rings(for snapshot: QueueSnapshot) -> Bool {
        let work = snapshot.totals.count.contains { state, count in count > 0 && state.isPending }
        defer { hadWork = work }
        return hadWork && !work
    }
}
