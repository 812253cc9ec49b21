import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// What front ends read: snapshots of the queue, and waiting for items to finish.
extension TransferManager {
    public func snapshot() -> QueueSnapshot { snapshot(nil) }

    /// The rows of `view`'s window (nil: the whole queue), with the queue's counts and rates: a slice of the
    /// queue's index (a view of every item) or one walk over it, then a snapshot made only of the rows in the
    /// window, read from the store for the items not loaded.
    public func snapshot(_ view: QueueView?) -> QueueSnapshot {
        core.withLock { core in
            var totals = QueueTotals()
            totals.count = core.queue.counts
            totals.lastID = core.nextID - 1
            totals.finishing = core.finishing.count
            // While anything runs (only items holding a slot can): the engine's bytes moved per second, finished
            // files included; until that has two samples, the sum of the running items' rates.
            let running = core.slots.holders.keys.compactMap { core.items[$0] }.filter { $0.state == .running }
            if !running.isEmpty {
                func sum(_ direction: Direction) -> Double {
                    running.filter { $0.spec.direction == direction }.compactMap(\.rate.bytesPerSecond).reduce(0, +)
                }
                totals.downloadBytesPerSecond = core.moved.downRate.bytesPerSecond ?? sum(.download)
                totals.uploadBytesPerSecond = core.moved.upRate.bytesPerSecond ?? sum(.upload)
            }
            let (rows, total, aroundRow, firstRunning) = window(view ?? .everything, &core)
            var items: [TransferSnapshot] = []
            items.reserveCapacity(rows.count)
            let stored = records(of: rows.filter { core.items[$0.id] == nil }.map(\.id))
            // Trees as rows: each tree's row is its first file's, with the tree's sums.
            var grouping = false
            if let view { grouping = groups(in: view, core) }
            var treeBatches: Set<Int64> = []
            if grouping { for entry in rows { if let batch = entry.batch, core.trees[batch] != nil { treeBatches.insert(batch) } } }
            let trees = treeSums(treeBatches, &core)
            for entry in rows {
                var item: TransferSnapshot
                if let batch = entry.batch, let tree = trees[batch] {
                    let first: TransferSnapshot
                    if let transfer = core.items[entry.id] {
                        first = transfer.snapshot()
                    } else if let record = stored[entry.id] {
                        first = snapshot(of: record, state: entry.state)
                    } else {
                        continue
                    }
                    item = tree.row(first)
                } else if let transfer = core.items[entry.id] {
                    item = transfer.snapshot()
                } else if let record = stored[entry.id] {
                    item = snapshot(of: record, state: entry.state)
                } else {
                    continue  // removed by another process meanwhile
                }
                // The rate history only for the item whose details are shown.
                if let view, view.limit != nil, view.detail != entry.id.rawValue { item.rateHistory = [] }
                items.append(item)
            }
            var snapshot = QueueSnapshot(version: core.version, items: items, totals: totals,
                                         maxConcurrent: core.caps.global, maxPerHost: core.caps.perHost)
            let rates = limits.current
            snapshot.downloadLimit = rates.download
            snapshot.uploadLimit = rates.upload
            snapshot.walks = core.walks.keys.sorted().compactMap { core.walks[$0]?.progress }
            snapshot.window = view.map { QueueWindow(offset: $0.offset, total: total, of: $0) }
            snapshot.window?.around = view?.around
            snapshot.window?.aroundRow = aroundRow
            if let view, view.selectsAll { snapshot.window?.firstRunning = grouping ? firstRunning : Self.firstRunning(core) }
            return snapshot
        }
    }

    /// The row of the first running item: after the settled head of the queue, a walk of at most 100,000 rows
    /// (the items that run are near the first that are not done).
    private static func firstRunning(_ core: Core) -> Int? {
        guard !core.slots.isEmpty || !core.finishing.isEmpty else { return nil }
        let start = min(core.settledPrefix, core.queue.count)
        for at in start..<min(core.queue.count, start + 100_000) {
            let entry = core.queue[at]
            if (core.items[entry.id]?.state ?? entry.state) == .running { return at }
        }
        return nil
    }

    /// The records of `view`'s window, as the store keeps them with the bytes done now, and the rows in the
    /// view (`ferry list` pages through a running engine's queue with it).
    /// Changes not yet in the store are written first: a reader of the store alongside sees them.
    /// The rate of each running item among `ids` (the one every surface shows), for what lists records.
    public func rates(of ids: [TransferID]) -> [TransferID: Double] {
        core.withLock { core in
            var rates: [TransferID: Double] = [:]
            for id in ids {
                if let transfer = core.items[id], transfer.state == .running, let rate = transfer.rate.bytesPerSecond { rates[id] = rate }
            }
            return rates
        }
    }

    public func records(_ view: QueueView) -> (items: [StoredTransfer], total: Int) {
        storeWriter.flush()
        return core.withLock { core in
            let (rows, total, _, _) = window(view, &core)
            let stored = records(of: rows.filter { core.items[$0.id] == nil }.map(\.id))
            let items = rows.compactMap { entry -> StoredTransfer? in
                if let transfer = core.items[entry.id] { return transfer.record() }
                guard var record = stored[entry.id] else { return nil }
                record.state = entry.state
                record.position = entry.rank
                return record
            }
            return (items, total)
        }
    }

    /// The entries in `view`'s window, and how many rows the whole view has: a slice of the queue when the
    /// view has every item, else one walk over the queue's index (a filter's text is matched on what the
    /// store keeps of names and URLs: TextMatches).
    /// With trees as rows in a view of every item, also the row of the first running item (its tree's).
    private func window(_ view: QueueView, _ core: inout Core) -> (rows: [Entry], total: Int, aroundRow: Int?, firstRunning: Int?) {
        // A window in queue order: what was kept for a sort goes (made again if a sort is asked again), not held
        // for the engine's life.
        if view.sort == nil, core.sortedRows != nil || !core.storedSortKeys.isEmpty {
            core.storedSortKeys = [:]
            core.sortedRows = nil
        }
        let around = view.around.map(TransferID.init)
        let grouping = groups(in: view, core)
        if view.selectsAll, !grouping {
            return (Array(core.queue[view.window(among: core.queue.count)]), core.queue.count, around.flatMap { core.position(of: $0) }, nil)
        }
        // The `around` item's row, sorted: its own, or its tree's (the one row of its batch).
        let aroundTree = grouping ? around.flatMap { core.position(of: $0) }.flatMap { core.queue[$0].batch }.flatMap { core.trees[$0] != nil ? $0 : nil } : nil
        func isAround(_ entry: Entry) -> Bool { entry.id == around || (aroundTree != nil && entry.batch == aroundTree) }
        // A sorted view whose rows cannot have moved since they were sorted: its window is a slice of them. A
        // 100,000-row view sorted by name re-sorted at every sample while 2 items ran: 34 % of a core, 0.4 %
        // in queue order.
        if let sort = view.sort, let sorted = core.sortedRows, sorted.view == SortedRows.key(view), sorted.made == SortedRows.stamp(sort, core) {
            return (Array(sorted.rows[view.window(among: sorted.rows.count)]), sorted.total,
                    around == nil ? nil : sorted.rows.firstIndex(where: isAround), nil)
        }
        var conditions = view
        conditions.filter = nil
        let matcher = conditions.matcher
        let text = textMatches(for: view.filter, &core)
        var rows: [Entry] = []
        var total = 0
        var aroundRow: Int?
        let sorted = view.sort != nil
        // With trees as rows: the row each tree has (the first of its files in the view), by batch.
        var treeRow: [Int64: Int] = [:]
        var firstRunning: Int?
        for entry in core.queue {
            guard matcher.matches(id: entry.id, state: entry.state, batch: entry.batch, name: { nil }, url: { "" }) else { continue }
            if let text, !(core.items[entry.id].map(text.matches) ?? text.contains(entry.id)) { continue }
            if firstRunning == nil, grouping, (core.items[entry.id]?.state ?? entry.state) == .running {
                firstRunning = entry.batch.flatMap { treeRow[$0] } ?? total
            }
            if grouping, !sorted, let batch = entry.batch, core.trees[batch] != nil {
                if let row = treeRow[batch] {
                    if entry.id == around { aroundRow = row }
                    continue
                }
                treeRow[batch] = total
            }
            if sorted || view.windowContains(total) { rows.append(entry) }
            if entry.id == around { aroundRow = total }
            total += 1
        }
        guard let sort = view.sort else { return (rows, total, aroundRow, firstRunning) }
        let keys = sortKeys(of: rows, &core)
        rows = sort.sorted(rows) { keys[$0.id] ?? QueueSort.Key(id: $0.id, state: $0.state, name: "", progress: nil, rate: nil) }
        if grouping {
            // Sorted, a tree's row is where its first file sorts; an item of it named by `around` is on that row.
            var first: [Int64: TransferID] = [:]
            rows = rows.filter { entry in
                guard let batch = entry.batch, core.trees[batch] != nil else { return true }
                return first.updateValue(first[batch] ?? entry.id, forKey: batch) == nil
            }
            total = rows.count
        }
        core.sortedRows = SortedRows(view: SortedRows.key(view), made: SortedRows.stamp(sort, core), rows: rows, total: total)
        return (Array(rows[view.window(among: rows.count)]), total, around == nil ? nil : rows.firstIndex(where: isAround), nil)
    }

    /// Whether `view` shows trees as rows now (it asks, and the queue has trees).
    func groups(in view: QueueView, _ core: Core) -> Bool { view.groupsTrees && !core.trees.isEmpty }

    /// The sums of each tree in `batches`: files per state from the queue's index, bytes from the loaded items as
    /// they are now and from the store for the rest (its pending writes first), the rate of those running.
    func treeSums(_ batches: Set<Int64>, _ core: inout Core) -> [Int64: TreeSums] {
        guard !batches.isEmpty else { return [:] }
        var sums: [Int64: TreeSums] = [:]
        for batch in batches {
            sums[batch] = TreeSums(row: TreeRow(batch: batch, label: core.trees[batch] ?? "", files: core.queue.countsPerBatch[batch] ?? [:]))
            sums[batch]!.row.walk = core.walks[batch]?.progress
            sums[batch]!.row.rateLimit = core.batchLimits[batch]
        }
        var loaded: [Int64: [TransferID]] = [:]
        for (id, transfer) in core.items {
            guard let batch = transfer.batch, sums[batch] != nil else { continue }
            loaded[batch, default: []].append(id)
            sums[batch]!.done += transfer.currentBytes
            if let expected = transfer.bytesExpected { sums[batch]!.expected += expected } else { sums[batch]!.row.sizesUnknown += 1 }
            if transfer.state == .running, let rate = transfer.rate.bytesPerSecond { sums[batch]!.rate += rate }
        }
        // While it runs, the tree's bytes moved per second (counted as the header's are), else the sum of its
        // running files' rates.
        for batch in batches where sums[batch]!.row.files[.running, default: 0] > 0 {
            if let rate = core.moved.trees[batch]?.rate.bytesPerSecond { sums[batch]!.rate = rate }
        }
        // The store's sums of the whole tree (read again only once something was written or the tree's items
        // changed: a walk of its index, 20 ms at 100,000 files), less its figures of the loaded items. The
        // writer's pending changes are written first only when something was handed to it since the sums kept
        // (a window is asked at every change: no store write under the lock each time); its generation is read
        // before that write, so sums kept under it hold everything handed over up to it.
        let generation = storeWriter.generation
        let kept = batches.allSatisfy { batch in
            core.treeStored[batch].map { $0.generation == generation && $0.items == sums[batch]!.row.count } ?? false
        }
        if !kept { storeWriter.flush() }
        for batch in batches {
            let items = sums[batch]!.row.count
            var whole: ByteSums
            if let kept = core.treeStored[batch], kept.generation == generation, kept.items == items {
                whole = kept.sums
            } else {
                guard let read = try? store.byteSums(batch: batch, only: nil) else { continue }
                whole = read
                core.treeStored[batch] = (generation, items, read)
            }
            if let ids = loaded[batch], let stale = try? store.byteSums(batch: batch, only: ids) { whole = whole - stale }
            sums[batch]!.done += whole.done
            sums[batch]!.expected += whole.expected
            sums[batch]!.row.sizesUnknown += whole.unknown
        }
        return sums
    }

    /// What a sort compares of each row: loaded items as they are now, the others as the store keeps them
    /// (read once, and kept until the item is loaded again: an item not loaded does not change).
    private func sortKeys(of rows: [Entry], _ core: inout Core) -> [TransferID: QueueSort.Key] {
        var keys: [TransferID: QueueSort.Key] = [:]
        keys.reserveCapacity(rows.count)
        var missing: [TransferID] = []
        for entry in rows {
            if let transfer = core.items[entry.id] {
                // From the transfer's fields: a whole snapshot (attempts, rate history) per loaded item per window was waste.
                keys[entry.id] = QueueSort.Key(id: transfer.id, state: transfer.state, spec: transfer.spec, fileName: transfer.fileName,
                                               bytesDone: transfer.currentBytes, bytesExpected: transfer.bytesExpected,
                                               rate: transfer.rate.bytesPerSecond)
            } else if var stored = core.storedSortKeys[entry.id] {
                stored.state = entry.state
                keys[entry.id] = stored
            } else {
                missing.append(entry.id)
            }
        }
        guard !missing.isEmpty else { return keys }
        // What the store has of them, its pending writes first (an item just evicted); the state is the index's.
        storeWriter.flush()
        let states = Dictionary(uniqueKeysWithValues: rows.lazy.map { ($0.id, $0.state) })
        try? store.forEachSortKey(of: missing) { id, url, name, done, expected in
            guard let url = URL(string: url), let state = states[id] else { return }
            let key = QueueSort.Key(id: id, state: state, url: url, knownName: name, bytesDone: done, bytesExpected: expected, rate: nil)
            core.storedSortKeys[id] = key
            keys[id] = key
        }
        return keys
    }

    /// The items whose name or URL hold `filter`'s text (nil: no text): scanned from the store once per text,
    /// then only for items added since; loaded items are matched as they are (their names may be newer). A
    /// text typed on from the last one (it holds it) is matched only on the last one's matches, when they are
    /// few: a filter typed a key at a time reads the whole store once or twice, not once a key.
    func textMatches(for filter: String?, _ core: inout Core) -> TextMatches? {
        let matcher = QueueView(filter: filter).matcher
        guard let needle = matcher.needleBytes else { return nil }
        if let cached = core.textMatches, cached.needle == needle {
            var matches = cached
            rescan(&matches, after: matches.scannedThrough, core)
            core.textMatches = matches
            return matches
        }
        var matches = TextMatches(matcher: matcher)
        // Names not yet written (an item just evicted) are in StoreWriter's hands: written first.
        storeWriter.flush()
        if let last = core.textMatches, let lastNeedle = last.needle, needle.first != UInt8(ascii: "#"),
           lastNeedle.first != UInt8(ascii: "#"), needle.count > lastNeedle.count,
           needle.firstRange(of: lastNeedle) != nil, last.ids.count <= Self.refineLimit {
            try? store.forEachText(of: last.ids) { id, url, name in
                if matches.matches(id: id, url: url, name: name) { matches.ids.append(id) }
            }
            matches.ids.sort()
            matches.scannedThrough = last.scannedThrough
            rescan(&matches, after: matches.scannedThrough, core)
        } else {
            rescan(&matches, after: TransferID(0), core)
        }
        core.textMatches = matches
        return matches
    }

    /// Below this many matches a longer text is matched on them only (read by id), not on the whole store.
    static let refineLimit = 50_000

    /// Matches `matches`' text on the items added after `id`.
    private func rescan(_ matches: inout TextMatches, after id: TransferID, _ core: Core) {
        let newest = TransferID(core.nextID - 1)
        guard id < newest else { return }
        var found: [TransferID] = []
        try? store.forEachText(after: id) { id, url, name in
            if matches.matches(id: id, url: url, name: name) { found.append(id) }
        }
        for id in found { matches.insert(id) }
        matches.scannedThrough = newest
    }

    /// Items per state (kept as they change: no walk over the queue).
    public var counts: [TransferState: Int] { core.withLock { $0.queue.counts } }

    /// What this engine has still to do: the items of its scope running, queued or waiting for a retry, or
    /// still busy. (A headless run waits for them: its own, and any added, resumed or retried through it.)
    public func workLeft() -> Set<TransferID> {
        core.withLock { core in
            var left = Set<TransferID>()
            for entry in core.queue where core.runnable?.contains(entry.id) ?? true {
                if let item = core.items[entry.id] {
                    if item.state.isPending || item.busy || item.finishing { left.insert(entry.id) }
                } else if entry.state.isPending {
                    left.insert(entry.id)
                }
            }
            return left
        }
    }

    /// A batch's items in queue order, from the queue's index (no item is read: a snapshot of a whole tree to
    /// know its files read every one that had left memory back from the store).
    public func ids(inBatch batch: Int64) -> [TransferID] {
        core.withLock { core in core.queue.compactMap { $0.batch == batch ? $0.id : nil } }
    }

    /// The sampler runs (it stops at its first tick with nothing running or being finished).
    package var sampling: Bool { core.withLock { $0.sampler != nil } }

    /// Something holds a connection slot or is being finished: byte counts and rates are moving.
    public var moving: Bool { core.withLock { !$0.slots.isEmpty || !$0.finishing.isEmpty } }

    /// Changes whenever a state, the order, a setting or a byte count changed (what `snapshot().version` says).
    public var version: UInt64 { core.withLock { $0.version } }

    /// Ids of the queue's items within `range`, at most `limit` of them (in no order): one walk of the queue.
    public func ids(in range: ClosedRange<Int64>, limit: Int) -> [TransferID] {
        core.withLock { core in
            var found: [TransferID] = []
            for entry in core.queue where range.contains(entry.id.rawValue) {
                found.append(entry.id)
                if found.count >= limit { break }
            }
            return found
        }
    }

    /// A tree's row (as a view with trees as rows gives it) by its batch; nil when the batch is no tree or has
    /// no file (yet).
    public func treeRow(batch: Int64) -> TransferSnapshot? {
        core.withLock { core in
            guard core.trees[batch] != nil, let entry = core.queue.first(where: { $0.batch == batch }),
                  let sums = treeSums([batch], &core)[batch] else { return nil }
            if let transfer = core.items[entry.id] { return sums.row(transfer.snapshot()) }
            return records(of: [entry.id])[entry.id].map { sums.row(snapshot(of: $0, state: entry.state)) }
        }
    }

    public func snapshot(of id: TransferID) -> TransferSnapshot? {
        core.withLock { core in
            if let transfer = core.items[id] { return transfer.snapshot() }
            guard let at = core.position(of: id), let record = records(of: [id])[id] else { return nil }
            return snapshot(of: record, state: core.queue[at].state)
        }
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
                    // Loaded items as they are; the rest as the queue's index has them (a walk, once per wait).
                    var pending = ids.filter { core.items[$0].map { !Self.isFinished($0) } ?? false }
                    let unloaded = ids.filter { core.items[$0] == nil }
                    if !unloaded.isEmpty {
                        for entry in core.queue where unloaded.contains(entry.id) && !entry.state.isTerminal { pending.insert(entry.id) }
                    }
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

    private static func isFinished(_ transfer: Transfer) -> Bool {
        transfer.state.isTerminal && !transfer.busy
    }

    /// Waiters whose last pending item just finished; only the items this change touched are looked at.
    func takeFinishedWaiters(_ core: inout Core, changed: Set<TransferID>) -> [CheckedContinuation<Void, Never>] {
        guard !core.waiters.isEmpty else { return [] }
        // A changed item is loaded, or was removed.
        let done = changed.filter { id in core.items[id].map(Self.isFinished) ?? true }
        guard !done.isEmpty else { return [] }
        var finished: [CheckedContinuation<Void, Never>] = []
        // Each waiter's set changed where it is kept: a copy of it taken out and put back shared its storage with
        // the one still in `waiters`, so each change copied the whole set (a headless run waits for every item it
        // has: O(n) per finished item, quadratic in the queue).
        for token in Array(core.waiters.keys) {
            core.waiters[token]!.pending.subtract(done)
            if core.waiters[token]!.pending.isEmpty, let waiter = core.waiters.removeValue(forKey: token) {
                finished.append(waiter.continuation)
            }
        }
        return finished
    }
}

/// The items whose name or URL hold a filter's text, as far as the store knows their names (loaded items are
/// matched as they are): kept for the last text asked for, so a window of a filtered view of a long queue is
/// a walk over the index, not over the store, each time it is drawn.
/// A sorted view's rows, and when they were sorted: by name, state or time added the order changes only
/// with a state, the order, a name or the queue's items (the engine's version less its byte samples); by
/// progress or rate it also follows the bytes, re-sorted once a second of samples (5 of them).
/// A tree's row as the engine makes it: its files' counts (TreeRow) and their bytes and rate.
struct TreeSums {
    var row: TreeRow
    var done: Int64 = 0
    var expected: Int64 = 0
    var rate: Double = 0

    /// The row: `first` (the tree's first file in the view) with the tree's state, bytes, rate, ETA and limit (the
    /// tree's own). What is a file's alone (its failure, retries, attempts, limit) is not the tree's.
    func row(_ first: TransferSnapshot) -> TransferSnapshot {
        // A total with sizes still unknown would be a part said as the whole: none until each is known.
        var item = TransferSnapshot(id: first.id, spec: first.spec, state: TreeRow.state(of: row.files), bytesDone: done,
                                    bytesExpected: row.sizesUnknown == 0 ? expected : nil)
        item.batch = row.batch
        item.tree = row
        item.rateLimit = row.rateLimit
        if item.state == .running, rate > 0 {
            item.bytesPerSecond = rate
            if row.sizesUnknown == 0 { item.eta = Double(max(0, expected - done)) / rate }
        }
        return item
    }
}

struct SortedRows {
    let view: QueueView
    let made: Stamp
    let rows: [TransferManager.Entry]
    let total: Int

    /// The view without its window and detail: what the rows depend on.
    static func key(_ view: QueueView) -> QueueView {
        var key = view.conditions
        key.sort = view.sort
        return key
    }

    struct Stamp: Equatable {
        let shape: UInt64
        let second: UInt64
    }

    static func stamp(_ sort: QueueSort, _ core: TransferManager.Core) -> Stamp {
        let live = sort == .progress || sort == .rate
        return Stamp(shape: core.version &- core.samples, second: live ? core.samples / 5 : 0)
    }
}

struct TextMatches {
    let matcher: QueueView.Matcher
    var needle: [UInt8]? { matcher.needleBytes }
    /// Sorted: a million matches take 8 MB, not a set's 40.
    var ids: [TransferID] = []
    /// Every item up to this id was matched (the store is read again only for items added since).
    var scannedThrough = TransferID(0)

    init(matcher: QueueView.Matcher) { self.matcher = matcher }

    private func index(of id: TransferID) -> (found: Bool, at: Int) {
        var low = 0, high = ids.count
        while low < high {
            let mid = (low + high) / 2
            if ids[mid] < id { low = mid + 1 } else { high = mid }
        }
        return (low < ids.count && ids[low] == id, low)
    }

    func contains(_ id: TransferID) -> Bool { index(of: id).found }

    mutating func insert(_ id: TransferID) {
        let (found, at) = index(of: id)
        if !found { ids.insert(id, at: at) }
    }

    mutating func remove(_ id: TransferID) {
        let (found, at) = index(of: id)
        if found { ids.remove(at: at) }
    }

    /// Whether an item of this URL and name (as the store keeps them) holds the text.
    func matches(id: TransferID, url: String, name: String?) -> Bool {
        matcher.matches(id: id, state: .queued, batch: nil, name: { name }, url: { url })
    }

    func matches(_ item: Transfer) -> Bool {
        matcher.matches(id: item.id, state: .queued, batch: nil, spec: item.spec, fileName: item.fileName)
    }

    /// An item going back to the store: what it is now called decides.
    mutating func note(_ item: Transfer) {
        if matches(item) { insert(item.id) } else { remove(item.id) }
    }
}

package extension TransferManager {
    /// Bytes each item of the queue costs in the engine's index, loaded or not.
    static var indexEntrySize: Int { MemoryLayout<Entry>.stride }

    /// How many items are loaded (running, waiting, finishing, or in the cache of idle ones).
    var loadedCount: Int { core.withLock { $0.items.count } }
}

extension TransferManager {
    /// What is out of step in the engine's core, counted afresh (empty: nothing; Core.violations). For tests: a
    /// walk over everything, at any size (the asserts that check it in debug builds stop at 2,000 items).
    @_spi(Testing) public func violations() -> [String] { core.withLock { $0.violations() } }
}
