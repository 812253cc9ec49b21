import FerryModel

/// What the engine tells of its items, as typed callbacks (Alamofire's `EventMonitor` is the model): each one
/// has a default that does nothing, so a monitor implements only what it follows. They are called on the
/// engine's one event queue, in the order of the changes, never under its lock; a monitor that is slow holds
/// the next ones back, not the transfers.
///
/// Each real transition of an item is told once (`transitioned`), with the state before it, whatever its ranges
/// or attempts did: a monitor keeps no table of what it was told. Other changes in the same state (an attempt,
/// a limit, a name, a resumable upload's place on the server) are `updated`.
public protocol TransferMonitor: Sendable {
    /// Whether it hears `added`: each item an add queues then costs a snapshot (a million lines added are a
    /// million snapshots). A monitor that follows what happens to items (hooks, aria2's notifications) does without.
    var hearsAdds: Bool { get }
    /// An add queued a new item (queued, or paused when added so).
    func added(_ item: TransferSnapshot)
    /// The item's state changed from `before` to `item.state`: told once per transition.
    func transitioned(_ item: TransferSnapshot, from before: TransferState)
    /// Something else of the item changed, in the same state.
    func updated(_ item: TransferSnapshot)
    /// The item left the queue (a remove).
    func removed(_ id: TransferID)
    /// A tree's walk went on (a directory listed or failed) or was held, resumed or ended (TreeWalker).
    func walked(_ walk: WalkProgress)
}

extension TransferMonitor {
    public var hearsAdds: Bool { false }
    public func added(_ item: TransferSnapshot) {}
    public func transitioned(_ item: TransferSnapshot, from before: TransferState) {}
    public func updated(_ item: TransferSnapshot) {}
    public func removed(_ id: TransferID) {}
    public func walked(_ walk: WalkProgress) {}
}

/// Several monitors as one, each told in turn (Alamofire's `CompositeEventMonitor`).
public struct CompositeMonitor: TransferMonitor {
    public let monitors: [any TransferMonitor]
    /// Whether any of them hears adds (asked once: it is read for every item an add appends).
    public let hearsAdds: Bool

    public init(_ monitors: [any TransferMonitor]) {
        self.monitors = monitors
        hearsAdds = monitors.contains { $0.hearsAdds }
    }
    public func added(_ item: TransferSnapshot) { for monitor in monitors where monitor.hearsAdds { monitor.added(item) } }
    public func transitioned(_ item: TransferSnapshot, from before: TransferState) {
        monitors.forEach { $0.transitioned(item, from: before) }
    }
    public func updated(_ item: TransferSnapshot) { monitors.forEach { $0.updated(item) } }
    public func removed(_ id: TransferID) { monitors.forEach { $0.removed(id) } }
    public func walked(_ walk: WalkProgress) { monitors.forEach { $0.walked(walk) } }
}

/// One thing told to a monitor, on its way (TransferManager gathers them under its lock, in order).
enum Told: Sendable {
    case added(TransferSnapshot)
    case transitioned(TransferSnapshot, from: TransferState)
    case updated(TransferSnapshot)
    case removed(TransferID)
    case walked(WalkProgress)

    func tell(_ monitor: any TransferMonitor) {
        switch self {
        case let .added(item): monitor.added(item)
        case let .transitioned(item, before): monitor.transitioned(item, from: before)
        case let .updated(item): monitor.updated(item)
        case let .removed(id): monitor.removed(id)
        case let .walked(walk): monitor.walked(walk)
        }
    }
}
