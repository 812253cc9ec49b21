import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// A walk as the engine runs it: where it is, and the task listing its directories while it goes on.
struct WalkRun: Sendable {
    var progress: WalkProgress
    var task: Task<Void, Never>?
    /// Which task is the walk's (a hold and a resume in quick turn: the old one's end must not clear the new one).
    var run = 0
}

/// The engine walks trees (`ferry get -r`, QueueCommand.walk) durably: the walk and each directory it found are
/// kept in the store (WalkStore), and each listing's files are queued in the transaction that marks it listed.
/// An engine stopped anywhere (a crash, `ferry stop`, kill -9) finds each directory either listed with its files
/// queued, or still to list: the next engine goes on from there, listing nothing twice that was kept, losing no
/// file. Four listings at once per walk; the files each one names are decided against DIR (TreeSync) and join
/// the tree's batch at the end of the queue, where the scheduler starts them while the walk goes on.
///
/// The batch's commands steer its walk: a pause or cancel holds it (nothing more is listed; a listing under way
/// is not kept and is asked again later), a resume goes on, a retry lists again the directories whose listing
/// failed, a remove forgets it.
extension TransferManager {
    /// `.walk`: a new tree's batch, its walk kept and started. Its id.
    func startWalk(_ job: TreeJob) throws -> Int64 {
        guard let scope = TreeScope(root: job.root) else {
            throw UsageError("-r walks http(s), sftp and ftp directories; \(TerminalSafe.sanitize(job.root.scheme ?? "this")) has no listing")
        }
        var job = job
        job.root = scope.root
        // The tree's limit is the tree's, its files share it (Batch.rateLimit), not each file's.
        let rate = job.template.rateLimit
        job.template.rateLimit = nil
        let batch = try makeBatch(command: job.typed, tree: TerminalSafe.redactedURL(scope.root), rateLimit: rate).id
        do {
            try store.startWalk(job, batch: batch)
        } catch {
            throw Self.addRefused(error)
        }
        core.withLock { $0.walks[batch] = WalkRun(progress: WalkProgress(batch: batch, pending: 1)) }
        goOn(batch)
        return batch
    }

    /// The walks the store keeps unfinished (an engine stopped mid-walk) go on, but those held. Called once by
    /// an engine of the whole queue as it starts (an engine of its own items leaves other batches as they are).
    func resumeWalks() {
        guard let stored = try? store.walks() else { return }
        for walk in stored where !walk.progress.ended {
            core.withLock { $0.walks[walk.progress.batch] = WalkRun(progress: walk.progress) }
            if !walk.progress.held { goOn(walk.progress.batch) }
        }
    }

    /// Whether any walk is listing (an engine with one is not idle).
    public var walking: Bool { core.withLock { $0.walks.values.contains { $0.task != nil } } }

    /// Every walk this engine knows, by batch.
    public var walks: [WalkProgress] { core.withLock { core in core.walks.keys.sorted().compactMap { core.walks[$0]?.progress } } }

    /// The batch's walk lists on (after the task of an earlier run, if one is ending, has ended).
    func goOn(_ batch: Int64) {
        core.withLock { core in
            guard var walk = core.walks[batch], walk.task == nil || walk.task!.isCancelled else { return }
            let previous = walk.task
            walk.run += 1
            let run = walk.run
            walk.task = Task { [weak self] in
                await previous?.value
                await self?.walk(batch)
                self?.walkEnded(batch, run: run)
            }
            core.walks[batch] = walk
        }
    }

    private func walkEnded(_ batch: Int64, run: Int) {
        let waiters = mutate { core -> ([CheckedContinuation<Void, Never>], [Effect]) in
            if core.walks[batch]?.run == run {
                core.walks[batch]?.task = nil
                if let progress = core.walks[batch]?.progress { core.told.append(.walked(progress)) }
                core.version &+= 1
            }
            guard !core.walks.values.contains(where: { $0.task != nil }) else { return ([], []) }
            defer { core.walkWaiters = [] }
            return (core.walkWaiters, [])
        }
        waiters.forEach { $0.resume() }
    }

    /// Returns once no walk is listing (at once when none is): each ended, or is held.
    public func waitUntilWalksStop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = core.withLock { core -> Bool in
                guard core.walks.values.contains(where: { $0.task != nil }) else { return true }
                core.walkWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The commands of a batch that steer its walk (a selection of its batch, or of the whole queue: `pause --all`,
    /// aria2's pauseAll, whatever states they name).
    func steerWalks(_ command: QueueCommand) {
        guard let selection = command.selection else { return }
        let everything = selection.batch == nil && selection.ids == nil && (selection.filter ?? "").isEmpty
            && (selection.all == true || selection.states != nil)
        var batches = core.withLock { core in core.walks.keys.filter { selection.batch == $0 || (selection.batch == nil && everything) } }
        // A walk an engine before this one left ended (with listings that failed) or held is kept by the store
        // alone: a retry or resume of its batch takes it up again, a remove forgets it.
        if let batch = selection.batch, !batches.contains(batch) {
            switch command {
            case .remove:
                batches.append(batch)
            case .resume, .retry:
                if let stored = try? store.walks().first(where: { $0.progress.batch == batch }) {
                    core.withLock { $0.walks[batch] = $0.walks[batch] ?? WalkRun(progress: stored.progress) }
                    batches.append(batch)
                }
            default:
                break
            }
        }
        for batch in batches {
            switch command {
            case .pause, .cancel:
                hold(batch, true)
            case .resume:
                hold(batch, false)
            case .retry:
                // The directories whose listing failed are listed again: the progress is the store's after it.
                if let again = try? store.retryWalk(batch: batch), again > 0,
                   let stored = try? store.walks().first(where: { $0.progress.batch == batch }) {
                    mutate { core in
                        core.walks[batch]?.progress = stored.progress
                        return ((), [])
                    }
                }
                hold(batch, false)
            case .remove:
                let task = core.withLock { core -> Task<Void, Never>? in
                    defer { core.walks[batch] = nil }
                    return core.walks[batch]?.task
                }
                task?.cancel()
                try? store.removeWalk(batch: batch)
            default:
                break
            }
        }
    }

    private func hold(_ batch: Int64, _ held: Bool) {
        try? store.setWalkHeld(batch: batch, held)
        let task = mutate { core -> (Task<Void, Never>?, [Effect]) in
            guard core.walks[batch] != nil else { return (nil, []) }
            core.walks[batch]!.progress.held = held
            core.told.append(.walked(core.walks[batch]!.progress))
            core.version &+= 1
            return (held ? core.walks[batch]!.task : nil, [])
        }
        if held { task?.cancel() } else { goOn(batch) }
    }

    /// Lists the batch's pending directories until none is left, or the walk is held.
    private func walk(_ batch: Int64) async {
        guard !Task.isCancelled, let stored = try? store.walks().first(where: { $0.progress.batch == batch }),
              let scope = TreeScope(root: stored.job.root) else { return }
        let job = stored.job
        var options = TreeWalk.Options()
        options.depth = job.depth
        options.filter = job.filter
        options.headers = job.template.headers
        options.netrcFile = job.template.netrcFile
        options.sshAgent = job.template.sshAgent
        options.userAgent = configuration.userAgent
        options.timeout = configuration.idleTimeout
        options.transport = configuration.transport
        let walker = TreeWalk(scope: scope, options: options)
        var first: [ListingEntry]?
        let method: TreeWalk.ListingMethod
        if let known = stored.method.flatMap(TreeWalk.ListingMethod.init(rawValue:)) {
            method = known
        } else {
            (method, first) = await walker.listingMethod()
            // Held while asking: what the answer says is not known.
            guard !Task.isCancelled else { return }
            try? store.setWalkMethod(batch: batch, method.rawValue)
        }
        var pending = (try? store.walkDirectories(batch: batch, state: .pending)) ?? []
        // Each directory once: those the store knows in any state.
        var known = Set<String>()
        for state in [WalkDirectory.State.pending, .listed, .failed, .loop] {
            for directory in (try? store.walkDirectories(batch: batch, state: state)) ?? [] { known.insert(directory.key) }
        }
        var sync = TreeSync(directory: job.directory, replacesAnyFile: job.replace)
        await withTaskGroup(of: (WalkDirectory, Result<[ListingEntry], TreeWalk.ListingFailure>).self) { group in
            var running = 0
            while true {
                while running < max(1, options.parallel), !pending.isEmpty, !Task.isCancelled {
                    let directory = pending.removeFirst()
                    running += 1
                    if directory.path.isEmpty, let listing = first {
                        group.addTask { (directory, .success(listing)) }
                    } else {
                        group.addTask { (directory, await walker.list(directory.url, method: method)) }
                    }
                }
                guard let (directory, result) = await group.next() else { break }
                running -= 1
                // Held or removed: a listing under way is not kept (it is asked again when the walk goes on).
                if Task.isCancelled { continue }
                var listing = WalkListing(batch: batch, directory: directory.url, state: .listed)
                switch result {
                case let .failure(failure):
                    listing.state = .failed
                    listing.trouble = ["cannot list \(TerminalSafe.redactedURL(directory.url)): \(failure.reason)"]
                case let .success(entries):
                    let reading = walker.read(entries, at: directory.path, ancestors: directory.ancestors)
                    if reading.loop {
                        listing.state = .loop
                        listing.trouble = ["\(TerminalSafe.sanitize(directory.path.joined(separator: "/")))/ lists a directory above it again (a symlink loop): not walked"]
                    } else if job.filter.makesEveryDirectory, case let .failure(refusal) = sync.make(directory.path) {
                        listing.trouble = ["\(TerminalSafe.sanitize(directory.path.joined(separator: "/")))/ not made: \(refusal.reason)"]
                    }
                    for (place, ancestors) in reading.directories where known.insert(WalkDirectory.key(place.url)).inserted {
                        listing.children.append(WalkDirectory(url: place.url, path: place.path, ancestors: ancestors))
                    }
                    listing.found = reading.files.count
                    for file in reading.files {
                        switch await sync.decide(file, facts: walker.remoteFacts) {
                        case let .fetch(into, name, mirror, replaces):
                            var spec = job.spec(for: file.place.url, directory: into, name: name)
                            spec.mirror = mirror
                            listing.specs.append(spec)
                            if replaces { listing.replacing += 1 }
                        case .present:
                            listing.present += 1
                        case let .leftAlone(reason):
                            listing.leftAlone += 1
                            listing.leftAloneLines.append("\(TerminalSafe.sanitize(file.place.relative)): \(reason)")
                        }
                    }
                }
                if Task.isCancelled { continue }
                do {
                    // Held or removed meanwhile: nothing was kept; the walk stops here.
                    guard try addListing(listing, reuse: !job.force) != nil else { return }
                } catch {
                    // The store refused (a full disk): the directory stays to list, the walk is held, and says why.
                    mutate { core in
                        core.walks[batch]?.progress.held = true
                        core.walks[batch]?.progress.trouble.append("the walk is held: \(error)")
                        return ((), [])
                    }
                    try? store.setWalkHeld(batch: batch, true)
                    group.cancelAll()
                    return
                }
                pending += listing.children
            }
        }
    }

    /// A listing kept (WalkStore.recordListing) and its files queued, as an add's are; the walk's progress told.
    /// nil when the walk was held or removed meanwhile (nothing kept).
    func addListing(_ listing: WalkListing, reuse: Bool) throws(StateError) -> [AddedItem]? {
        // Removes and moves still on their way to the store first (as an add's), when it adds files.
        if !listing.specs.isEmpty { storeWriter.flush() }
        let additions: [QueueAddition]
        do {
            guard let recorded = try store.recordListing(listing, reuse: reuse) else { return nil }
            additions = recorded
        } catch {
            throw StateError("cannot keep the walk: \((error as? StateError)?.description ?? "\(error)")")
        }
        let added = queue(additions, walk: listing.batch)
        mutate { core in
            if var walk = core.walks[listing.batch] {
                listing.applied(to: &walk.progress)
                core.walks[listing.batch] = walk
                core.told.append(.walked(walk.progress))
                core.version &+= 1
            }
            return ((), [])
        }
        return added
    }
}
