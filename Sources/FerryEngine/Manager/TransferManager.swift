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

    /// Callbacks queued for the delegate before the thread handing them over has to wait (see
    /// BoundedDelegateQueue; each transfer also keeps at most 2 MiB of body on its way, CurlTransfer).
    package static let delegateQueueLimit = 128

    public let configuration: EngineConfiguration
    /// The engine's time (EngineClock): the system's, or a test's.
    let clock: any EngineClock
    /// The limits the transport applies to this engine's transfers (global and per item).
    public let limits = BandwidthLimits()
    let core: PlainLock<Core>
    let session: URLSession
    let delegateQueue: BoundedDelegateQueue
    let delegate: SessionDelegate
    let names = NameClaims()
    /// What this engine learned of hosts' resumable-upload servers (a grown chunk refused, the IETF draft spoken).
    let resumableHosts = ResumableHosts()
    let store: any QueueStore
    let storeWriter: StoreWriter
    let timerQueue = DispatchQueue(label: "ferry.timers")
    /// Where a finished file's SHA-256 is checked (FileFinisher.verify), files in parallel.
    let finishQueue = DispatchQueue(label: "ferry.finish", attributes: .concurrent)
    /// Downloaded files, checked, synced and published in turn: those that become ready while a group is being
    /// synced wait and go together in the next (FileFinisher.publish), one sync for them all.
    let publishing: BatchedDelivery<FileFinisher.Finishing>
    /// The queue `publishing` delivers on (a test holds it to keep items finishing).
    let publishQueue = DispatchQueue(label: "ferry.publish")
    private let eventQueue = DispatchQueue(label: "ferry.events")
    /// What is told on its way to `monitor` (nil without one).
    private let announcements: BatchedDelivery<Told>?
    /// Told of each change, on `eventQueue` (TransferMonitor).
    let monitor: (any TransferMonitor)?
    /// The monitor hears each item an add appends (asked of it once, here).
    let monitorHearsAdds: Bool

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
        let names = self.names
        self.publishing = BatchedDelivery(queue: publishQueue) { FileFinisher.publish($0, names: names) }
        self.monitor = monitor
        self.monitorHearsAdds = monitor?.hearsAdds ?? false
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
        // The queue's index only: each item is loaded when it runs or a command acts on it.
        try store.forEachIndexRow { row in
            if let claim = row.claim { names.adopt(directory: claim.directory, name: claim.name) }
            core.append(row)
        }
        let batches = try store.batches()
        for batch in batches {
            if let tree = batch.tree { core.trees[batch.id] = tree }
            if let rate = batch.rateLimit { core.batchLimits[batch.id] = rate }
        }
        // The limits of batches with work left (a file not done, a walk not ended): a limit no transfer can answer to
        // would keep the transport working out shares at every transfer that comes or goes (BandwidthLimits).
        let walking = batches.contains { $0.rateLimit != nil } ? Set(try store.walks().filter { !$0.progress.ended }.map(\.progress.batch)) : []
        let batchLimits = batches.compactMap { batch -> (Int64, Int64)? in
            guard let rate = batch.rateLimit else { return nil }
            let left = core.queue.countsPerBatch[batch.id]?.contains { $0.key != .completed && $0.value > 0 } ?? false
            return left || walking.contains(batch.id) ? (batch.id, rate) : nil
        }
        self.core = PlainLock(core)
        limits.setGlobal(download: configuration.downloadLimit, upload: configuration.uploadLimit)
        for (batch, rate) in batchLimits { limits.setBatch(batch, rate) }
        if let schedule = configuration.downloadSchedule { followSchedule(schedule) }
        watchMultiplexing()
        mutate { core in ((), self.pump(&core)) }
        // An engine of the whole queue goes on with the walks one stopped mid-way left (one of its own items
        // leaves other batches as they are).
        if case .everything = scope { resumeWalks() }
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
            let out = carryOut(effects, for: transfer, &core) + renameWhenStopped(transfer, &core) + restartInPlace(transfer, &core)
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

    /// An item stopped to go on at once (asked again with other options, renamed: StopIntent.restart) starts
    /// again here, in the slot it held, before `pump` sees that slot free: queued for a moment, with `-j 1` an
    /// item placed ahead of it took the slot, and the re-asked one waited for that one's end. Not while the
    /// engine stops or a command over many items holds the scheduler (pump's own rule); then it waits its turn.
    func restartInPlace(_ transfer: Transfer, _ core: inout Core) -> [Effect] {
        guard transfer.restartsInPlace else { return [] }
        transfer.restartsInPlace = false
        guard core.mayStart, transfer.startable,
              core.runnable?.contains(transfer.id) ?? true else { return [] }
        return launch(transfer.id, &core)
    }

    /// Starts whatever the caps allow, in queue order.
    ///
    /// An item may end as it is launched, holding no slot: its file was found finished (a crash came between
    /// the rename and the store's record) or it could not start. Nothing else would then start the next ones
    /// (no transfer runs to end later and pump again): after a `kill -9`, `ferry run` of 1,000 small files found
    /// its first four finished and then waited for ever. So the walk goes on until what it launched holds
    /// its slots, each item launched once.
    func pump(_ core: inout Core) -> [Effect] {
        guard core.mayStart else { return [] }
        var effects: [Effect] = []
        var launched = Set<TransferID>()
        while true {
            let picked = Self.startable(&core, multiplexed: delegate.multiplexed.current).filter { !launched.contains($0) }
            loadAhead(picked, &core)
            for id in picked { effects += launch(id, &core) }
            launched.formUnion(picked)
            let slotFreed = picked.contains { id in core.items[id].map { !$0.holdsSlot } ?? true }
            if !slotFreed { break }
        }
        if core.sampler == nil, core.items.values.contains(where: { $0.state == .running }) {
            // Something moves after a quiet stretch (the sampler stops when nothing runs): the totals' rates begin
            // again, as an item's does with its first bytes. Carried over, the first sample spanned the quiet
            // stretch: the header and aria2's getGlobalStat said 85 KB/s a second into a 164 KB/s download, and
            // took 8 s to get there.
            core.moved.restartRates(moving: Set(core.items.values.filter { $0.state == .running }.compactMap(\.batch)))
            core.sampler = startSampler()
        }
        return effects
    }

    /// The items a pass starts that are not loaded, read from the store in one read with the next ones the queue
    /// holds for later passes (up to `readAhead`, or half the cache when it is smaller; queued, not loaded, looked
    /// for among as many again past them): one at a time, under the lock, a tree's files beyond the 1,024 loaded at
    /// their add were each a read of its own. Those read ahead are idle, the newest of the cache: they leave it in
    /// turn, after the older idle ones, when it is over its size (so a host at its cap cannot pile them up).
    private func loadAhead(_ picked: [TransferID], _ core: inout Core) {
        var ids = picked.filter { core.items[$0] == nil }
        guard !ids.isEmpty else { return }
        let ahead = min(Self.readAhead, core.loadedLimit / 2)
        var looked = 0
        let runnable = core.runnable
        for entry in core.queue[core.settledPrefix...] {
            if ids.count >= ahead || looked >= 2 * ahead { break }
            looked += 1
            guard entry.state == .queued, core.items[entry.id] == nil, runnable?.contains(entry.id) ?? true,
                  !ids.contains(entry.id) else { continue }
            ids.append(entry.id)
        }
        for record in records(of: ids).values { _ = load(record, &core) }
    }

    /// How many items a pass that reads one from the store reads (loadAhead).
    static let readAhead = 64

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
        let room = core.finishingLimit - core.finishing.count
        guard room > 0 else { return [] }
        return Array(Scheduler.pick(slotHoldersPerHost: core.slots.perHost, ready: ready,
                                    maxConcurrent: core.caps.global, maxPerHost: core.caps.perHost,
                                    waiting: core.queue.queuedPerHost) { multiplexedIDs.contains($0) ? streams : nil }
                        .prefix(room))
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
