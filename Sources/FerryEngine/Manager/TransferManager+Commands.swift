import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What front ends ask of the engine: `perform(QueueCommand)`, the one way in. The mutators of one item or one
/// setting beside it are test support (`@_spi(Testing)`: a test imports them by name), and the engine's own
/// building blocks of `perform`; no front end calls them.
extension TransferManager {
    /// Queues a transfer at the end of the queue and starts it when a slot is free.
    @discardableResult
    @_spi(Testing) public func add(_ spec: TransferSpec) -> TransferID {
        add([spec])[0]
    }

    /// Queues transfers at the end of the queue, saved to the store together; when the store refuses them
    /// (a full disk, a damaged file), nothing is queued and the error says why.
    @_spi(Testing) public func addSaved(_ specs: [TransferSpec]) throws(StateError) -> [TransferID] {
        try addSaved(specs, batch: nil, reuse: false).map(\.id)
    }

    /// Queues what `specs` ask for in `batch`, saved to the store together (all or none; a refusal says why).
    /// With `reuse`, a transfer already in the queue (TransferSpec.identity) is not added twice: a paused,
    /// failed or cancelled one is queued again (to resume from its `.part` file), a queued or running one
    /// goes on, a completed one whose file is in place is left done.
    /// With `paused`, new items are queued paused (they start on a resume).
    @_spi(Testing) public func addSaved(_ specs: [TransferSpec], batch: Int64?, reuse: Bool, paused: Bool = false) throws(StateError) -> [AddedItem] {
        let additions: [QueueAddition]
        // Removes and moves still on their way to the store first: a removed item's row must not be found
        // again as the same transfer, nor a rank given twice.
        storeWriter.flush()
        do {
            additions = try store.add(specs, batch: batch, reuse: reuse)
        } catch {
            throw Self.addRefused(error)
        }
        return queue(additions, paused: paused)
    }

    /// What the store added (QueueStore.add, WalkStore.recordListing) joins the engine's queue: a new item is
    /// appended and may start, one found again goes on (resumed, retried) or is said done.
    /// `walk`: the additions are a walk's listing (TreeWalker.addListing): they are queued paused when the walk
    /// was held or forgotten after the listing was kept and before they joined the queue (a pause of the batch
    /// that chose its items in between would not have found them, and they would run).
    func queue(_ additions: [QueueAddition], paused: Bool = false, walk: Int64? = nil) -> [AddedItem] {
        var newLimits: [(TransferID, Int64?)] = []
        var moved: [(TransferID, Int64)] = []
        defer {
            for (id, rate) in newLimits { limits.setItem(id.rawValue, rate) }
            for (id, batch) in moved { limits.moveItem(id.rawValue, toBatch: batch) }
        }
        return mutate { core in
            var effects: [Effect] = []
            var outcomes: [AddedItem] = []
            outcomes.reserveCapacity(additions.count)
            for addition in additions {
                let record = addition.item
                guard addition.existing, let transfer = loaded(record.id, &core) else {
                    // New, or one another process added that this engine has not seen (not one it just removed).
                    if core.queue.position(of: record.id, rank: record.position) == nil, record.id.rawValue >= core.nextID || !addition.existing {
                        appendAdded(record, &core)
                    }
                    core.allow([record.id])
                    outcomes.append(AddedItem(id: record.id, how: addition.existing ? .alreadyQueued : .added))
                    continue
                }
                let before = transfer.state
                // One running now answers to its new batch's limit (its transfers were made in the old one).
                if transfer.busy, let batch = record.batch, batch != transfer.batch { moved.append((record.id, batch)) }
                transfer.batch = record.batch
                core.touch(record.id)
                // Asked again with other options: the store's record has them; one in memory takes them now.
                var changed: [OptionChange]?
                if let previous = addition.previousSpec {
                    changed = record.spec.optionChanges(from: previous)
                    if transfer.spec != record.spec { effects += carryOut(transfer.retake(record.spec), for: transfer, &core) }
                    if record.spec.rateLimit != previous.rateLimit { newLimits.append((record.id, transfer.rateLimit)) }
                }
                let how: AddedItem.How
                switch before {
                case .completed:
                    how = .alreadyDone
                case .paused:
                    effects += carryOut(transfer.resume() ?? [], for: transfer, &core)
                    how = .resumed
                case .failed, .cancelled:
                    effects += carryOut(transfer.retry() ?? [], for: transfer, &core)
                    how = .resumed
                case .queued, .running, .waiting:
                    how = .alreadyQueued
                }
                if how != .alreadyDone { core.allow([record.id]) }
                var outcome = AddedItem(id: record.id, how: how, before: before)
                outcome.changed = changed.flatMap { $0.isEmpty ? nil : $0 }
                outcome.name = TransferSnapshot.displayName(spec: transfer.spec, fileName: transfer.fileName)
                outcome.savedPath = transfer.savedPath
                outcomes.append(outcome)
            }
            // Paused before any scheduling pass could start them.
            if paused || walk.map({ core.walks[$0].map(\.progress.held) ?? true }) == true {
                for outcome in outcomes where outcome.how == .added {
                    guard let transfer = loaded(outcome.id, &core) else { continue }
                    effects += carryOut(transfer.pause() ?? [], for: transfer, &core)
                }
            }
            return (outcomes, effects + self.pump(&core))
        }
    }

    /// A new item at the end of the queue: an index entry, and its event for a listener. It is loaded now while
    /// the cache of loaded items has room (its record is in hand: the scheduler then starts it without reading
    /// its row back under the lock, which made a burst of small files a third slower); a long add loads its
    /// first items only, the rest when they run.
    private func appendAdded(_ record: StoredTransfer, _ core: inout Core) {
        let row = QueueIndexRow(record)
        // One that took over a `.part` file left by the same transfer (Leftover) holds its name from now on.
        if let claim = row.claim { names.adopt(directory: claim.directory, name: claim.name) }
        core.append(row)
        if core.items.count < core.loadedLimit { _ = load(record, &core) }
        core.version &+= 1
        if monitorHearsAdds { core.told.append(.added(snapshot(of: record, state: record.state))) }
    }

    /// A new batch for what the user typed (the items of one command).
    @_spi(Testing) public func makeBatch(command: String, tree: String? = nil, rateLimit: Int64? = nil) throws(StateError) -> Batch {
        do {
            var batch = try store.makeBatch(command: command, tree: tree)
            if let tree { core.withLock { $0.trees[batch.id] = tree } }
            if let rateLimit, rateLimit > 0 {
                try store.saveBatchLimit(batch.id, rateLimit)
                batch.rateLimit = rateLimit
                limits.setBatch(batch.id, rateLimit)
                core.withLock { $0.batchLimits[batch.id] = rateLimit }
            }
            return batch
        } catch {
            throw Self.addRefused(error)
        }
    }

    /// The store refused an add (a full disk, a damaged file): what the user reads.
    static func addRefused(_ error: any Error) -> StateError {
        StateError("cannot add to the queue: \((error as? StateError)?.description ?? "\(error)"); nothing was queued")
    }

    /// A sentence for the user when the queue cannot be saved, once per distinct reason; nil otherwise.
    public func newStoreFailureNotice() -> String? {
        storeWriter.takeNewFailure().map { "cannot save the queue: \($0); the changes are kept and saved once it can be" }
    }

    /// Queues transfers at the end of the queue, saved to the store together (all or none).
    @discardableResult
    @_spi(Testing) public func add(_ specs: [TransferSpec]) -> [TransferID] {
        storeWriter.flush()
        do {
            let stored = try store.add(specs)
            return mutate { core in
                for record in stored {
                    appendAdded(record, &core)
                    core.allow([record.id])
                }
                return (stored.map(\.id), self.pump(&core))
            }
        } catch {
            // Still run them, kept in memory; the user sees that they will not survive a restart.
            let storeError = "not saved to the queue: \(error)"
            return mutate { core in
                let ids = specs.map { spec -> TransferID in
                    let record = StoredTransfer(id: TransferID(core.nextID), position: (core.queue.last?.rank ?? -1) + 1, spec: spec)
                    core.append(QueueIndexRow(record))
                    let transfer = Transfer(stored: record, policy: configuration.retry, retryUploads: configuration.retryUploads, clock: clock)
                    transfer.lastFailure = ItemFailure(FailureCause(.other), storeError)
                    core.items[record.id] = transfer
                    core.pinned.insert(record.id)
                    core.touch(record.id)
                    core.allow([record.id])
                    return record.id
                }
                return (ids, self.pump(&core))
            }
        }
    }

    /// Stops a running or waiting transfer and keeps its `.part` file and validators.
    @_spi(Testing) public func pause(_ id: TransferID) { event(id) { $0.pause() } }

    /// Queues a paused transfer again; it continues from its `.part` offset. (An engine that runs its own
    /// items only runs it from now on too.)
    @_spi(Testing) public func resume(_ id: TransferID) { event(id, allow: true) { $0.resume() } }

    /// Stops the transfer and any pending retry at once and frees its slot. The `.part` file stays for `retry`.
    /// A transfer whose file is being finished (checksum, rename) keeps it if it checks out.
    @_spi(Testing) public func cancel(_ id: TransferID) { event(id) { $0.cancel() } }

    /// Queues a failed or cancelled transfer again with a fresh retry budget (and may run it, as `resume`).
    @_spi(Testing) public func retry(_ id: TransferID) { event(id, allow: true) { $0.retry() } }

    /// Takes an item off the queue. A finished file is never touched; `deletePartial` also deletes the `.part` file.
    /// False when there is no such item.
    @discardableResult
    @_spi(Testing) public func remove(_ id: TransferID, deletePartial: Bool = false) -> Bool {
        !remove([id], deletePartial: deletePartial).isEmpty
    }

    /// Takes items off the queue in one pass over it (a remove of thousands costs one); those removed.
    func remove(_ ids: [TransferID], deletePartial: Bool) -> [TransferID] {
        mutate { core in
            let gone = core.queue.remove(Set(ids))
            guard !gone.isEmpty else { return ([], []) }
            var effects: [Effect] = []
            var partsOf: [(directory: String, name: String)] = []
            // The `.part` files kept (no deletePartial) of unfinished downloads: the same transfer asked again
            // goes on from them (Leftover).
            var leftovers: [Leftover] = []
            func keep(_ record: StoredTransfer) {
                if !deletePartial, let leftover = Leftover(keptBy: record) { leftovers.append(leftover) }
            }
            // Unfinished resumable uploads the server keeps: ended there too.
            var discards: [(TransferSpec, ResumableUpload)] = []
            // Unloaded unfinished items: their names (claimed, and their `.part` files') come from the store.
            let unloaded = records(of: gone.filter { core.items[$0.id] == nil && $0.state != .completed }.map(\.id))
            for entry in gone {
                let id = entry.id
                core.removedNow.insert(id)
                if monitor != nil { core.told.append(.removed(id)) }
                core.textMatches?.remove(id)
                core.storedSortKeys[id] = nil
                if let transfer = core.items.removeValue(forKey: id) {
                    core.pinned.remove(id)
                    let tasks = transfer.tasks
                    if !tasks.isEmpty { effects.append { tasks.forEach { $0.cancel() } } }
                    if let name = transfer.fileName, transfer.state != .completed {
                        partsOf.append((transfer.spec.directory, name))
                        keep(transfer.record())
                    }
                    if transfer.state != .completed, let upload = transfer.resumable { discards.append((transfer.spec, upload)) }
                } else if let record = unloaded[id] {
                    if let name = record.fileName {
                        partsOf.append((record.spec.directory, name))
                        keep(record)
                    }
                    if let upload = record.resumable { discards.append((record.spec, upload)) }
                }
            }
            storeWriter.remove(gone.map(\.id))
            for (directory, name) in partsOf {
                names.release(directory: directory, name: name)
                if deletePartial { effects.append { _ = unlink(PartialFile.path(directory: directory, name: name)) } }
            }
            for (spec, upload) in discards { effects += discardOnServer(upload, of: spec) }
            if !leftovers.isEmpty { effects.append { [store, leftovers] in try? store.keepLeftovers(leftovers) } }
            core.settledPrefix = 0
            core.version &+= 1
            return (gone.map(\.id), effects + self.pump(&core))
        }
    }

    /// A download not done nor finishing takes the file name `asked` (QueueCommand.rename): its `.part` file, if
    /// it has one, is renamed (linked under the new name, never over a file, then unlinked), the name recorded
    /// first. One with an attempt in flight stops it (queued again), its file moves once nothing is in flight,
    /// and it goes on from there under the new name (the name is taken for it now). False when it has that name
    /// already; a name that is taken, unsafe or not a single name is a UsageError, and nothing changes.
    func rename(_ id: TransferID, to asked: String) throws(UsageError) -> Bool {
        guard let name = FileNaming.safeBaseName(asked), name == asked else {
            throw UsageError("out: not a file name ferry would write: \(TerminalSafe.sanitize(asked)) (one name, no folders)")
        }
        let outcome: Result<Bool, UsageError> = mutate { core in
            guard let transfer = loaded(id, &core) else { return (.failure(UsageError("no item \(id)")), []) }
            guard transfer.spec.direction == .download else { return (.failure(UsageError("\(id) is an upload: it has no file name to change")), []) }
            // A rename waits for the attempt to stop; one asked while the engine stops would be answered and then
            // lost with the engine's memory.
            guard !core.shuttingDown else {
                return (.failure(UsageError("the engine is stopping: \(id) keeps its name; ask again once an engine runs")), [])
            }
            guard transfer.state != .completed, !transfer.finishing else {
                return (.failure(UsageError("\(id) is \(transfer.finishing ? "finishing" : "completed"): its file has its name")), [])
            }
            let directory = transfer.spec.directory
            guard name != (transfer.pendingName ?? transfer.fileName ?? transfer.spec.fileName) else { return (.success(false), []) }
            guard names.take(directory: directory, name: name) else {
                return (.failure(UsageError("out: \(TerminalSafe.sanitize(name)) is taken in \(directory)")), [])
            }
            if transfer.busy {
                if let earlier = transfer.pendingName { names.release(directory: directory, name: earlier) }
                transfer.pendingName = name
                core.version &+= 1
                return (.success(true), carryOut(transfer.stopForRename(), for: transfer, &core))
            }
            switch move(transfer, to: name, &core) {
            case let .failure(refusal): return (.failure(refusal), [])
            case let .success(effects): return (.success(true), effects)
            }
        }
        return try outcome.get()
    }

    /// The file of `transfer` (not in flight) takes `name`, already taken for it in NameClaims: its `.part` file
    /// moves, the spec says the name (saved before this returns: an engine that stops just after, as a rename
    /// that waited for its attempt's stop may see, must not exit with the new name unsaved). On failure the old
    /// name stays.
    private func move(_ transfer: Transfer, to name: String, _ core: inout Core) -> Result<[Effect], UsageError> {
        let id = transfer.id
        let directory = transfer.spec.directory
        if let old = transfer.fileName {
            // Recorded before the file moves: a crash in between leaves the name the file will have.
            try? store.recordClaim(id, fileName: name, validators: transfer.validators)
            let from = PartialFile.path(directory: directory, name: old), to = PartialFile.path(directory: directory, name: name)
            let err = NameClaims.move(from, to: to)
            if err != 0, err != ENOENT {
                let reason = err == EEXIST ? "taken" : String(cString: strerror(err))
                names.release(directory: directory, name: name)
                try? store.recordClaim(id, fileName: old, validators: transfer.validators)
                return .failure(UsageError("out: \(TerminalSafe.sanitize(name)) in \(directory): \(reason)"))
            }
            names.release(directory: directory, name: old)
            transfer.fileName = name
        }
        var spec = transfer.spec
        spec.fileName = name
        _ = transfer.retake(spec)
        core.touch(id)
        core.version &+= 1
        try? store.saveSpec(id, spec)
        return .success([])
    }

    /// A rename asked while an attempt was in flight is carried out once none is (Transfer.pendingName). A name
    /// that cannot be had then (a file made there meanwhile) leaves the old one, and so does an attempt that got
    /// the whole file before it stopped (its file is published under the name it had).
    func renameWhenStopped(_ transfer: Transfer, _ core: inout Core) -> [Effect] {
        guard let name = transfer.pendingName, !transfer.busy else { return [] }
        transfer.pendingName = nil
        guard !transfer.finishing, transfer.state != .completed else {
            names.release(directory: transfer.spec.directory, name: name)
            return []
        }
        return (try? move(transfer, to: name, &core).get()) ?? []
    }

    /// Carries out a front end's command (QueueCommand) on this engine. An id that names no item is a
    /// UsageError naming it, and then nothing changes; a queue that cannot be saved is a StateError.
    public func perform(_ command: QueueCommand) throws -> CommandResult {
        var result = CommandResult()
        // A tree's walk is held (or forgotten) before its batch's items are chosen, so that no file it lists joins
        // the batch after them; a resume or retry lets it go on once they changed (below).
        switch command {
        case .pause, .cancel, .remove: steerWalks(command)
        default: break
        }
        // The states before: what a command left as it was is named with its state.
        let (ids, before) = try command.selection.map { selection -> ([TransferID], [TransferID: TransferState]) in
            try core.withLock { core in
                let text = textMatches(for: selection.filter, &core)
                let loaded = core.items
                let ids = try selection.choose(among: core.queue.map { ($0.id, $0.state, $0.batch) },
                                               text: text.map { text in { loaded[$0].map(text.matches) ?? text.contains($0) } }).get()
                let chosen = Set(ids)
                var before: [TransferID: TransferState] = [:]
                for entry in core.queue where chosen.contains(entry.id) { before[entry.id] = entry.state }
                return (ids, before)
            }
        } ?? ([], [:])
        switch command {
        case let .remove(selection, deletePart):
            result.outcome.changed = remove(ids, deletePartial: deletePart)
            // A batch removed as a whole takes its limit with it (its bucket and the shares that follow from it).
            if let batch = selection.wholeBatch, core.withLock({ $0.batchLimits[batch] }) != nil { try? setBatchLimit(batch, nil) }
            let removed = Set(result.outcome.changed)
            result.outcome.left = ids.filter { !removed.contains($0) }.compactMap { id in before[id].map { .init(id: id, state: $0) } }
        case .pause, .resume, .cancel, .retry:
            let took: [TransferID]
            switch command {
            case .pause: took = events(ids) { $0.pause() }
            case .resume: took = events(ids, allow: true) { $0.resume() }
            case .cancel: took = events(ids) { $0.cancel() }
            default: took = events(ids, allow: true) { $0.retry() }
            }
            let changed = Set(took)
            for id in ids {
                if changed.contains(id) {
                    result.outcome.changed.append(id)
                } else if let state = before[id] {
                    result.outcome.left.append(.init(id: id, state: state))
                }
            }
        case let .move(_, direction):
            result.outcome.changed = move(ids, direction)
        case let .walk(job):
            result.batch = try startWalk(job)
        case let .add(addition):
            guard !addition.specs.isEmpty else { throw UsageError("add needs at least one transfer") }
            var batch = addition.batch ?? 0
            var addition = addition
            if addition.batch == nil {
                // A new tree's limit is the tree's (Batch.rateLimit): `put -r --limit-rate` gives every file the same one.
                batch = try makeBatch(command: addition.typed, tree: addition.tree,
                                      rateLimit: addition.tree == nil ? nil : Self.commonLimit(addition.specs)).id
            }
            // Files given their batch's rate (in every part of an add sent in parts: ControlClient.add) share it: it is
            // not each one's own.
            if let rate = core.withLock({ $0.batchLimits[batch] }) {
                for index in addition.specs.indices where addition.specs[index].rateLimit == rate { addition.specs[index].rateLimit = nil }
            }
            // Forced: an unfinished item of the same transfer goes, with its `.part` file, so that the new one
            // starts afresh under the same name (a completed one's file stays; the new copy gets a new name).
            var replaced: [String: TransferID] = [:]
            if addition.replaces {
                let stale: [(id: TransferID, identity: String)]
                do {
                    stale = try store.unfinished(sameAs: addition.specs.compactMap(\.identity))
                } catch {
                    throw Self.addRefused(error)
                }
                let removed = Set(remove(stale.map(\.id), deletePartial: true))
                for (id, identity) in stale where removed.contains(id) { replaced[identity] = id }
            }
            defer {
                if !replaced.isEmpty, var added = result.added {
                    for (index, item) in zip(added.indices, added) where item.how == .added && index < addition.specs.count {
                        added[index].replaced = addition.specs[index].identity.flatMap { replaced[$0] }
                    }
                    result.added = added
                }
            }
            if let placement = addition.placement {
                // Placed before any can start (aria2's addUri with a position: added, then placed, an item could
                // start out of its place in between).
                result.added = try holdingScheduling { () throws(StateError) -> [AddedItem] in
                    let added = try addSaved(addition.specs, batch: batch, reuse: !addition.force, paused: addition.paused)
                    for item in added where item.how == .added { _ = place(item.id, placement) }
                    return added
                }
            } else {
                result.added = try addSaved(addition.specs, batch: batch, reuse: !addition.force, paused: addition.paused)
            }
            result.batch = batch
        case let .place(id, placement):
            result.placed = place(id, placement)
            if result.placed != nil { result.outcome.changed = [id] } else { result.outcome.left = before[id].map { [.init(id: id, state: $0)] } ?? [] }
        case let .setConcurrency(count):
            guard ConcurrencyCaps.range.contains(count) else {
                throw UsageError("transfers at once: \(ConcurrencyCaps.range.lowerBound) to \(ConcurrencyCaps.range.upperBound), got \(count)")
            }
            setConcurrency(maxConcurrent: count)
            if let path = configuration.liveSettingsPath {
                LiveSettings.update(path) { $0.concurrency = count; $0.concurrencyChangedAt = Date() }
            }
        case let .setRateLimit(selection, rate):
            if let batch = selection.wholeBatch {
                // A batch named as a whole (a tree's row, its GID): the batch's own limit, shared by its items.
                try setBatchLimit(batch, rate)
                result.outcome.changed = ids
            } else {
                for id in ids where setRateLimit(id, rate) { result.outcome.changed.append(id) }
            }
        case let .rename(id, name):
            if try rename(id, to: name) { result.outcome.changed = [id] } else { result.outcome.left = before[id].map { [.init(id: id, state: $0)] } ?? [] }
        case let .setGlobalLimits(download, upload):
            setGlobalLimits(download: download, upload: upload)
            if let path = configuration.liveSettingsPath {
                LiveSettings.update(path) { $0.limits = .init(download: download, upload: upload); $0.limitsChangedAt = Date() }
            }
        }
        if command.stateChange == .resume || command.stateChange == .retry { steerWalks(command) }
        return result
    }

    /// Moves an item in the user's queue order; false when it did not move (no such item, or at that end).
    @discardableResult
    @_spi(Testing) public func move(_ id: TransferID, _ direction: QueueMove) -> Bool { !move([id], direction).isEmpty }

    /// Moves items together (QueueMove.apply); those that moved. Only the ranks that changed are written.
    func move(_ ids: [TransferID], _ direction: QueueMove) -> [TransferID] {
        mutate { core in
            let moved = Self.move(Set(ids), direction, &core)
            guard !moved.isEmpty else { return ([], []) }
            return (ids.filter(moved.contains), self.pump(&core))
        }
    }

    /// Moves `wanted` (QueueMove.apply) and keeps what changed: the items' ranks, the ranks to write. The
    /// items whose rank changed.
    private static func move(_ wanted: Set<TransferID>, _ direction: QueueMove, _ core: inout Core) -> Set<TransferID> {
        let ranked = core.queue.move(wanted, direction)
        guard !ranked.isEmpty else { return [] }
        core.ranksChanged(ranked)
        core.version &+= 1
        return Set(ranked.map(\.id))
    }

    /// Puts an item at a place among the items in the placement's states (aria2's waiting list: its
    /// changePosition), counted from 0 in queue order (Placement.target, kept within the list). To the first or
    /// the last place it goes to the queue's top or bottom, one rank written, as `move` does; elsewhere the
    /// items from its old place to its new one each take their neighbour's rank, so the others keep their
    /// order, and those ranks are written. The place it has then; nil when the item is not in those states.
    func place(_ id: TransferID, _ placement: Placement) -> Int? {
        mutate { core in
            let among = core.queue.indices.filter { placement.among.contains(core.queue[$0].state) }
            guard let from = among.firstIndex(where: { core.queue[$0].id == id }) else { return (nil, []) }
            let to = min(max(0, placement.target(at: from, count: among.count)), among.count - 1)
            if to != from, to == 0 || to == among.count - 1 {
                _ = Self.move([id], to == 0 ? .top : .bottom, &core)
                return (to, self.pump(&core))
            }
            // Ranks are unique where moves made them; where two are equal, the id orders them and a shift cannot.
            guard to != from, let ranked = core.queue.shift(from: among[from], to: among[to]) else { return (from, []) }
            core.ranksChanged(ranked)
            core.version &+= 1
            return (to, self.pump(&core))
        }
    }

    /// Sets the global cap (kept in ConcurrencyCaps.range); a per-host cap of its own stays, one that follows
    /// the global cap moves with it. Running transfers are never interrupted by a lower cap.
    @_spi(Testing) public func setConcurrency(maxConcurrent: Int) {
        mutate { core in
            core.caps = core.caps.with(global: maxConcurrent)
            core.version &+= 1
            return ((), self.pump(&core))
        }
    }

    /// Stops every attempt (their `.part` files are flushed and kept; they stay queued for the next start),
    /// waits up to `timeout` for them to drain, and releases the session.
    public func shutdown(timeout: TimeInterval = 5) {
        let signal = DispatchSemaphore(value: 0)
        let (effects, waiting) = core.withLock { core -> ([Effect], Bool) in
            core.shuttingDown = true
            // A listing under way is not kept: the next engine lists it again.
            for walk in core.walks.values { walk.task?.cancel() }
            var effects: [Effect] = []
            for transfer in core.items.values {
                effects += carryOut(transfer.shutdown(), for: transfer, &core)
            }
            let busy = core.items.values.contains { $0.busy || $0.finishing }
            if busy { core.shutdownSignal = signal }
            core.sampler?.cancel()
            core.sampler = nil
            return (effects, busy)
        }
        effects.forEach { $0() }
        if waiting { _ = signal.wait(timeout: .now() + timeout) }
        // In one transaction (a thousand loaded items made a thousand of them at the end of a run).
        storeWriter.checkpoint(core.withLock { core in core.items.values.filter { !$0.state.isTerminal }.map { ($0.id, $0.currentBytes) } })
        storeWriter.flush()
        drainEvents()
        BoundedDelegateQueue.invalidate(session)
    }
}
