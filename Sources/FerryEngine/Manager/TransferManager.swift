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

    /// One item of the queue as the engine keeps it in memory, loaded or not (QueueIndex).
    typealias Entry = QueueIndex.Entry

    struct Core {
        /// Every item in the user's order (rank, then id), loaded or not, counted per state and queued per host.
        var queue = QueueIndex()
        /// The loaded items: those running, finishing, waiting for a retry, or that a command or an add just
        /// changed (they go back to the store once idle: `evictIdle`).
        var items: [TransferID: Transfer] = [:]
        /// Items kept loaded whatever their state (an add the store refused: they have no row to come back from).
        var pinned: Set<TransferID> = []
        var nextID: Int64 = 1
        var caps: ConcurrencyCaps
        var version: UInt64 = 0
        /// The changes of `version` that were only bytes moving (the sampler's): `version - samples` changes
        /// when a state, the order, a name or a setting did.
        var samples: UInt64 = 0
        /// The last sorted view's rows (SortedRows), kept while nothing they depend on changed.
        var sortedRows: SortedRows?
        var changed: Set<TransferID> = []
        /// Items whose rank a move changed, with their new ranks (the store gets them; nothing else's order changes).
        var rankChanged: [TransferID: Int] = [:]
        /// What the mutation under way told beside the changed items (adds, removes), for the monitor, in order.
        var told: [Told] = []
        /// Loaded by the mutation under way (evicted at its end when idle, changed or not).
        var loadedNow: Set<TransferID> = []
        /// Each waiter with the ids it still waits for (shrunk as items finish, never rescanned).
        var waiters: [Int: (pending: Set<TransferID>, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
        var sampler: DispatchSourceTimer?
        var lastCheckpoint: TimeInterval = 0
        var shuttingDown = false
        /// Commands over a selection under way (`events`): nothing starts until they are done, so none starts an
        /// item that the same command stops a moment later.
        var schedulingHeld = 0
        /// Removed by the mutation under way (their waiters count them as finished).
        var removedNow: Set<TransferID> = []
        var shutdownSignal: DispatchSemaphore?
        /// How many items at the head of `queue` are settled (finished, nothing in flight): the scheduler's
        /// walks start after them, so a long queue of finished files costs nothing per change. It only grows
        /// as the scheduler walks; it goes back to 0 when the queue's order changes or an item in it is
        /// changed so that it is settled no more (a retry of a failed file).
        var settledPrefix = 0
        /// Bytes moved by this engine's transfers, downloads and uploads, and their rates: the header's totals.
        /// Counted as transfers run and when they finish, so a file done between two samples counts too (the sum
        /// of the running items' rates said 0 B/s while small files came one after another).
        var moved = Moved()

        struct Moved {
            var down: Int64 = 0
            var up: Int64 = 0
            var downRate = RateEstimator()
            var upRate = RateEstimator()

            /// Counts what `transfer` moved since it was last counted.
            mutating func count(_ transfer: Transfer, bytes: Int64) {
                let delta = bytes - transfer.countedBytes
                transfer.countedBytes = bytes
                guard delta > 0 else { return }  // a restart from zero counts from there
                if transfer.spec.direction == .download { down += delta } else { up += delta }
            }
        }

        /// The items that hold a connection slot or are finishing, with their hosts: what the scheduler counts
        /// against the caps. Kept up to date from `changed` (syncSlotHolders).
        var slots = SlotBook()
        /// The items this engine may start: nil, every item; otherwise these only (a headless `get`/`put`
        /// runs its own batch and leaves the rest of the queue as it is). Items added or resumed through the
        /// engine join it.
        var runnable: Set<TransferID>?
        /// The ids whose name or URL hold the last filter text asked for (TextMatches), kept as items change.
        var textMatches: TextMatches?
        /// What a sort compares of items not loaded, as the store has them (dropped when an item is loaded).
        var storedSortKeys: [TransferID: QueueSort.Key] = [:]

        /// A command asked for these items: they may run.
        mutating func allow<S: Sequence>(_ ids: S) where S.Element == TransferID { runnable?.formUnion(ids) }

        /// Where `id` is in `queue`: by its rank when loaded, else by a walk.
        func position(of id: TransferID) -> Int? {
            if let item = items[id], let at = queue.position(of: id, rank: item.rank) { return at }
            return queue.position(of: id)
        }

        func settled(_ entry: Entry) -> Bool { items[entry.id]?.settled ?? entry.state.isTerminal }

        /// After changes (`changed`): the queue's entries (and so their counts) follow the loaded items that changed.
        mutating func syncStates() {
            for id in changed {
                guard let item = items[id], let at = queue.position(of: id, rank: item.rank) else { continue }
                queue.set(item.state, batch: item.batch, at: at)
            }
        }

        /// After changes (`changed`, `removedNow`): the slot book follows the items that changed.
        mutating func syncSlotHolders() {
            for id in removedNow { slots.set(id, nil) }
            for id in changed {
                guard let item = items[id] else { slots.set(id, nil); continue }
                let holds = item.holdsSlot || item.finishing
                // Leaving its slot: what it moved since the last sample counts now.
                if !holds, slots.holders[id] != nil { moved.count(item, bytes: item.bytesDone) }
                slots.set(id, holds ? queue.hostID(item.host) : nil)
            }
        }

        /// After changes (`changed`): an item of the settled prefix that is settled no more starts it over.
        mutating func recheckSettledPrefix() {
            for id in changed {
                guard let item = items[id], !item.settled, settledPrefix > 0,
                      let at = queue.position(of: id, rank: item.rank), at < settledPrefix else { continue }
                settledPrefix = 0
            }
        }

        /// What is out of step between the parts (empty: nothing), counted afresh: each part's own invariants, the
        /// slot book against the loaded items that hold slots, the loaded items' states and ranks against their
        /// entries, and the settled prefix. A walk over everything: for tests (TransferManager.violations) and
        /// for asserts on a small queue. True between changes (after the syncs), not in the middle of one.
        func violations() -> [String] {
            var found = queue.violations() + slots.violations()
            let holding = Dictionary(uniqueKeysWithValues: items.values.lazy.filter { $0.holdsSlot || $0.finishing }
                                        .map { ($0.id, queue.hostIDs[$0.host] ?? -1) })
            if holding != slots.holders {
                found.append("the slot book \(slots.holders) is not the items holding slots \(holding): an item changed without touch")
            }
            for (id, item) in items {
                guard let at = queue.position(of: id, rank: item.rank) else {
                    found.append("\(id) is loaded at rank \(item.rank), where the index has no such item")
                    continue
                }
                if queue[at].state != item.state { found.append("\(id) is \(item.state), its entry \(queue[at].state)") }
            }
            if let unsettled = queue.prefix(settledPrefix).first(where: { !settled($0) }) {
                found.append("\(unsettled.id) is in the settled prefix (\(settledPrefix)) and not settled")
            }
            return found
        }

        /// After the index moved these entries: their loaded items and the store take their new ranks, and the
        /// scheduler walks the queue from its head again.
        mutating func ranksChanged(_ entries: [Entry]) {
            for entry in entries {
                items[entry.id]?.rank = entry.rank
                rankChanged[entry.id] = entry.rank
            }
            settledPrefix = 0
        }

        mutating func touch(_ id: TransferID) {
            changed.insert(id)
            version &+= 1
        }

        /// A new item at the end of the queue (not loaded).
        mutating func append(_ row: QueueIndexRow) {
            queue.append(id: row.id, rank: row.position, batch: row.batch, state: row.state.atRest, host: row.host)
            nextID = max(nextID, row.id.rawValue + 1)
        }

        /// Loaded items that went idle, oldest first (some may have run again since, or gone): the cache that
        /// `evictIdle` trims.
        var idleOrder: [TransferID] = []
        var idleHead = 0
        /// EngineConfiguration.loadedLimit.
        var loadedLimit = 1_024
        /// The highest start generation of any transfer that left memory (Transfer.countGenerations).
        var generationFloor = 0

        /// Items no longer running, waiting or finishing may go back to the store (their newest record is on
        /// its way there: StoreWriter). The most recent `loadedLimit` stay loaded (a cache: what front ends
        /// show of a finished item, such as a server's answer to an upload or a rate history, lives only
        /// there); beyond it, the oldest idle ones are dropped. A text filter's matches keep their names.
        mutating func evictIdle(_ ids: some Sequence<TransferID>) {
            for id in ids where items[id]?.idle == true { idleOrder.append(id) }
            while items.count > loadedLimit, idleHead < idleOrder.count {
                let id = idleOrder[idleHead]
                idleHead += 1
                guard let item = items[id], !pinned.contains(id), item.idle else { continue }
                textMatches?.note(item)
                generationFloor = max(generationFloor, item.generation)
                items[id] = nil
            }
            if idleHead > 4_096, idleHead * 2 > idleOrder.count {
                idleOrder.removeFirst(idleHead)
                idleHead = 0
            }
            // Below the limit nothing is evicted, and items that go idle again and again would pile up here.
            if idleOrder.count - idleHead > 2 * loadedLimit + 4_096 {
                idleOrder = idleOrder[idleHead...].filter { items[$0]?.idle == true }
                idleHead = 0
            }
        }
    }

    /// Callbacks queued for the delegate before the thread handing them over has to wait (see
    /// BoundedDelegateQueue; each transfer also keeps at most 2 MiB of body on its way, CurlTransfer).
    package static let delegateQueueLimit = 128

    public let configuration: EngineConfiguration
    /// The engine's time (EngineClock): the system's, or a test's.
    let clock: any EngineClock
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
    /// What is told on its way to `monitor` (nil without one).
    private let announcements: BatchedDelivery<Told>?
    /// Told of each change, on `eventQueue` (TransferMonitor).
    let monitor: (any TransferMonitor)?

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
    ///   - monitor: told of each change, on a serial queue, in order (TransferMonitor).
    ///   - clock: the engine's time (a test's ManualClock; the system's by default).
    public init(
        configuration: EngineConfiguration = EngineConfiguration(),
        store: any QueueStore = InMemoryQueueStore(),
        scope: Scope = .everything,
        monitor: (any TransferMonitor)? = nil,
        clock: any EngineClock = SystemClock()
    ) throws {
        self.configuration = configuration
        self.clock = clock
        self.store = store
        self.storeWriter = StoreWriter(store: store, interval: configuration.storeWriteInterval)
        self.monitor = monitor
        // Queued under the engine's lock (in `mutate`): the monitor hears of the changes in their order,
        // gathered for 5 ms (1,000 small files woke the listener's queue for nearly every change: 1,100 futex
        // calls; a person does not see 5 ms, and `drainEvents` delivers what waits at once).
        let eventQueue = self.eventQueue
        self.announcements = monitor.map { monitor in
            BatchedDelivery(queue: eventQueue, gathering: .milliseconds(5)) { $0.forEach { $0.tell(monitor) } }
        }
        // No cache, cookies or credentials, and no directory made for them (not `.ephemeral`, which makes one).
        let sessionConfig = URLSessionConfiguration.keepingNothing
        // Every request is carried by ferry's transport (FerryURLProtocol over CurlTransport), not corelibs'.
        sessionConfig.protocolClasses = [FerryURLProtocol.self]
        sessionConfig.timeoutIntervalForRequest = configuration.idleTimeout
        // Our scheduler enforces the caps; URLSession must not queue tasks behind our back.
        sessionConfig.httpMaximumConnectionsPerHost = 256
        // Serial (a concurrent queue reorders chunks) and bounded (chunks must not pile up in memory).
        let delegateQueue = BoundedDelegateQueue(limit: Self.delegateQueueLimit, name: "ferry.delegate")
        self.delegateQueue = delegateQueue
        let delegate = SessionDelegate(hostHeaders: configuration.hostHeaders, netrcFiles: NetrcFiles(), transportSettings: configuration.transport,
                                       delegateQueue: delegateQueue)
        self.delegate = delegate
        self.session = URLSession(configuration: sessionConfig, delegate: delegate, delegateQueue: delegateQueue)

        var core = Core(caps: configuration.caps)
        core.loadedLimit = configuration.loadedLimit
        if case .ownItems = scope { core.runnable = [] }
        let names = self.names
        // The queue's index only: each item is loaded when it runs or a command acts on it.
        try store.forEachIndexRow { row in
            if let claim = row.claim { names.adopt(directory: claim.directory, name: claim.name) }
            core.append(row)
        }
        self.core = Mutex(core)
        limits.setGlobal(download: configuration.downloadLimit, upload: configuration.uploadLimit)
        if let schedule = configuration.downloadSchedule { followSchedule(schedule) }
        watchMultiplexing()
        mutate { core in ((), self.pump(&core)) }
    }

    /// A host found to answer over HTTP/2 may take more items at once: a scheduling pass follows (told on
    /// the transport's thread, the pass runs elsewhere).
    private func watchMultiplexing() {
        delegate.multiplexingChanged.withLock {
            $0 = { [weak self] in
                DispatchQueue.global().async { [weak self] in
                    guard let self else { return }
                    self.mutate { core in ((), self.pump(&core)) }
                }
            }
        }
    }

    /// The item `id`, loaded from the store if it is not (nil: no such item in this engine's queue). An item
    /// whose saved progress cannot be read starts over here, before anything runs it.
    func loaded(_ id: TransferID, _ core: inout Core) -> Transfer? {
        if let transfer = core.items[id] { return transfer }
        guard let record = records(of: [id])[id] else { return nil }
        return load(record, &core)
    }

    /// `record` (the newest of its item) as a loaded Transfer; nil: no such item in this engine's queue.
    func load(_ record: StoredTransfer, _ core: inout Core) -> Transfer? {
        var record = record
        let id = record.id
        guard let at = core.queue.position(of: id, rank: record.position) ?? core.position(of: id) else { return nil }
        let startsOver = record.startOverIfUnreadable() != nil
        let transfer = Transfer(stored: record, policy: configuration.retry, retryUploads: configuration.retryUploads, clock: clock)
        // The index knows the item's place and state best (the row may not have them yet).
        transfer.rank = core.queue[at].rank
        transfer.state = core.queue[at].state
        transfer.toldState = transfer.state
        transfer.batch = core.queue[at].batch
        transfer.countGenerations(after: core.generationFloor)
        core.items[id] = transfer
        core.storedSortKeys[id] = nil
        core.loadedNow.insert(id)
        if startsOver { core.touch(id) }
        return transfer
    }

    /// What a row of the queue looks like to a front end, for an item that is not loaded.
    func snapshot(of record: StoredTransfer, state: TransferState) -> TransferSnapshot {
        let transfer = Transfer(stored: record, policy: configuration.retry, retryUploads: configuration.retryUploads, clock: clock)
        transfer.state = state
        return transfer.snapshot()
    }

    /// The newest records of these items that are not loaded (StoreWriter's pending ones first), by id.
    func records(of ids: [TransferID]) -> [TransferID: StoredTransfer] {
        var found: [TransferID: StoredTransfer] = [:]
        var missing: [TransferID] = []
        for id in ids {
            if let record = storeWriter.pending(id) { found[id] = record } else { missing.append(id) }
        }
        for record in (try? store.load(missing)) ?? [] { found[record.id] = record }
        return found
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
            core.syncStates()
            let changed = core.changed
            let items = changed.sorted().compactMap { core.items[$0] }
            // Snapshots only for a monitor; the store gets records either way.
            var events = core.told
            core.told.removeAll()
            if self.monitor != nil {
                events += items.map { item in
                    item.state == item.toldState ? .updated(item.snapshot()) : .transitioned(item.snapshot(), from: item.toldState)
                }
            }
            // Each transition is told once (a pause of a download in 4 ranges changed the item 5 times).
            for item in items { item.toldState = item.state }
            core.changed.removeAll()
            let ranks = core.rankChanged
            core.rankChanged.removeAll()
            let records = items.map { $0.record() }
            if !records.isEmpty || !ranks.isEmpty { storeWriter.enqueue(records, ranks: ranks) }
            let finished = self.takeFinishedWaiters(&core, changed: changed.union(core.removedNow))
            core.removedNow.removeAll()
            // Their records are queued for the store above: idle items need not stay in memory.
            core.evictIdle(core.loadedNow.isEmpty ? changed : changed.union(core.loadedNow))
            core.loadedNow.removeAll()
            // Queued under the lock: events reach the listener in the order the changes were made (a listener
            // that follows states, such as the hooks, must never see an older state after a newer one).
            self.announcements?.send(events)
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
            guard let transfer = loaded(id, &core), let effects = body(transfer) else { return (false, []) }
            if allow { core.allow([id]) }
            let out = carryOut(effects, for: transfer, &core)
            checkShutdown(&core)
            return (true, out + pump(&core))
        }
    }

    /// `event` for many items, as one operation to the scheduler: nothing starts until the last item has
    /// taken it, then one pump (a pause of 100,000 queued items with `-j 1` started 99 of them, each freed slot
    /// filled with the next queued item a later turn paused, leaving 99 requests made and 99 `.part` files).
    /// A thousand items to a turn of the lock, their records written before the next turn (a pause of 100,000
    /// items took the lock 100,000 times, each turn contended by the transfers' own work). The items that
    /// took it, in the order given.
    func events(_ ids: [TransferID], allow: Bool = false, _ body: (Transfer) -> [Transfer.Effect]?) -> [TransferID] {
        guard ids.count > 1 else {
            return ids.first.map { event($0, allow: allow, body) ? [$0] : [] } ?? []
        }
        return holdingScheduling { eventsInTurns(ids, allow: allow, body) }
    }

    /// Runs `body` with the scheduler held (nothing starts), then pumps once: a command over many items, or an
    /// add and its placement, is one operation to the scheduler.
    func holdingScheduling<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        core.withLock { $0.schedulingHeld += 1 }
        defer {
            mutate { core in
                core.schedulingHeld -= 1
                return ((), pump(&core))
            }
        }
        return try body()
    }

    private func eventsInTurns(_ ids: [TransferID], allow: Bool, _ body: (Transfer) -> [Transfer.Effect]?) -> [TransferID] {
        var took: [TransferID] = []
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            took += mutate { core in
                var changed: [TransferID] = []
                var out: [Effect] = []
                let chunk = ids[start..<min(ids.count, start + 1_000)]
                // The records of those not loaded in one read, not one each.
                let stored = records(of: chunk.filter { core.items[$0] == nil })
                for id in chunk {
                    guard let transfer = core.items[id] ?? stored[id].flatMap({ load($0, &core) }), let effects = body(transfer) else { continue }
                    if allow { core.allow([id]) }
                    out += carryOut(effects, for: transfer, &core)
                    changed.append(id)
                }
                guard !changed.isEmpty else { return ([], []) }
                checkShutdown(&core)
                return (changed, out + pump(&core))
            }
            // A turn's records written before the next turn's: 100,000 records waiting for the store at once
            // held 140 MiB more at the peak, not returned to the system after.
            storeWriter.flush()
        }
        return took
    }

    /// Waits for the events queued so far to be delivered.
    @_spi(Testing) public func drainEvents() {
        if let announcements { announcements.flush() } else { eventQueue.sync {} }
    }

    // MARK: Scheduling

    /// Starts whatever the caps allow, in queue order.
    ///
    /// An item may end as it is launched, holding no slot: its file was found finished (a crash came between
    /// the rename and the store's record) or it could not start. Nothing else would then start the next ones
    /// (no transfer runs to end later and pump again): after a `kill -9`, `ferry run` of 1,000 small files found
    /// its first four finished and then waited for ever. So the walk goes on until what it launched holds
    /// its slots, each item launched once.
    func pump(_ core: inout Core) -> [Effect] {
        guard !core.shuttingDown, core.schedulingHeld == 0 else { return [] }
        var effects: [Effect] = []
        var launched = Set<TransferID>()
        while true {
            let picked = Self.startable(&core, multiplexed: delegate.multiplexed.current).filter { !launched.contains($0) }
            for id in picked { effects += launch(id, &core) }
            launched.formUnion(picked)
            let slotFreed = picked.contains { id in core.items[id].map { !$0.holdsSlot && !$0.finishing } ?? true }
            if !slotFreed { break }
        }
        if core.sampler == nil, core.items.values.contains(where: { $0.state == .running }) {
            // Something moves after a quiet stretch (the sampler stops when nothing runs): the totals' rates begin
            // again, as an item's does with its first bytes. Carried over, the first sample spanned the quiet
            // stretch: the header and aria2's getGlobalStat said 85 KB/s a second into a 164 KB/s download, and
            // took 8 s to get there.
            core.moved.downRate = RateEstimator()
            core.moved.upRate = RateEstimator()
            core.sampler = startSampler()
        }
        return effects
    }

    /// Runs on every change: no copy of the queue, the walk in queue order starts after the settled head
    /// of the queue and stops at the caps. (A function of its own so that nothing holds `core.items` while
    /// `launch` mutates it.)
    /// `multiplexed`: the hosts answering over HTTP/2 (their items share a connection, ConcurrencyCaps.streams).
    private static func startable(_ core: inout Core, multiplexed: Set<String>) -> [TransferID] {
        core.recheckSettledPrefix()
        while core.settledPrefix < core.queue.count, core.settled(core.queue[core.settledPrefix]) {
            core.settledPrefix += 1
        }
        core.syncSlotHolders()
        // The entries' states (and so queuedPerHost) as the loaded items have them now, not at the end of the change.
        core.syncStates()
        let open = core.queue[core.settledPrefix...]
        let knownHosts = core.queue.hostIDs
        // A walk over everything at every pass: in debug builds, on small queues only (a debug engine under the
        // test suite's load held the one transport thread of its process; QueueIndexTests and StoreBackedQueueTests
        // check the parts, and the whole past 2,000 items).
        assert(core.queue.count > Self.checkedQueueSize || core.violations().isEmpty, "the engine's core: \(core.violations())")
        let runnable = core.runnable
        let items = core.items
        let ready = open.lazy.filter { entry in
            // A loaded item's own state: the index follows it only once the change is over (syncStates).
            (items[entry.id]?.startable ?? (entry.state == .queued)) && runnable?.contains(entry.id) ?? true
        }.map { ($0.id, $0.host) }
        let streams = core.caps.streams
        let multiplexedIDs = Set(multiplexed.compactMap { knownHosts[$0] })
        return Scheduler.pick(slotHoldersPerHost: core.slots.perHost, ready: ready,
                              maxConcurrent: core.caps.global, maxPerHost: core.caps.perHost,
                              waiting: core.queue.queuedPerHost) { multiplexedIDs.contains($0) ? streams : nil }
    }

    /// The largest queue whose core a debug build checks at every scheduling pass (Core.violations).
    static let checkedQueueSize = 64

    /// During shutdown: signals once nothing is in flight or finishing.
    func checkShutdown(_ core: inout Core) {
        guard core.shuttingDown, let signal = core.shutdownSignal else { return }
        if !core.items.values.contains(where: { $0.busy || $0.finishing }) {
            core.shutdownSignal = nil
            signal.signal()
        }
    }
}
