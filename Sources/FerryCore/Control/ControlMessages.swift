import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// What goes over the engine's control socket: one JSON object per line, each way. A client sends
/// requests; the engine answers each with a reply carrying the request's `id`, and, after `subscribe`,
/// pushes updates (a full queue first, then only what changed). Versioned: a request of another version
/// gets an error reply. See EngineHost for what each verb does.
public enum ControlProtocol {
    /// 2: every change of the queue is one `command` (QueueCommand). 4: a command may be answered `working`
    /// before its reply (an older client would take that for the answer). 5: a limit of a whole batch
    /// (`Selection(batch:)`) is the batch's own, shared by its items (an older engine gave it to each item).
    public static let version = 5
    /// The longest request line the engine reads. An `add` is sent in parts well under it
    /// (ControlClient.add), so no list of URLs is too long.
    public static let maxRequest = 4 << 20
    /// The most an `add` request carries of specs, in bytes of their JSON (several requests make one batch).
    public static let addPart = 1 << 20
    /// The most specs one `add` request carries: the engine queues each request in one store transaction, and
    /// its state saves wait for that.
    public static let addPartItems = 10_000
    /// Updates are pushed at most this often.
    public static let updateInterval: TimeInterval = 0.2
    /// A command still under way says so this often (ControlReply.working).
    public static let workingInterval: TimeInterval = 2
}

public enum ControlVerb: String, Codable, Sendable, CaseIterable {
    /// The queue as the store keeps it, with live byte counts (`ferry list`): the window of `view`, and the
    /// rows in the view (`total`), so a long queue is listed page by page.
    case list
    /// Updates from now on: the window of `view` (the whole queue without one) and the counts, then what
    /// changed in the window (and the counts).
    case subscribe
    /// A subscriber's new view (scrolled, filtered): its window comes whole, then its changes.
    case view
    /// A change of the queue: `command`; the reply has its result.
    case command
    /// The engine stops its transfers (their `.part` files stay) and exits.
    case stop
}

public struct ControlRequest: Codable, Sendable, Equatable {
    public var v: Int = ControlProtocol.version
    public var id: Int
    public var verb: ControlVerb
    /// command: what to do.
    public var command: QueueCommand?
    /// list, subscribe, view: the rows asked for (nil: the whole queue).
    public var view: QueueView?

    public init(id: Int, verb: ControlVerb) {
        self.id = id
        self.verb = verb
    }

    public init(id: Int, command: QueueCommand) {
        self.id = id
        self.verb = .command
        self.command = command
    }
}

public struct ControlReply: Codable, Sendable, Equatable {
    public var id: Int?
    public var ok: Bool
    /// What went wrong, in words (an unknown id, a bad frame, an unknown verb...).
    public var error: String?
    /// `command`: what it did.
    public var result: CommandResult?
    /// `list`: the window's records, and the rows in the view.
    public var items: [StoredTransfer]?
    public var total: Int?
    /// `list`: the rate of each running item among `items` (what every surface shows: RateEstimator).
    public var rates: [ItemRate]?
    /// The engine's process id (every reply says it, for messages).
    public var pid: Int32?
    /// Not the answer yet: the engine is still working on the request (a command over a long selection) and
    /// says so every `ControlProtocol.workingInterval`; the client waits on while these come.
    public var working: Bool?

    public init(id: Int?, ok: Bool, error: String? = nil) {
        self.id = id
        self.ok = ok
        self.error = error
    }
}

/// A running item's rate in a `list` reply (the records a list answers with keep no rate).
public struct ItemRate: Codable, Sendable, Equatable {
    public var id: Int64
    public var bytesPerSecond: Double
    public init(id: Int64, bytesPerSecond: Double) {
        self.id = id
        self.bytesPerSecond = bytesPerSecond
    }
}

/// A change of the queue for a subscriber. `full`: `items` is the whole queue in order (the first update,
/// and again after the client fell behind); otherwise only the items that changed, `removed` those gone,
/// and `order` the ids in order when the order changed.
public struct ControlUpdate: Codable, Sendable, Equatable {
    public var full: Bool
    public var version: UInt64
    public var items: [TransferSnapshot]
    public var removed: [Int64]?
    public var order: [Int64]?
    public var totals: QueueTotals
    public var maxConcurrent: Int
    public var maxPerHost: Int
    public var downloadLimit: Int64?
    public var uploadLimit: Int64?
    /// A subscriber's window: where it sits in its view.
    public var window: QueueWindow?
    /// Items the client has whose change is only what moves while they run (bytes, rate, ETA).
    public var progress: [ItemProgress]?
    /// The trees' walks (QueueSnapshot.walks), whole each time (a few); nil: none.
    public var walks: [WalkProgress]?
}

/// One line from the engine.
public struct ControlMessage: Codable, Sendable {
    public var reply: ControlReply?
    public var update: ControlUpdate?

    public init(reply: ControlReply) { self.reply = reply }
    public init(update: ControlUpdate) { self.update = update }
}

extension ControlUpdate {
    /// The whole queue.
    init(full snapshot: QueueSnapshot) {
        self.init(full: true, version: snapshot.version, items: snapshot.items, removed: nil,
                  order: snapshot.items.map(\.id.rawValue), totals: snapshot.totals,
                  maxConcurrent: snapshot.maxConcurrent, maxPerHost: snapshot.maxPerHost,
                  downloadLimit: snapshot.downloadLimit, uploadLimit: snapshot.uploadLimit, window: snapshot.window)
        walks = snapshot.walks.isEmpty ? nil : snapshot.walks
    }

    /// What changed from `old` to `new`; nil when nothing did that the client shows: the window's rows, the
    /// counts, the settings, and (when `ratesDue`) the total rates. The version alone is no reason to write.
    init?(from old: QueueSnapshot, to new: QueueSnapshot, ratesDue: Bool) {
        var shown = old
        shown.version = new.version
        if !ratesDue {
            shown.totals.downloadBytesPerSecond = new.totals.downloadBytesPerSecond
            shown.totals.uploadBytesPerSecond = new.totals.uploadBytesPerSecond
        }
        guard shown != new else { return nil }
        let before = Dictionary(old.items.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var changed: [TransferSnapshot] = []
        var progress: [ItemProgress] = []
        for item in new.items {
            guard let was = before[item.id] else { changed.append(item); continue }
            if was == item { continue }
            if was.differsOnlyInProgress(from: item) { progress.append(item.itemProgress) } else { changed.append(item) }
        }
        let now = Set(new.items.map(\.id))
        let removed = old.items.map(\.id).filter { !now.contains($0) }
        let sameOrder = old.items.count == new.items.count && zip(old.items, new.items).allSatisfy { $0.id == $1.id }
        self.init(full: false, version: new.version, items: changed, removed: removed.isEmpty ? nil : removed.map(\.rawValue),
                  order: sameOrder ? nil : new.items.map(\.id.rawValue), totals: new.totals,
                  maxConcurrent: new.maxConcurrent, maxPerHost: new.maxPerHost,
                  downloadLimit: new.downloadLimit, uploadLimit: new.uploadLimit, window: new.window,
                  progress: progress.isEmpty ? nil : progress)
        walks = new.walks.isEmpty ? nil : new.walks
    }
}

extension QueueSnapshot {
    /// The queue after `update`: what a client keeps in step with the engine.
    public func applying(_ update: ControlUpdate) -> QueueSnapshot {
        var items = update.items
        if !update.full {
            var byID = Dictionary(self.items.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            for item in update.items { byID[item.id] = item }
            for moved in update.progress ?? [] { byID[moved.id] = byID[moved.id]?.with(moved) }
            for id in update.removed ?? [] { byID[TransferID(id)] = nil }
            let order = update.order.map { $0.map(TransferID.init) } ?? self.items.map(\.id)
            let ordered = Set(order)
            items = order.compactMap { byID[$0] } + update.items.filter { !ordered.contains($0.id) }
        }
        var snapshot = QueueSnapshot(version: update.version, items: items, totals: update.totals,
                                     maxConcurrent: update.maxConcurrent, maxPerHost: update.maxPerHost)
        snapshot.downloadLimit = update.downloadLimit
        snapshot.uploadLimit = update.uploadLimit
        snapshot.window = update.window
        snapshot.walks = update.walks ?? []
        return snapshot
    }
}
