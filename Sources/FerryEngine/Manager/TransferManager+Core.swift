import FerryModel
import FerryStorage
import Foundation

extension TransferManager {
    /// What the engine keeps under its one lock: the queue's index, the loaded items, the slot book, and what a
    /// change under way gathers for the store and the monitor (TransferManager.mutate). Its parts keep their own
    /// invariants (QueueIndex, SlotBook); `violations` checks them against each other.
    struct Core {
        /// Every item in the user's order (rank, then id), loaded or not, counted per state and queued per host.
        var queue = QueueIndex()
        /// The loaded items: those running, finishing, waiting for a retry, or that a command or an add just
        /// changed (they go back to the store once idle: `evictIdle`).
        var items: [TransferID: Transfer] = [:]
        /// Items kept loaded whatever their state (an add the store refused: they have no row to come back from).
        var pinned: Set<TransferID> = []
        /// The batches that are trees (Batch.tree), with where each is from: a view may show each as one row.
        var trees: [Int64: String] = [:]
        /// The batches' own limits as the store has them (Batch.rateLimit): what their rows say. The transport
        /// holds those of batches with work left (BandwidthLimits.batches).
        var batchLimits: [Int64: Int64] = [:]
        /// What the store held of each tree's bytes when last read (TransferManager.treeSums), and when: the
        /// store writer's generation and the tree's item count then.
        var treeStored: [Int64: (generation: UInt64, items: Int, sums: ByteSums)] = [:]
        /// Trees' walks this engine knows (TreeWalker): started or resumed here, or kept unfinished by the store.
        var walks: [Int64: WalkRun] = [:]
        /// Who waits for every walk to stop listing (TransferManager.waitUntilWalksStop).
        var walkWaiters: [CheckedContinuation<Void, Never>] = []
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
        /// Whether anything may start now (pump's rule, and a restart in place's).
        var mayStart: Bool { !shuttingDown && schedulingHeld == 0 }
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
            /// The same for each tree (Batch.tree) that moves: its row's rate, as the header's (a tree of small
            /// files, each done between two samples, has no running file with a rate of its own).
            var trees: [Int64: (bytes: Int64, rate: RateEstimator)] = [:]

            /// Counts what `transfer` moved since it was last counted; `tree`: its batch is a tree.
            mutating func count(_ transfer: Transfer, bytes: Int64, tree: Bool) {
                let delta = bytes - transfer.countedBytes
                transfer.countedBytes = bytes
                guard delta > 0 else { return }  // a restart from zero counts from there
                if transfer.spec.direction == .download { down += delta } else { up += delta }
                if tree, let batch = transfer.batch { trees[batch, default: (0, RateEstimator())].bytes += delta }
            }

            /// A sample at `now` of every rate.
            mutating func sample(at now: TimeInterval) {
                downRate.add(totalBytes: down, at: now)
                upRate.add(totalBytes: up, at: now)
                for batch in trees.keys { trees[batch]!.rate.add(totalBytes: trees[batch]!.bytes, at: now) }
            }

            /// Something moves after a quiet stretch: the totals' rates begin again (a first sample spanning the
            /// quiet stretch said too little for seconds). A tree's go on: between its small files nothing may run
            /// at a sample, the sampler stops and starts again, and a tree's rate begun again at each start never
            /// had two samples (a loaded machine showed no rate for a whole tree); only trees no longer moving go.
            mutating func restartRates(moving: Set<Int64>) {
                downRate = RateEstimator()
                upRate = RateEstimator()
                trees = trees.filter { moving.contains($0.key) }
            }
        }

        /// The items that hold a connection slot, with their hosts: what the scheduler counts against the caps.
        /// Kept up to date from `changed` (syncSlotHolders).
        var slots = SlotBook()
        /// The items finishing (FileFinisher): no slot, but no more than `finishingLimit` at once, each with
        /// its file open (a disk slower than the network would pile them up). Kept up to date with `slots`.
        var finishing: Set<TransferID> = []
        /// How many items may be finishing at once: the scheduler starts nothing more while they are that many.
        /// At most a quarter of the cache of loaded items: finishing items are loaded, and a cache full of them
        /// would drop the items read ahead of their start (loadAhead) before they ran.
        var finishingLimit: Int { min(max(64, 2 * caps.global), max(1, loadedLimit / 4)) }
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
            for id in removedNow {
                slots.set(id, nil)
                finishing.remove(id)
            }
            for id in changed {
                guard let item = items[id] else {
                    slots.set(id, nil)
                    finishing.remove(id)
                    continue
                }
                let holds = item.holdsSlot
                let wasMoving = slots.holders[id] != nil || finishing.contains(id)
                if item.finishing { finishing.insert(id) } else { finishing.remove(id) }
                // Leaving its slot, and again leaving its finish (whose file has its whole size only then): what
                // it moved since it was last counted counts now.
                if !holds, wasMoving { moved.count(item, bytes: item.bytesDone, tree: item.batch.map { trees[$0] != nil } ?? false) }
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
            let holding = Dictionary(uniqueKeysWithValues: items.values.lazy.filter(\.holdsSlot)
                                        .map { ($0.id, queue.hostIDs[$0.host] ?? -1) })
            if holding != slots.holders {
                found.append("the slot book \(slots.holders) is not the items holding slots \(holding): an item changed without touch")
            }
            let finishingNow = Set(items.values.lazy.filter(\.finishing).map(\.id))
            if finishingNow != finishing {
                found.append("the finishing items \(finishing.sorted()) are not those loaded finishing \(finishingNow.sorted())")
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
}
