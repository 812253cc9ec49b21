import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The one public facade of the engine: commands in, immutable snapshots and events out.
/// It owns what the transfers share: one URLSession with a serial delegate queue, the scheduler (which
/// transfers may run under the caps), the store, and the snapshots. Each queue item's life is a Transfer
/// (Engine/Transfer), kept under the manager's lock; the manager feeds it events and carries out the
/// effects it returns (TransferManager+Effects).
public final class TransferManager: Sendable {
    typealias Effect = @Sendable () -> Void

    struct Core {
        /// The items in the user's order (the same objects as in `items`): walks over the queue need no lookups.
        var queue: [Transfer] = []
        var items: [TransferID: Transfer] = [:]
        var nextID: Int64 = 1
        var caps: ConcurrencyCaps
        var version: UInt64 = 0
        var changed: Set<TransferID> = []
        /// Items whose rank a move changed (the store gets their new ranks; nothing else's order changes).
        var rankChanged: Set<TransferID> = []
        /// Items just inserted by the store and not changed since: their row already holds their record, so
        /// this change writes none for them (an add of many items wrote each row twice).
        var inserted: Set<TransferID> = []
        /// Each waiter with the ids it still waits for (shrunk as items finish, never rescanned).
        var waiters: [Int: (pending: Set<TransferID>, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
        var sampler: DispatchSourceTimer?
        var lastCheckpoint: TimeInterval = 0
        var shuttingDown = false
        /// Removed by the mutation under way (their waiters count them as finished).
        var removedNow: Set<TransferID> = []
        var shutdownSignal: DispatchSemaphore?
        /// How many items at the head of `queue` are settled (finished, nothing in flight): the scheduler's
        /// walks start after them, so a long queue of finished files costs nothing per change. It only grows
        /// as the scheduler walks; it goes back to 0 when the queue's order changes or an item in it is
        /// changed so that it is settled no more (a retry of a failed file).
        var settledPrefix = 0
        /// The items that hold a connection slot or are finishing, with their hosts: what the scheduler counts
        /// against the caps. Kept up to date from `changed` (syncSlotHolders), so that no pass over the queue
        /// is needed to count them (a pass per change made a long queue quadratic: 1,000 files, 4,000 passes).
        var slotHolders: [TransferID: String] = [:]
        /// The items this engine may start: nil, every item; otherwise these only (a headless `get`/`put`
        /// runs its own batch and leaves the rest of the queue as it is). Items added or resumed through the
        /// engine join it.
        var runnable: Set<TransferID>?

        /// A command asked for these items: they may run.
        mutating func allow<S: Sequence>(_ ids: S) where S.Element == TransferID { runnable?.formUnion(ids) }

        /// Items per state, kept from `changed` like `slotHolders` (syncCounts): a front end's counts and a
        /// window of the whole queue cost no walk over it.
        var counts: [TransferState: Int] = [:]

        /// After changes (`changed`): `counts` follows the items whose state changed. (A removed item is
        /// uncounted by `remove`.)
        mutating func syncCounts() {
            for id in changed {
                guard let item = items[id], item.countedAs != item.state else { continue }
                if let old = item.countedAs { counts[old, default: 0] -= 1 }
                counts[item.state, default: 0] += 1
                item.countedAs = item.state
            }
            assert(queue.count > 2_000 || counts.filter { $0.value != 0 } == Dictionary(grouping: queue, by: \.state).mapValues(\.count),
                   "counts are out of step with the queue")
        }

        /// After changes (`changed`, `removedNow`): `slotHolders` follows the items that changed.
        mutating func syncSlotHolders() {
            for id in removedNow { slotHolders[id] = nil }
            for id in changed {
                guard let item = items[id] else { slotHolders[id] = nil; continue }
                slotHolders[id] = item.holdsSlot || item.finishing ? item.host : nil
            }
        }

        /// After changes (`changed`): an item of the settled prefix that is settled no more starts it over.
        mutating func recheckSettledPrefix() {
            for id in changed {
                guard let item = items[id], item.inSettledPrefix, !item.settled else { continue }
                item.inSettledPrefix = false
                settledPrefix = 0
            }
        }

        mutating func touch(_ id: TransferID) {
            changed.insert(id)
            version &+= 1
        }

        mutating func append(_ transfer: Transfer) {
            items[transfer.id] = transfer
            queue.append(transfer)
            counts[transfer.state, default: 0] += 1
            transfer.countedAs = transfer.state
            nextID = max(nextID, transfer.id.rawValue + 1)
        }
    }

    /// Callbacks queued for the delegate before the thread handing them over has to wait (see
    /// BoundedDelegateQueue; each transfer also keeps at most 2 MiB of body on its way, CurlTransfer).
    package static let delegateQueueLimit = 128

    public let configuration: EngineConfiguration
    /// The limits the transport applies to this engine's transfers (global and per item).
    public let limits = BandwidthLimits()
    let core: Mutex<Core>
    let session: URLSession
    let delegateQueue: BoundedDelegateQueue
    let delegate: SessionDelegate
    let names = NameClaims()
    let store: any QueueStore
    let storeWriter: StoreWriter
    let timerQueue = DispatchQueue(label: "ferry.timers")
    let finishQueue = DispatchQueue(label: "ferry.finish", attributes: .concurrent)
    private let eventQueue = DispatchQueue(label: "ferry.events")
    private let onEvent: (@Sendable (TransferEvent) -> Void)?

    /// Which of the queue's items an engine works on.
    public enum Scope: Sendable {
        /// The whole queue (`ferry run`, a background engine).
        case everything
        /// Only the items added, resumed or retried through it (a headless `get`/`put`): every other item
        /// keeps its state and its `.part` file.
        case ownItems
    }

    /// - Parameters:
    ///   - store: where the queue is kept; items found there are loaded, and those that were running are queued again.
    ///   - scope: which items it starts.
    ///   - onEvent: called on a serial queue, in order, after every state change.
    public init(
        configuration: EngineConfiguration = EngineConfiguration(),
        store: any QueueStore = InMemoryQueueStore(),
        scope: Scope = .everything,
        onEvent: (@Sendable (TransferEvent) -> Void)? = nil
    ) throws {
        self.configuration = configuration
        self.store = store
        self.storeWriter = StoreWriter(store: store, interval: configuration.storeWriteInterval)
        self.onEvent = onEvent
        let sessionConfig = URLSessionConfiguration.ephemeral
        // Every request is carried by ferry's transport (FerryURLProtocol over CurlTransport), not corelibs'.
        sessionConfig.protocolClasses = [FerryURLProtocol.self]
        sessionConfig.timeoutIntervalForRequest = configuration.idleTimeout
        // Our scheduler enforces the caps; URLSession must not queue tasks behind our back.
        sessionConfig.httpMaximumConnectionsPerHost = 256
        sessionConfig.urlCache = nil
        sessionConfig.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfig.httpCookieStorage = nil
        sessionConfig.httpShouldSetCookies = false
        // Serial (a concurrent queue reorders chunks) and bounded (chunks must not pile up in memory).
        let delegateQueue = BoundedDelegateQueue(limit: Self.delegateQueueLimit, name: "ferry.delegate")
        self.delegateQueue = delegateQueue
        let delegate = SessionDelegate(hostHeaders: configuration.hostHeaders, netrcFiles: NetrcFiles(), transportSettings: configuration.transport,
                                       delegateQueue: delegateQueue)
        self.delegate = delegate
        self.session = URLSession(configuration: sessionConfig, delegate: delegate, delegateQueue: delegateQueue)

        var core = Core(caps: configuration.caps)
        if case .ownItems = scope { core.runnable = [] }
        var startingOver: [TransferID] = []
        for stored in try store.loadAll() {
            var stored = stored
            if stored.startOverIfUnreadable() != nil { startingOver.append(stored.id) }
            core.append(Self.adopt(stored, configuration: configuration, names: names))
        }
        self.core = Mutex(core)
        limits.setGlobal(download: configuration.downloadLimit, upload: configuration.uploadLimit)
        if let schedule = configuration.downloadSchedule { followSchedule(schedule) }
        mutate { core in
            // Their emptied `.part` files and forgotten ranges reach the store before anything runs.
            startingOver.forEach { core.touch($0) }
            return ((), self.pump(&core))
        }
    }

    /// A transfer for a stored item; the name of an unfinished one stays claimed.
    func adopt(_ stored: StoredTransfer) -> Transfer {
        Self.adopt(stored, configuration: configuration, names: names)
    }

    private static func adopt(_ stored: StoredTransfer, configuration: EngineConfiguration, names: NameClaims) -> Transfer {
        let transfer = Transfer(stored: stored, policy: configuration.retry, retryUploads: configuration.retryUploads)
        if let name = stored.fileName, !transfer.state.isTerminal { names.adopt(directory: stored.spec.directory, name: name) }
        return transfer
    }

    // MARK: The lock and what follows each change

    /// Runs `body` under the lock, then (outside it) its effects, the store writes and the events for what changed.
    /// Nothing in it calls into the session and waits: tasks are made, resumed and cancelled on the call queue
    /// of BoundedDelegateQueue (SessionTask), so it runs on any thread, the delegate queue's included, with
    /// the backpressure in place.
    @discardableResult
    func mutate<R: Sendable>(_ body: (inout Core) -> (R, [Effect])) -> R {
        let (result, effects, finished) = core.withLock {
            core -> (R, [Effect], [CheckedContinuation<Void, Never>]) in
            let (result, effects) = body(&core)
            core.recheckSettledPrefix()
            core.syncSlotHolders()
            core.syncCounts()
            let changed = core.changed
            let items = changed.sorted().compactMap { core.items[$0] }
            // Snapshots only for a listener; the store gets records either way.
            let events = self.onEvent == nil ? [] : items.map {
                TransferEvent(id: $0.id, state: $0.state, snapshot: $0.snapshot())
            }
            core.changed.removeAll()
            let ranks = Dictionary(uniqueKeysWithValues: core.rankChanged.compactMap { id in core.items[id].map { (id, $0.rank) } })
            core.rankChanged.removeAll()
            // (One started in this same change has changed since: its record is written.)
            let records = core.inserted.isEmpty ? items.map { $0.record() }
                : items.filter { !(core.inserted.contains($0.id) && $0.state == .queued && $0.attempts.isEmpty) }.map { $0.record() }
            core.inserted.removeAll()
            if !records.isEmpty || !ranks.isEmpty { storeWriter.enqueue(records, ranks: ranks) }
            let finished = self.takeFinishedWaiters(&core, changed: changed.union(core.removedNow))
            core.removedNow.removeAll()
            // Queued under the lock: events reach the listener in the order the changes were made (a listener
            // that follows states, such as the hooks, must never see an older state after a newer one).
            if let onEvent = self.onEvent, !events.isEmpty {
                eventQueue.async { events.forEach(onEvent) }
            }
            return (result, effects, finished)
        }
        effects.forEach { $0() }
        // Waiters wake only after this change's events are queued, so a waiter that drains the
        // event queue (as shutdown does) sees every event up to the one that finished its items.
        finished.forEach { $0.resume() }
        return result
    }

    /// Feeds one transfer an event and carries out what it returns; nil from the transfer: nothing changed.
    /// `allow`: a command that queues the item again, which the engine may then run whatever its scope.
    /// Whether the transfer took the event.
    @discardableResult
    func event(_ id: TransferID, allow: Bool = false, _ body: (Transfer) -> [Transfer.Effect]?) -> Bool {
        mutate { core in
            guard let transfer = core.items[id], let effects = body(transfer) else { return (false, []) }
            if allow { core.allow([id]) }
            let out = carryOut(effects, for: transfer, &core)
            checkShutdown(&core)
            return (true, out + pump(&core))
        }
    }

    /// Waits for the events queued so far to be delivered.
    func drainEvents() { eventQueue.sync {} }

    // MARK: Scheduling

    /// Starts whatever the caps allow, in queue order.
    func pump(_ core: inout Core) -> [Effect] {
        guard !core.shuttingDown else { return [] }
        var effects: [Effect] = []
        for id in Self.startable(&core) {
            effects += launch(id, &core)
        }
        if core.sampler == nil, core.items.values.contains(where: { $0.state == .running }) {
            core.sampler = startSampler()
        }
        return effects
    }

    /// Runs on every change: no copy of the queue, the walk in queue order starts after the settled head
    /// of the queue and stops at the caps. (A function of its own so that nothing holds `core.items` while
    /// `launch` mutates it.)
    private static func startable(_ core: inout Core) -> [TransferID] {
        core.recheckSettledPrefix()
        assert(core.queue.prefix(core.settledPrefix).allSatisfy { $0.settled && $0.inSettledPrefix },
               "the settled prefix holds an item that may run")
        while core.settledPrefix < core.queue.count, core.queue[core.settledPrefix].settled {
            core.queue[core.settledPrefix].inSettledPrefix = true
            core.settledPrefix += 1
        }
        let open = core.queue[core.settledPrefix...]
        core.syncSlotHolders()
        assert(core.slotHolders == Dictionary(uniqueKeysWithValues: open.lazy.filter { $0.holdsSlot || $0.finishing }
                                                .map { ($0.id, $0.host) }),
               "slotHolders is out of step with the queue: an item changed without touch")
        let runnable = core.runnable
        let ready = open.lazy.filter { $0.startable && runnable?.contains($0.id) ?? true }.map { ($0.id, $0.host) }
        return Scheduler.pick(slotHolders: core.slotHolders.values, ready: ready, maxConcurrent: core.caps.global,
                              maxPerHost: core.caps.perHost)
    }

    /// During shutdown: signals once nothing is in flight or finishing.
    func checkShutdown(_ core: inout Core) {
        guard core.shuttingDown, let signal = core.shutdownSignal else { return }
        if !core.items.values.contains(where: { $0.busy || $0.finishing }) {
            core.shutdownSignal = nil
            signal.signal()
        }
    }
}
