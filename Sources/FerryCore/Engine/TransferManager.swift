import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The one public facade of the engine: commands in, immutable snapshots and events out.
/// Owns one URLSession with a serial delegate queue; each attempt of each transfer is a data task
/// whose callbacks the delegate routes to the attempt's run object.
public final class TransferManager: Sendable {
    typealias Effect = @Sendable () -> Void

    /// Why the engine cancelled a task itself. `split` ends the probe of a download about to be segmented.
    enum StopIntent: Sendable { case pause, cancel, remove, shutdown, split }

    /// One queue item's engine state. A class: it lives only inside `core`'s lock, and reading it out of
    /// the dictionary must not copy every field (the scheduler looks at every item on every change).
    final class Item {
        let id: TransferID
        let spec: TransferSpec
        /// `spec.host`, computed once (parsing a URL on every scheduling pass was a hot spot).
        let host: String
        var state: TransferState

        init(id: TransferID, spec: TransferSpec, state: TransferState) {
            self.id = id
            self.spec = spec
            self.host = spec.host
            self.state = state
        }
        var fileName: String?
        var savedPath: String?
        var validators = Validators()
        var bytesDone: Int64 = 0
        /// Size of the body being transferred, once known (uploads: the body's length).
        var bytesExpected: Int64?
        var highWater: Int64 = 0
        var retries = 0
        var dnsRetries = 0
        var attempts: [Attempt] = []
        var lastError: String?
        var lastStatus: Int?
        var nextRetryAt: Date?
        var generation = 0
        var run: (any TaskRun)?
        var response: ServerResponse?
        var task: SessionTask?
        var stopIntent: StopIntent?
        var finishing = false
        var restartFromZero = false
        var rate = RateEstimator()
        /// The smoothed rate once a second, oldest first, at most a minute of it.
        var rateHistory: [Double] = []
        var lastHistorySample: TimeInterval = 0

        /// Segmented downloads: the ranges (their `done` is on disk), and the attempt per unfinished range.
        var segments: [SegmentState]?
        /// The item's own bandwidth limit (bytes per second), saved with it.
        var rateLimit: Int64?
        var segmentRuns: [Int: SegmentRun] = [:]
        var segmentTasks: [Int: SessionTask] = [:]
        var segmentTokens: [Int: Int] = [:]
        var segmentRetries: [Int: Int] = [:]
        /// The server cannot serve this file in segments: one stream from now on.
        var segmentFallback = false

        var holdsSlot: Bool { state == .running || busy }
        /// Neither holds a slot nor waits for one, and will not until a command changes its state.
        var settled: Bool { state.isTerminal && !busy && !finishing }
        /// Counted in the queue's settled prefix (see `Core.settledPrefix`).
        var inSettledPrefix = false
        /// An attempt (or a segment's) is still in flight or draining.
        var busy: Bool { run != nil || !segmentRuns.isEmpty }
        /// Every task this item has running now.
        var allTasks: [SessionTask] { (task.map { [$0] } ?? []) + Array(segmentTasks.values) }
    }

    struct Core {
        /// The items in the user's order (the same objects as in `items`): walks over the queue need no lookups.
        var queue: [Item] = []
        var items: [TransferID: Item] = [:]
        var nextID: Int64 = 1
        /// The highest id seen when loading or scanning the store for items other processes added.
        var scannedThrough = TransferID(0)
        var caps: ConcurrencyCaps
        var maxConcurrent: Int { caps.global }
        var maxPerHost: Int { caps.perHost }
        var version: UInt64 = 0
        var changed: Set<TransferID> = []
        var orderChanged = false
        /// Each waiter with the ids it still waits for (shrunk as items finish, never rescanned).
        var waiters: [Int: (pending: Set<TransferID>, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
        var sampler: DispatchSourceTimer?
        var lastCheckpoint: TimeInterval = 0
        var shuttingDown = false
        /// Removed here, perhaps not yet from the store: never adopted again.
        var removed: Set<TransferID> = []
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
    }

    struct PendingWrites {
        var records: [TransferID: StoredTransfer] = [:]
        var sequence: [TransferID] = []
        var order: [TransferID]?
        var scheduled = false
        /// When the last write began: the next waits until `storeWriteInterval` after it.
        var lastWrite: DispatchTime?
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
    let timerQueue = DispatchQueue(label: "ferry.timers")
    let finishQueue = DispatchQueue(label: "ferry.finish", attributes: .concurrent)
    private let storeQueue = DispatchQueue(label: "ferry.store")
    private let pendingWrites = Mutex(PendingWrites())
    private let eventQueue = DispatchQueue(label: "ferry.events")
    private let onEvent: (@Sendable (TransferEvent) -> Void)?

    /// - Parameters:
    ///   - store: where the queue is kept; items found there are loaded, and those that were running are queued again.
    ///   - onEvent: called on a serial queue, in order, after every state change.
    public init(
        configuration: EngineConfiguration = EngineConfiguration(),
        store: any QueueStore = InMemoryQueueStore(),
        onEvent: (@Sendable (TransferEvent) -> Void)? = nil
    ) throws {
        self.configuration = configuration
        self.store = store
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
        let delegate = SessionDelegate(hostHeaders: configuration.hostHeaders, transportSettings: configuration.transport,
                                       delegateQueue: delegateQueue)
        self.delegate = delegate
        self.session = URLSession(configuration: sessionConfig, delegate: delegate, delegateQueue: delegateQueue)

        var core = Core(caps: configuration.caps)
        for stored in try store.loadAll() {
            Self.adopt(stored, into: &core, names: names)
            core.scannedThrough = max(core.scannedThrough, stored.id)
        }
        self.core = Mutex(core)
        limits.setGlobal(download: configuration.downloadLimit, upload: configuration.uploadLimit)
        if let schedule = configuration.downloadSchedule { followSchedule(schedule) }
        mutate { core in ((), self.pump(&core)) }
    }

    // MARK: Bandwidth limits

    /// The limits a task of `item` answers to; the item's own limit is handed to the transport here.
    func limitMembership(_ item: Item) -> LimitMembership {
        if limits.current.items[item.id.rawValue] != item.rateLimit { limits.setItem(item.id.rawValue, item.rateLimit) }
        return LimitMembership(limits: limits, item: item.id.rawValue,
                               direction: item.spec.direction)
    }

    /// Sets one item's bandwidth limit (bytes per second, nil for none), at once for its running transfer,
    /// and saves it with the item. False when there is no such item.
    @discardableResult
    public func setRateLimit(_ id: TransferID, _ rate: Int64?) -> Bool {
        let rate = rate.flatMap { $0 > 0 ? $0 : nil }
        let found: Bool = mutate { core in
            guard let item = core.items[id] else { return (false, []) }
            item.rateLimit = rate
            core.touch(id)
            return (true, [])
        }
        if found { limits.setItem(id.rawValue, rate) }
        return found
    }

    /// Sets the global limits (bytes per second, nil for none); a schedule, if any, sets the download limit
    /// again at its next change.
    public func setGlobalLimits(download: Int64?, upload: Int64?) {
        limits.setGlobal(download: download, upload: upload)
        limitsShown()
    }

    /// The global limits changed: a new snapshot version, so front ends show them.
    private func limitsShown() {
        mutate { core in
            core.version &+= 1
            return ((), [])
        }
    }

    /// Applies the timetable now and at each of its changes while the engine runs.
    private func followSchedule(_ schedule: LimitSchedule) {
        limits.setGlobalDownload(schedule.rate(at: Date()))
        let next = schedule.nextChange(after: Date())
        timerQueue.asyncAfter(wallDeadline: .now() + max(1, next.timeIntervalSinceNow)) { [weak self] in
            guard let self, !self.core.withLock({ $0.shuttingDown }) else { return }
            self.followSchedule(schedule)
            self.limitsShown()
        }
    }

    /// An item from the store joins the queue: one that was running (the engine stopped or crashed) is queued
    /// again and will resume where its `.part` file ends.
    private static func adopt(_ stored: StoredTransfer, into core: inout Core, names: NameClaims) {
        let item = Item(id: stored.id, spec: stored.spec, state: stored.state)
        if item.state == .running || item.state == .waiting { item.state = .queued }
        item.fileName = stored.fileName
        item.savedPath = stored.savedPath
        item.validators = stored.validators
        item.bytesDone = stored.bytesDone
        item.bytesExpected = stored.bytesExpected
        item.highWater = stored.bytesDone
        item.retries = stored.retries
        item.attempts = stored.attempts
        item.lastError = stored.lastError
        item.segments = stored.segments
        item.rateLimit = stored.rateLimit
        if let name = stored.fileName, !item.state.isTerminal { names.adopt(directory: stored.spec.directory, name: name) }
        core.items[item.id] = item
        core.queue.append(item)
        core.nextID = max(core.nextID, stored.id.rawValue + 1)
    }

    // MARK: Commands

    /// Queues a transfer at the end of the queue and starts it when a slot is free.
    @discardableResult
    public func add(_ spec: TransferSpec) -> TransferID {
        add([spec])[0]
    }

    /// Queues transfers at the end of the queue, saved to the store together (all or none).
    @discardableResult
    public func add(_ specs: [TransferSpec]) -> [TransferID] {
        let stored: [StoredTransfer]
        var storeError: String?
        do {
            stored = try store.add(specs)
        } catch {
            // Still run them; the user sees that they will not survive a restart.
            storeError = "not saved to the queue: \(error)"
            stored = core.withLock { core in
                specs.map { spec in
                    defer { core.nextID += 1 }
                    return StoredTransfer(id: TransferID(core.nextID), position: core.queue.count, spec: spec)
                }
            }
        }
        return mutate { core in
            // The store gave these ids in one transaction, so together; when the last scan reached the one just
            // before them, the next need not read them back (a thousand rows for `-i list`).
            if storeError == nil, let first = stored.first?.id, let last = stored.last?.id,
               core.scannedThrough.rawValue == first.rawValue - 1 {
                core.scannedThrough = last
            }
            for record in stored {
                Self.adopt(record, into: &core, names: names)
                core.items[record.id]?.lastError = storeError
                core.orderChanged = true
                core.touch(record.id)
            }
            return (stored.map(\.id), self.pump(&core))
        }
    }

    /// Takes into the queue the items another process added to the store since this engine loaded it
    /// (a second `ferry get` hands its items over this way). Returns their ids.
    @discardableResult
    public func adoptNewItemsFromStore() -> [TransferID] {
        // Ids grow in commit order, so a scan sees every item up to the highest id it returned.
        let scanned = core.withLock { $0.scannedThrough }
        guard let all = try? store.loadAdded(after: scanned) else { return [] }
        return mutate { core in
            var adopted: [TransferID] = []
            if let last = all.map(\.id).max() { core.scannedThrough = max(core.scannedThrough, last) }
            for record in all where core.items[record.id] == nil && !core.removed.contains(record.id) {
                Self.adopt(record, into: &core, names: names)
                core.touch(record.id)
                adopted.append(record.id)
            }
            return (adopted, self.pump(&core))
        }
    }

    /// Stops a running or waiting transfer and keeps its `.part` file and validators.
    public func pause(_ id: TransferID) {
        mutate { core in
            guard let item = core.items[id] else { return ((), []) }
            var effects: [Effect] = []
            switch item.state {
            case .running where !item.finishing:
                item.stopIntent = .pause
                item.state = .paused
                for task in item.allTasks { effects.append { task.cancel() } }
            case .queued, .waiting:
                item.nextRetryAt = nil
                item.state = .paused
            default:
                return ((), [])
            }
            core.items[id] = item
            core.touch(id)
            return ((), effects + self.pump(&core))
        }
    }

    /// Queues a paused transfer again; it continues from its `.part` offset.
    public func resume(_ id: TransferID) {
        mutate { core in
            guard let item = core.items[id], item.state == .paused else { return ((), []) }
            item.state = .queued
            core.items[id] = item
            core.touch(id)
            return ((), self.pump(&core))
        }
    }

    /// Stops the transfer and any pending retry at once and frees its slot. The `.part` file stays for `retry`.
    public func cancel(_ id: TransferID) {
        mutate { core in
            guard let item = core.items[id], !item.state.isTerminal, !item.finishing else { return ((), []) }
            var effects: [Effect] = []
            item.nextRetryAt = nil
            if item.busy {
                item.stopIntent = .cancel
                for task in item.allTasks { effects.append { task.cancel() } }
            }
            item.state = .cancelled
            item.lastError = "cancelled"
            core.items[id] = item
            core.touch(id)
            return ((), effects + self.pump(&core))
        }
    }

    /// Queues a failed or cancelled transfer again with a fresh retry budget.
    public func retry(_ id: TransferID) {
        mutate { core in
            guard let item = core.items[id], item.state == .failed || item.state == .cancelled else { return ((), []) }
            item.state = .queued
            item.retries = 0
            item.dnsRetries = 0
            item.lastError = nil
            core.items[id] = item
            core.touch(id)
            return ((), self.pump(&core))
        }
    }

    /// Takes an item off the queue. A finished file is never touched; `deletePartial` also deletes the `.part` file.
    public func remove(_ id: TransferID, deletePartial: Bool = false) {
        mutate { core in
            guard let item = core.items.removeValue(forKey: id) else { return ((), []) }
            var effects: [Effect] = []
            for task in item.allTasks { effects.append { task.cancel() } }
            core.queue.removeAll { $0 === item }
            core.settledPrefix = 0
            core.removed.insert(id)
            core.removedNow.insert(id)
            core.orderChanged = true
            core.version &+= 1
            if let name = item.fileName, item.state != .completed {
                let directory = item.spec.directory
                names.release(directory: directory, name: name)
                if deletePartial { effects.append { _ = unlink(PartialFile.path(directory: directory, name: name)) } }
            }
            let store = self.store
            effects.append { [storeQueue] in storeQueue.async { try? store.remove(id) } }
            return ((), effects + self.pump(&core))
        }
    }

    /// Moves an item in the user's queue order.
    public func move(_ id: TransferID, _ direction: QueueMove) {
        mutate { core in
            guard let index = core.queue.firstIndex(where: { $0.id == id }) else { return ((), []) }
            let moved = core.queue.remove(at: index)
            let target: Int
            switch direction {
            case .up: target = max(0, index - 1)
            case .down: target = min(core.queue.count, index + 1)
            case .top: target = 0
            case .bottom: target = core.queue.count
            }
            core.queue.insert(moved, at: target)
            core.settledPrefix = 0
            core.orderChanged = true
            core.version &+= 1
            return ((), self.pump(&core))
        }
    }

    /// Changes the caps at run time. Running transfers are never interrupted by a lower cap.
    /// Sets the global cap (kept in ConcurrencyCaps.range); a per-host cap of its own stays, one that follows
    /// the global cap moves with it.
    public func setConcurrency(maxConcurrent: Int) {
        mutate { core in
            core.caps = core.caps.with(global: maxConcurrent)
            core.version &+= 1
            return ((), self.pump(&core))
        }
    }

    public func pauseAll() {
        for item in snapshot().items where [.running, .queued, .waiting].contains(item.state) { pause(item.id) }
    }

    public func resumeAll() {
        for item in snapshot().items where item.state == .paused { resume(item.id) }
    }

    // MARK: Snapshots

    public func snapshot() -> QueueSnapshot {
        core.withLock { core in
            var totals = QueueTotals()
            var items: [TransferSnapshot] = []
            items.reserveCapacity(core.queue.count)
            for item in core.queue {
                let snap = self.snapshot(of: item)
                totals.count[item.state, default: 0] += 1
                if item.state == .running, let rate = snap.bytesPerSecond {
                    if item.spec.direction == .download { totals.downloadBytesPerSecond += rate }
                    else { totals.uploadBytesPerSecond += rate }
                }
                items.append(snap)
            }
            var snapshot = QueueSnapshot(version: core.version, items: items, totals: totals,
                                         maxConcurrent: core.maxConcurrent, maxPerHost: core.maxPerHost)
            let rates = limits.current
            snapshot.downloadLimit = rates.download
            snapshot.uploadLimit = rates.upload
            return snapshot
        }
    }

    public func snapshot(of id: TransferID) -> TransferSnapshot? {
        core.withLock { core in core.items[id].map { self.snapshot(of: $0) } }
    }

    func snapshot(of item: Item) -> TransferSnapshot {
        let done = Self.currentBytes(item)
        let expected = item.segments != nil ? item.validators.totalLength
            : item.run?.bytesExpected ?? item.bytesExpected ?? item.validators.totalLength
        let rate = item.state == .running ? item.rate.bytesPerSecond : nil
        let eta = (item.state == .running && expected != nil) ? item.rate.eta(remaining: max(0, expected! - done)) : nil
        var snapshot = TransferSnapshot(
            id: item.id, spec: item.spec, state: item.state, bytesDone: done, bytesExpected: expected,
            fileName: item.fileName, savedPath: item.savedPath, bytesPerSecond: rate, eta: eta,
            retries: item.retries, maxRetries: configuration.retry.maxRetries, nextRetryAt: item.nextRetryAt, lastError: item.lastError,
            attempts: item.attempts, validators: item.validators, lastStatus: item.lastStatus, response: item.response,
            rateHistory: item.rateHistory, segments: Self.liveSegments(item))
        snapshot.rateLimit = item.rateLimit
        return snapshot
    }

    /// Returns once every one of `ids` is completed, failed, cancelled or removed, or when the calling task is cancelled.
    public func waitUntilFinished(_ ids: Set<TransferID>) async {
        let token = core.withLock { core -> Int in
            core.nextWaiter += 1
            return core.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = core.withLock { core -> Bool in
                    let pending = ids.filter { !Self.isFinished($0, in: core) }
                    if pending.isEmpty || Task.isCancelled { return true }
                    core.waiters[token] = (pending, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            core.withLock { $0.waiters.removeValue(forKey: token) }?.continuation.resume()
        }
    }

    /// Stops every attempt (their `.part` files are flushed and kept; they stay queued for the next start),
    /// waits up to `timeout` for them to drain, and releases the session.
    public func shutdown(timeout: TimeInterval = 5) {
        let signal = DispatchSemaphore(value: 0)
        let (effects, waiting) = core.withLock { core -> ([Effect], Bool) in
            core.shuttingDown = true
            var effects: [Effect] = []
            for item in core.queue {
                if item.state == .waiting { item.state = .queued; item.nextRetryAt = nil }
                if item.busy, !item.finishing {
                    item.stopIntent = .shutdown
                    for task in item.allTasks { effects.append { task.cancel() } }
                }
            }
            let busy = core.items.values.contains { $0.busy || $0.finishing }
            if busy { core.shutdownSignal = signal }
            core.sampler?.cancel()
            core.sampler = nil
            return (effects, busy)
        }
        effects.forEach { $0() }
        if waiting { _ = signal.wait(timeout: .now() + timeout) }
        checkpointAll()
        // A write waiting for its interval would come too late: take what is pending now.
        storeQueue.sync { writePending() }
        eventQueue.sync {}
        BoundedDelegateQueue.invalidate(session)
    }

    // MARK: Internals

    /// Runs `body` under the lock, then (outside it) its effects, the store writes and the events for what changed.
    /// Nothing in it calls into the session and waits: tasks are made, resumed and cancelled on the call queue
    /// of BoundedDelegateQueue (SessionTask), so it runs on any thread, the delegate queue's included, with
    /// the backpressure in place.
    @discardableResult
    func mutate<R: Sendable>(_ body: (inout Core) -> (R, [Effect])) -> R {
        let (result, effects, events, finished) = core.withLock {
            core -> (R, [Effect], [TransferEvent], [CheckedContinuation<Void, Never>]) in
            let (result, effects) = body(&core)
            core.recheckSettledPrefix()
            core.syncSlotHolders()
            let changed = core.changed
            let items = changed.sorted().compactMap { core.items[$0] }
            // Snapshots only for a listener; the store gets records either way.
            let events = self.onEvent == nil ? [] : items.map {
                TransferEvent(id: $0.id, state: $0.state, snapshot: self.snapshot(of: $0))
            }
            core.changed.removeAll()
            let order = core.orderChanged ? core.queue.map(\.id) : nil
            core.orderChanged = false
            let records = items.map(Self.record)
            if !records.isEmpty || order != nil { self.enqueueStoreWrite(records, order: order) }
            let finished = self.takeFinishedWaiters(&core, changed: changed.union(core.removedNow))
            core.removedNow.removeAll()
            return (result, effects, events, finished)
        }
        effects.forEach { $0() }
        if let onEvent, !events.isEmpty {
            eventQueue.async { events.forEach(onEvent) }
        }
        // Waiters wake only after this change's events are queued, so a waiter that drains the
        // event queue (as shutdown does) sees every event up to the one that finished its items.
        finished.forEach { $0.resume() }
        return result
    }

    /// State changes reach the store off the delegate path, in order. Records queued while the store is
    /// busy are written together, in one transaction (a burst of small downloads makes thousands).
    private func enqueueStoreWrite(_ records: [StoredTransfer], order: [TransferID]?) {
        let schedule = pendingWrites.withLock { pending -> Bool in
            for record in records {
                if pending.records[record.id] == nil { pending.sequence.append(record.id) }
                pending.records[record.id] = record
            }
            if let order { pending.order = order }
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        guard schedule else { return }
        let due = pendingWrites.withLock { $0.lastWrite.map { $0 + configuration.storeWriteInterval } }
        if let due, due > .now() {
            storeQueue.asyncAfter(deadline: due) { self.writePending() }
        } else {
            storeQueue.async { self.writePending() }
        }
    }

    /// Writes whatever changes are pending (none when an earlier call took them). On the store queue.
    private func writePending() {
        let (records, order) = pendingWrites.withLock { pending -> ([StoredTransfer], [TransferID]?) in
            defer { pending = PendingWrites(lastWrite: .now()) }
            return (pending.sequence.compactMap { pending.records[$0] }, pending.order)
        }
        if !records.isEmpty { try? store.save(records) }
        if let order { try? store.saveOrder(order) }
    }

    /// What the store keeps of an item. Its place in the queue is not part of it: saveOrder writes positions.
    static func record(_ item: Item) -> StoredTransfer {
        var stored = StoredTransfer(id: item.id, position: 0, spec: item.spec, state: item.state)
        stored.fileName = item.fileName
        stored.savedPath = item.savedPath
        stored.validators = item.validators
        stored.bytesDone = currentBytes(item)
        stored.segments = item.segments.map { segments in
            // What is on disk: each range's done plus what its running attempt has flushed.
            segments.enumerated().map { index, segment in
                var segment = segment
                segment.done = min(segment.end - segment.start, segment.done + (item.segmentRuns[index]?.flushedBytes ?? 0))
                return segment
            }
        }
        stored.bytesExpected = item.run?.bytesExpected ?? item.bytesExpected
        stored.retries = item.retries
        stored.attempts = Array(item.attempts.suffix(20))
        stored.lastError = item.lastError
        stored.rateLimit = item.rateLimit
        return stored
    }

    private static func isFinished(_ id: TransferID, in core: Core) -> Bool {
        guard let item = core.items[id] else { return true }
        return item.state.isTerminal && !item.busy
    }

    /// Waiters whose last pending item just finished; only the items this change touched are looked at.
    private func takeFinishedWaiters(_ core: inout Core, changed: Set<TransferID>) -> [CheckedContinuation<Void, Never>] {
        guard !core.waiters.isEmpty else { return [] }
        let done = changed.filter { Self.isFinished($0, in: core) }
        guard !done.isEmpty else { return [] }
        var finished: [CheckedContinuation<Void, Never>] = []
        for (token, var waiter) in core.waiters {
            waiter.pending.subtract(done)
            if waiter.pending.isEmpty {
                finished.append(waiter.continuation)
                core.waiters.removeValue(forKey: token)
            } else {
                core.waiters[token] = waiter
            }
        }
        return finished
    }

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
        let ready = open.lazy.filter { $0.state == .queued && !$0.busy && !$0.finishing }.map { ($0.id, $0.host) }
        return Scheduler.pick(slotHolders: core.slotHolders.values, ready: ready, maxConcurrent: core.maxConcurrent,
                              maxPerHost: core.maxPerHost)
    }

    private func launch(_ id: TransferID, _ core: inout Core) -> [Effect] {
        guard let item = core.items[id] else { return [] }
        item.generation += 1
        item.stopIntent = nil
        item.nextRetryAt = nil
        if item.spec.direction == .download, item.segments != nil {
            let effects = launchSegments(item)
            core.items[id] = item
            core.touch(id)
            return effects
        }
        let started: Result<(run: any TaskRun, makeTask: MakeTask, offset: Int64), TransferFailure>
        switch item.spec.direction {
        case .download: started = startDownload(item)
        case .upload: started = startUpload(item)
        }
        switch started {
        case let .failure(failure):
            item.state = .failed
            item.lastError = failure.message
            core.items[id] = item
            core.touch(id)
            return []
        case let .success((run, makeTask, offset)):
            item.attempts.append(Attempt(number: item.attempts.count + 1, startedAt: Date(), fromOffset: offset))
            item.bytesDone = offset
            item.rate.reset()
            item.state = .running
            item.run = run
            let limits = limitMembership(item)
            item.task = SessionTask.make(makeTask) { [delegate] task in
                delegate.register(run, for: task, limits: limits)
                task.resume()
            }
            core.items[id] = item
            core.touch(id)
            return []
        }
    }

    /// Makes an attempt's task, on the call queue (see SessionTask).
    typealias MakeTask = @Sendable () -> URLSessionTask

    private func startDownload(_ item: Item) -> Result<(run: any TaskRun, makeTask: MakeTask, offset: Int64), TransferFailure> {
        let id = item.id
        let generation = item.generation
        var offset: Int64 = 0
        if let name = item.fileName {
            let partPath = PartialFile.path(directory: item.spec.directory, name: name)
            var st = stat()
            if stat(partPath, &st) == 0 { offset = Int64(st.st_size) }
            // Resume only what can be checked: the `.part` file must fit the size the server gave, and that
            // size must be known (a 206 is then accepted only with the same total). Otherwise start over.
            let total = item.validators.totalLength
            if item.restartFromZero || (offset > 0 && (total == nil || offset > total!)) {
                _ = truncate(partPath, 0)
                offset = 0
            }
        }
        item.restartFromZero = false
        let start = DownloadRun.Start(spec: item.spec, fileName: item.fileName, offset: offset,
                                      knownTotal: offset > 0 ? item.validators.totalLength : nil,
                                      bufferSize: configuration.writeBufferSize)
        do throws(TransferFailure) {
            let run = try DownloadRun(start: start, names: names, accepted: { [weak self] name, validators, rangeable in
                self?.responseAccepted(id, generation: generation, fileName: name, validators: validators, rangeable: rangeable)
            }) { [weak self] outcome, validators, status, name in
                self?.runFinished(id, generation: generation, outcome: outcome) { item in
                    if let name { item.fileName = name }
                    if validators != Validators() { item.validators = validators }
                    item.lastStatus = status ?? item.lastStatus
                }
            }
            let request = run.makeRequest(validators: item.validators, userAgent: configuration.userAgent,
                                          timeout: configuration.idleTimeout, hostHeaders: configuration.hostHeaders)
            return .success((run, { [session] in session.dataTask(with: request) }, offset))
        } catch {
            return .failure(error)
        }
    }

    private func startUpload(_ item: Item) -> Result<(run: any TaskRun, makeTask: MakeTask, offset: Int64), TransferFailure> {
        let id = item.id
        let generation = item.generation
        guard let upload = item.spec.upload else { return .failure(.local("an upload without a body")) }
        let plan: BodyPlan
        do throws(BodyError) {
            plan = try BodyPlan.make(for: upload)
        } catch {
            return .failure(.local(error.description))
        }
        let run = UploadRun(spec: item.spec, plan: plan, standardInputPath: configuration.standardInputPath) { [weak self] outcome, response in
            self?.runFinished(id, generation: generation, outcome: outcome) { item in
                if let response {
                    item.response = response
                    item.lastStatus = response.status
                }
            }
        }
        let request = run.makeRequest(userAgent: configuration.userAgent, timeout: configuration.idleTimeout,
                                      hostHeaders: configuration.hostHeaders)
        return .success((run, { [session] in session.uploadTask(withStreamedRequest: request) }, 0))
    }

    /// A download's response was accepted: its file name and validators are recorded (and so saved) at once.
    /// When the download asked for segments and this response shows a file worth splitting, the probe
    /// is stopped and the file is fetched in ranges instead (see TransferManager+Segments).
    private func responseAccepted(_ id: TransferID, generation: Int, fileName: String, validators: Validators, rangeable: Bool) {
        mutate { core in
            guard let item = core.items[id], item.generation == generation else { return ((), []) }
            item.fileName = fileName
            if validators != Validators() { item.validators = validators }
            item.bytesExpected = validators.totalLength ?? item.bytesExpected
            var effects: [Effect] = []
            if rangeable, let plan = segmentPlan(for: item), item.stopIntent == nil {
                item.segments = plan
                item.stopIntent = .split
                if let task = item.task { effects.append { task.cancel() } }
            }
            core.items[id] = item
            core.touch(id)
            return ((), effects)
        }
    }

    /// An attempt ended. `update` records what the attempt learned (name, validators, the server's answer).
    private func runFinished(
        _ id: TransferID, generation: Int, outcome: RunOutcome, update: (Item) -> Void
    ) {
        mutate { core in
            guard let item = core.items[id], item.generation == generation, let run = item.run else {
                return ((), [])
            }
            item.bytesDone = run.bytesDone
            item.bytesExpected = run.bytesExpected ?? item.bytesExpected
            item.run = nil
            item.task = nil
            update(item)
            let status = item.lastStatus
            var effects: [Effect] = []
            var attemptError: String?
            let intent = item.stopIntent
            item.stopIntent = nil

            switch (outcome, intent) {
            case let (.finished(.some(handover)), intent) where intent != .cancel:
                // Finished (even a probe that got the whole file before it could be stopped): check and rename.
                item.segments = nil
                item.finishing = true
                item.state = .running
                effects.append { [finishQueue] in finishQueue.async { self.finalize(id, generation, handover) } }
            case (.finished(.none), _):
                // An upload the server accepted: done, whatever was asked meanwhile.
                item.state = .completed
                item.lastError = nil
            case (.stopped, .some(.split)), (.failed, .some(.split)):
                // The probe of a segmented download ended: the ranges start from a preallocated file.
                attemptError = nil
                effects += prepareSegments(item)
            case let (_, .some(intent)):
                // Stopped on purpose: pause and cancel already set the state; a shutdown leaves it queued for the next start.
                if intent == .shutdown { item.state = .queued }
                if case let .failed(failure, _) = outcome { attemptError = failure.message } else { attemptError = "stopped" }
            case (.finished, .none):
                break  // handled by the first case
            case (.stopped, .none):
                // Nobody asked for it: treat it like a lost connection.
                attemptError = "stopped unexpectedly"
                effects += scheduleRetryOrFail(item, .transport(code: NSURLErrorCancelled, message: "cancelled"), progressed: false)
            case let (.failed(failure, progressed), .none):
                attemptError = failure.message
                effects += scheduleRetryOrFail(item, failure, progressed: progressed)
            }
            if var attempt = item.attempts.popLast() {
                attempt.endedAt = Date()
                attempt.status = status
                attempt.error = attemptError
                item.attempts.append(attempt)
            }
            core.items[id] = item
            core.touch(id)
            self.checkShutdown(&core)
            return ((), effects + self.pump(&core))
        }
    }

    func scheduleRetryOrFail(_ item: Item, _ failure: TransferFailure, progressed: Bool) -> [Effect] {
        if progressed, item.bytesDone > item.highWater {
            // Progress was made: a flaky link that keeps moving should not run out of retries.
            item.highWater = item.bytesDone
            item.retries = 0
            item.dnsRetries = 0
        }
        let policy = configuration.retry
        var idempotent = true
        if let upload = item.spec.upload {
            guard configuration.retryUploads else { return fail(item, failure.message) }
            guard upload.isRepeatable else {
                return fail(item, failure.message + " (standard input cannot be sent again)")
            }
            idempotent = upload.method.uppercased() != "POST"
        }
        switch policy.decide(failure, retries: item.retries, dnsRetries: item.dnsRetries, idempotent: idempotent) {
        case .giveUp:
            return fail(item, failure.message)
        case let .retry(after):
            item.retries += 1
            if case let .transport(code, _) = failure, policy.dnsTransportCodes.contains(code) { item.dnsRetries += 1 }
            item.state = .waiting
            item.lastError = failure.message
            item.nextRetryAt = Date().addingTimeInterval(after)
            let id = item.id
            let generation = item.generation
            // A stale timer is harmless: it only fires for the same generation still waiting.
            return [{ [timerQueue] in
                timerQueue.asyncAfter(deadline: .now() + after) { [weak self] in
                    self?.retryTimerFired(id, generation: generation)
                }
            }]
        }
    }

    func fail(_ item: Item, _ message: String) -> [Effect] {
        item.state = .failed
        item.lastError = message
        return []
    }

    private func retryTimerFired(_ id: TransferID, generation: Int) {
        mutate { core in
            guard let item = core.items[id], item.generation == generation, item.state == .waiting else { return ((), []) }
            item.state = .queued
            core.items[id] = item
            core.touch(id)
            return ((), self.pump(&core))
        }
    }

    /// The last steps of a download, off the delegate queue: size check, checksum, fsync, rename to the final name.
    func finalize(_ id: TransferID, _ generation: Int, _ handover: FileHandover) {
        let spec = core.withLock { $0.items[id]?.spec }
        guard let spec else { return }
        var result: Result<String, TransferFailure>
        do throws(TransferFailure) {
            try handover.file.sync()
            let size = handover.file.size
            if let total = handover.total, size != total {
                throw .protocolViolation("received \(size) of \(total) bytes")
            }
            if let expected = spec.sha256 {
                let actual = try FileDigest.sha256Hex(fd: handover.file.fd, path: handover.file.path)
                if actual != expected {
                    throw .integrity("SHA-256 mismatch: expected \(expected), got \(actual)")
                }
            }
            handover.file.close()
            let finalName = try names.publish(directory: spec.directory, name: handover.fileName)
            result = .success(finalName)
        } catch {
            handover.file.close()
            result = .failure(error)
        }
        mutate { core in
            guard let item = core.items[id], item.generation == generation else { return ((), []) }
            item.finishing = false
            var effects: [Effect] = []
            switch result {
            case let .success(finalName):
                names.release(directory: spec.directory, name: handover.fileName)
                names.release(directory: spec.directory, name: finalName)
                item.fileName = finalName
                item.savedPath = spec.directory + "/" + finalName
                item.state = .completed
                item.lastError = nil
                item.bytesDone = handover.total ?? item.bytesDone
                if item.validators.totalLength == nil { item.validators.totalLength = item.bytesDone }
            case let .failure(failure):
                if case .integrity = failure { item.restartFromZero = true }
                if var attempt = item.attempts.popLast() {
                    attempt.error = failure.message
                    item.attempts.append(attempt)
                }
                effects += scheduleRetryOrFail(item, failure, progressed: false)
            }
            core.items[id] = item
            core.touch(id)
            self.checkShutdown(&core)
            return ((), effects + self.pump(&core))
        }
    }

    func checkShutdown(_ core: inout Core) {
        guard core.shuttingDown, let signal = core.shutdownSignal else { return }
        if !core.items.values.contains(where: { $0.busy || $0.finishing }) {
            core.shutdownSignal = nil
            signal.signal()
        }
    }

    // MARK: Sampling: rates and checkpoints, only while something runs

    private static let samplePeriod: Double = 0.2
    static let rateHistoryLength = 60

    private func startSampler() -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: timerQueue)
        timer.schedule(deadline: .now() + Self.samplePeriod, repeating: Self.samplePeriod, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.sample() }
        timer.resume()
        return timer
    }

    private func sample() {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let due = core.withLock { core -> (checkpoints: [(TransferID, Int64)], runs: [any TaskRun])? in
            var anyRunning = false
            var moved = false
            for item in core.queue where item.state == .running && item.busy {
                anyRunning = true
                let done = Self.currentBytes(item)
                if done != item.bytesDone { moved = true }
                item.bytesDone = done
                item.rate.add(totalBytes: done, at: now)
                if now - item.lastHistorySample >= 1 {
                    item.lastHistorySample = now
                    item.rateHistory.append(item.rate.bytesPerSecond ?? 0)
                    if item.rateHistory.count > Self.rateHistoryLength { item.rateHistory.removeFirst() }
                }
            }
            if moved { core.version &+= 1 }
            if !anyRunning, !core.items.values.contains(where: { $0.finishing }) {
                core.sampler?.cancel()
                core.sampler = nil
            }
            guard now - core.lastCheckpoint >= 1 else { return nil }
            core.lastCheckpoint = now
            let busy = core.items.values.filter(\.busy)
            let runs: [any TaskRun] = busy.flatMap { item in (item.run.map { [$0] } ?? []) + item.segmentRuns.values.map { $0 } }
            // Segmented downloads store which ranges are done (what was flushed before now: a record never
            // claims more than the file holds), queued under the lock like every record, so that it cannot
            // overtake a newer one; the others only a byte count.
            let records = busy.filter { $0.segments != nil }.map(Self.record)
            if !records.isEmpty { self.enqueueStoreWrite(records, order: nil) }
            let checkpoints = busy.filter { $0.segments == nil }.map { ($0.id, Self.currentBytes($0)) }
            return (checkpoints, runs)
        }
        guard let due else { return }
        // Once a second: buffered bytes go to disk, then their count to the store.
        due.runs.forEach { $0.flushToDisk() }
        if !due.checkpoints.isEmpty {
            let store = self.store
            let checkpoints = due.checkpoints
            storeQueue.async { for (id, bytes) in checkpoints { try? store.checkpoint(id, bytesDone: bytes) } }
        }
    }

    private func checkpointAll() {
        let checkpoints = core.withLock { core in core.items.values.map { ($0.id, Self.currentBytes($0)) } }
        let store = self.store
        storeQueue.async { for (id, bytes) in checkpoints { try? store.checkpoint(id, bytesDone: bytes) } }
    }
}
