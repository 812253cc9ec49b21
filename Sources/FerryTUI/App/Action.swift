import FerryCore

/// Which items the list shows (keys 1..5).
public enum ListView: Int, Sendable, CaseIterable {
    case all = 1, active, queued, done, failed

    public var title: String {
        switch self {
        case .all: return "all"
        case .active: return "active"
        case .queued: return "queued"
        case .done: return "done"
        case .failed: return "failed"
        }
    }

    /// The states the view shows (nil: every state).
    public var states: [TransferState]? {
        self == .all ? nil : TransferState.allCases.filter(includes)
    }

    public func includes(_ state: TransferState) -> Bool {
        switch self {
        case .all: return true
        case .active: return state == .running || state == .waiting
        case .queued: return state == .queued || state == .paused
        case .done: return state == .completed
        case .failed: return state == .failed || state == .cancelled
        }
    }
}

/// What a key means on the list and detail screens; the keymap binds keys to these.
public enum Action: Sendable, Hashable {
    case selectUp, selectDown, pageUp, pageDown, selectFirst, selectLast
    case openDetail, back
    case togglePause, togglePauseAll
    case cancel, retry
    /// `mark` marks or unmarks the item; `markAll` marks the view (or clears the marks).
    case mark, markAll
    /// Retry the failed items of the view; clear its finished items (asks).
    case retryFailed, clearFinished
    case remove, removeDeletingPartial
    case moveItemDown, moveItemUp
    case addDownload, addUpload
    case filter
    /// The next order of the rows (QueueSort).
    case cycleSort
    case showView(ListView)
    case concurrencyUp, concurrencyDown
    case limitItem, limitGlobal
    /// `quit` leaves the transfers to the engine; `stopEngine` stops them and the engine (after asking).
    case help, quit, stopEngine
}
