import FerryModel
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Everything needed to bring an item back after a restart.
public struct StoredTransfer: Sendable, Codable, Equatable {
    public var id: TransferID
    /// The item's rank in the queue's order (smaller first; ties by id). An add goes after the largest, a
    /// move changes the ranks of one or two items (QueueMove.ranks), so no change rewrites the whole order.
    public var position: Int
    public var spec: TransferSpec
    public var state: TransferState
    public var fileName: String?
    public var savedPath: String?
    public var validators: Validators
    public var bytesDone: Int64
    public var bytesExpected: Int64?
    public var retries: Int
    public var attempts: [Attempt]
    public var lastError: String?
    /// What the last failure was (kept with `lastError`, its message); nil in rows from before kinds were stored,
    /// whose kind is read from the message's words (ItemFailure(message:cause:)).
    public var failure: FailureCause?
    /// Segmented downloads: the ranges and how much of each is on disk.
    public var segments: [SegmentState]?
    /// The item's bandwidth limit in force, bytes per second (nil: none); starts as the spec's.
    public var rateLimit: Int64?
    /// The batch (the command) that last asked for this item; nil for items queued before batches.
    public var batch: Int64?
    /// What the server answered to an upload (its first ServerResponse.bodyLimit bytes).
    public var response: ServerResponse?
    /// A resumable upload's place on the server (its location and confirmed offset).
    public var resumable: ResumableUpload?
    /// Set when reading the item back: a part of its saved progress could not be read (which, in words).
    /// Its `.part` file's contents are then unknown: the engine starts the item over (never publishes it).
    public var unreadable: String?

    public init(id: TransferID, position: Int, spec: TransferSpec, state: TransferState = .queued) {
        self.id = id
        self.position = position
        self.spec = spec
        self.state = state
        self.rateLimit = spec.rateLimit
        self.validators = Validators()
        self.bytesDone = 0
        // A tree's file: its size as its listing gave it, until an answer says (the tree's row sums it).
        self.bytesExpected = spec.mirror?.size
        self.retries = 0
        self.attempts = []
    }

    /// Its `.part` file, once it has a name.
    public var partPath: String? { fileName.map { PartialFile.path(directory: spec.directory, name: $0) } }

    /// The expected size as far as it is known.
    public var total: Int64? { bytesExpected ?? validators.totalLength }

    /// Of the items that are the same transfer as a new spec (newest first), the one an add reuses: the
    /// newest not completed, else the newest completed whose file is still in place; nil: add a new item.
    /// Whether this item, found again for `spec` (the same transfer), takes `spec` in place of its own: an
    /// unfinished item asked for with other options. A completed one keeps what it was done with.
    public func retakes(_ spec: TransferSpec) -> Bool {
        state != .completed && self.spec != spec
    }

    public static func reusable(among same: [StoredTransfer]) -> StoredTransfer? {
        if let open = same.first(where: { $0.state != .completed }) { return open }
        return same.first { item in
            // A tree's file is asked for only when the other side lacks it or has another copy (TreeSync, TreePut):
            // done before, it is done again, not found done.
            if item.spec.mirror != nil { return false }
            if item.spec.direction == .upload {
                // Sent already, unless a file it sends changed since.
                guard let sent = item.attempts.last?.endedAt else { return false }
                return item.spec.upload?.sourcePaths.allSatisfy { path in
                    var info = stat()
                    return stat(path, &info) == 0 && Double(info.st_mtim.tv_sec) <= sent.timeIntervalSince1970
                } ?? false
            }
            guard let path = item.savedPath else { return false }
            var info = stat()
            return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
        }
    }
}

/// The `.part` file of an unfinished download taken off the queue with its file kept (`ferry remove` without
/// `--delete-part`, aria2's removeDownloadResult): what the same transfer asked for again needs to go on from it
/// (a web UI's Restart is a remove and an add of the same URI: it made `name (1).ext` from byte 0).
public struct Leftover: Sendable, Codable, Equatable {
    /// The transfer's TransferSpec.identity.
    public var identity: String
    public var directory: String
    public var fileName: String
    public var validators: Validators
    public var segments: [SegmentState]?

    public init(identity: String, directory: String, fileName: String, validators: Validators, segments: [SegmentState]?) {
        self.identity = identity
        self.directory = directory
        self.fileName = fileName
        self.validators = validators
        self.segments = segments
    }

    /// What an unfinished download taken off the queue with its `.part` file kept leaves (nil: nothing to go on
    /// from: an upload, a finished file, no `.part` name yet).
    public init?(keptBy record: StoredTransfer) {
        guard record.state != .completed, record.spec.direction == .download, let name = record.fileName,
              let identity = record.spec.identity else { return nil }
        self.init(identity: identity, directory: record.spec.directory, fileName: name, validators: record.validators,
                  segments: record.segments)
    }

    /// A new item of the same transfer takes it over, when its `.part` file is still there: its name (claimed
    /// by the file), what the server said of the file (a resume asks If-Range with it: a changed file starts
    /// over) and its ranges.
    public func adopt(into item: inout StoredTransfer) -> Bool {
        let path = PartialFile.path(directory: directory, name: fileName)
        var info = stat()
        guard directory == item.spec.directory, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 else { return false }
        item.fileName = fileName
        item.validators = validators
        item.segments = segments
        item.bytesDone = segments.map { $0.reduce(0) { $0 + $1.done } } ?? Int64(info.st_size)
        item.bytesExpected = validators.totalLength
        return true
    }
}

/// One spec given to QueueStore.add: the item it became, new or already there.
public struct QueueAddition: Sendable, Equatable {
    public var item: StoredTransfer
    /// The item was in the queue already (the same transfer, TransferSpec.identity), not added.
    public var existing: Bool
    /// An existing unfinished item asked for with other options: its spec before (the item's is now the one
    /// given: QueueStore.add).
    public var previousSpec: TransferSpec?

    public init(item: StoredTransfer, existing: Bool, previousSpec: TransferSpec? = nil) {
        self.item = item
        self.existing = existing
        self.previousSpec = previousSpec
    }
}

/// What an engine keeps in memory of each item of the queue (TransferManager's index): its place, state,
/// batch and host; the rest of the item stays in the store until the engine needs it.
public struct QueueIndexRow: Sendable {
    public var id: TransferID
    public var position: Int
    public var state: TransferState
    public var batch: Int64?
    public var host: String
    /// An unfinished download's name (its `.part` file's), with its directory: no other item may take it.
    public var claim: (directory: String, name: String)?

    public init(id: TransferID, position: Int, state: TransferState, batch: Int64?, host: String,
                claim: (directory: String, name: String)? = nil) {
        self.id = id
        self.position = position
        self.state = state
        self.batch = batch
        self.host = host
        self.claim = claim
    }

    public init(_ item: StoredTransfer) {
        self.init(id: item.id, position: item.position, state: item.state, batch: item.batch, host: item.spec.host,
                  claim: item.state == .completed ? nil : item.fileName.map { (item.spec.directory, $0) })
    }
}

/// Where the queue is kept. The manager calls it off the URLSession delegate path: on every state
/// transition and about once a second for byte offsets. Several processes may share one store.
public protocol QueueStore: WalkStore {
    func loadAll() throws -> [StoredTransfer]
    /// Every item's index row, in queue order, one at a time (what an engine keeps in memory).
    func forEachIndexRow(_ body: (QueueIndexRow) throws -> Void) throws
    /// The items with these ids (those that exist), in no particular order.
    func load(_ ids: [TransferID]) throws -> [StoredTransfer]
    /// The id, URL and known name (a download's file name, an upload's source) of each item with an id above
    /// `after`, one at a time: what a text filter is matched on.
    func forEachText(after id: TransferID, _ body: (TransferID, String, String?) throws -> Void) throws
    /// The same of the items with these ids (those that exist), in no particular order.
    func forEachText(of ids: [TransferID], _ body: (TransferID, String, String?) throws -> Void) throws
    /// What a sort compares of the items with these ids (those that exist), in no particular order: id, URL,
    /// known name, bytes done and expected (no whole record: a sort of 100,000 rows read them all).
    func forEachSortKey(of ids: [TransferID], _ body: (TransferID, String, String?, Int64, Int64?) throws -> Void) throws
    /// Items with an id above `id` (ids only grow, never reused): what other processes added since.
    func loadAdded(after id: TransferID) throws -> [StoredTransfer]
    /// Appends new queued items at the end of the queue, all or none, in `batch`. With `reuse`, a spec of a
    /// transfer already in the queue (TransferSpec.identity; StoredTransfer.reusable) adds nothing: its item
    /// is returned, moved into `batch`; the same transfer twice in `specs` is one item. An unfinished item found so
    /// takes the spec given now (its options: checksum, limit, headers, segments), its old one returned beside it.
    func add(_ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition]
    /// An item's spec changed (a rename: QueueCommand.rename): written with what follows from it (its identity).
    func saveSpec(_ id: TransferID, _ spec: TransferSpec) throws
    /// Keeps the `.part` files of unfinished downloads taken off the queue, for the same transfers asked again
    /// (an add takes one over: Leftover.adopt).
    func keepLeftovers(_ leftovers: [Leftover]) throws
    /// The unfinished items (any state but completed) that are the same transfer as one of `identities`
    /// (TransferSpec.identity): what a forced add replaces.
    func unfinished(sameAs identities: [String]) throws -> [(id: TransferID, identity: String)]
    /// A new batch for what the user typed.
    func makeBatch(command: String, tree: String?) throws -> Batch
    /// A batch's own limit (Batch.rateLimit; nil: none). False when there is no such batch (nothing changed).
    @discardableResult
    func saveBatchLimit(_ batch: Int64, _ rate: Int64?) throws -> Bool
    /// The bytes done and expected of the items of `batch` (`only` those of them, when given), and how many
    /// have no known size (from an answer, or a tree's listing).
    func byteSums(batch: Int64, only ids: [TransferID]?) throws -> ByteSums
    /// The batches, oldest first.
    func batches() throws -> [Batch]
    /// Updates an item's state and progress; its place in the queue is saveRanks' business.
    func save(_ item: StoredTransfer) throws
    /// Several saves at once (one transaction where the store has them).
    func save(_ items: [StoredTransfer]) throws
    /// New ranks (positions) for some items (a move).
    func saveRanks(_ ranks: [(TransferID, Int)]) throws
    func checkpoint(_ id: TransferID, bytesDone: Int64) throws
    /// Several checkpoints at once (one transaction where the store has them).
    func checkpoint(_ checkpoints: [(TransferID, Int64)]) throws
    /// The name a download is about to claim (before its `.part` file exists) and what the server said of
    /// the file, so that a restart after a crash finds its `.part` file (or the finished file) by name.
    func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws
    /// Whether a claim is kept apart from the rows until a batch of records holds it (SQLiteQueueStore's
    /// journal): it then need not wait for a batch being written, which may still hold an older record.
    var claimsAreJournaled: Bool { get }
    /// A resumable upload's location and confirmed offset, written at once (a crash must not lose the upload
    /// the server holds).
    func recordResumable(_ id: TransferID, _ resumable: ResumableUpload?) throws
    func remove(_ id: TransferID) throws
    /// Several removes at once (one transaction where the store has them).
    func remove(_ ids: [TransferID]) throws
}

/// Bytes of some items summed (QueueStore.byteSums).
public struct ByteSums: Sendable, Equatable {
    public var done: Int64 = 0
    public var expected: Int64 = 0
    /// Items of no known size (left out of `expected`).
    public var unknown = 0
    public init(done: Int64 = 0, expected: Int64 = 0, unknown: Int = 0) {
        self.done = done
        self.expected = expected
        self.unknown = unknown
    }

    public static func - (a: ByteSums, b: ByteSums) -> ByteSums {
        ByteSums(done: a.done - b.done, expected: a.expected - b.expected, unknown: a.unknown - b.unknown)
    }
}

extension QueueStore {
    /// A new batch that is not a tree's.
    public func makeBatch(command: String) throws -> Batch { try makeBatch(command: command, tree: nil) }
}

extension QueueStore {
    public var claimsAreJournaled: Bool { false }

    /// New items, always (no batch, no reuse).
    public func add(_ specs: [TransferSpec]) throws -> [StoredTransfer] {
        try add(specs, batch: nil, reuse: false).map(\.item)
    }

    public func loadAdded(after id: TransferID) throws -> [StoredTransfer] {
        try loadAll().filter { $0.id > id }
    }

    public func save(_ items: [StoredTransfer]) throws {
        for item in items { try save(item) }
    }

    public func remove(_ ids: [TransferID]) throws {
        for id in ids { try remove(id) }
    }

    public func checkpoint(_ checkpoints: [(TransferID, Int64)]) throws {
        for (id, bytes) in checkpoints { try checkpoint(id, bytesDone: bytes) }
    }

    public func forEachIndexRow(_ body: (QueueIndexRow) throws -> Void) throws {
        for item in try loadAll() { try body(QueueIndexRow(item)) }
    }

    public func load(_ ids: [TransferID]) throws -> [StoredTransfer] {
        let wanted = Set(ids)
        return try loadAll().filter { wanted.contains($0.id) }
    }

    public func forEachText(of ids: [TransferID], _ body: (TransferID, String, String?) throws -> Void) throws {
        for item in try load(ids) {
            try body(item.id, item.spec.url.absoluteString, TransferSnapshot.knownName(spec: item.spec, fileName: item.fileName))
        }
    }

    public func forEachSortKey(of ids: [TransferID], _ body: (TransferID, String, String?, Int64, Int64?) throws -> Void) throws {
        for item in try load(ids) {
            try body(item.id, item.spec.url.absoluteString, TransferSnapshot.knownName(spec: item.spec, fileName: item.fileName),
                     item.bytesDone, item.bytesExpected)
        }
    }

    public func forEachText(after id: TransferID, _ body: (TransferID, String, String?) throws -> Void) throws {
        for item in try loadAll() where item.id > id {
            try body(item.id, item.spec.url.absoluteString, TransferSnapshot.knownName(spec: item.spec, fileName: item.fileName))
        }
    }
}

public final class InMemoryQueueStore: QueueStore {
    private struct State {
        var items: [TransferID: StoredTransfer] = [:]
        var nextID: Int64 = 1
        var batches: [Batch] = []
        var leftovers: [String: Leftover] = [:]
        var walks: [Int64: StoredWalk] = [:]
        var walkDirectories: [Int64: [WalkDirectory]] = [:]
    }
    private let state = Mutex(State())

    public func startWalk(_ job: TreeJob, batch: Int64) throws {
        state.withLock { s in
            s.walks[batch] = StoredWalk(job: job, method: nil, progress: WalkProgress(batch: batch, pending: 1))
            s.walkDirectories[batch] = [WalkDirectory(url: job.root, path: [])]
        }
    }

    public func walks() throws -> [StoredWalk] {
        state.withLock { s in s.walks.keys.sorted().compactMap { s.walks[$0] } }
    }

    public func walkDirectories(batch: Int64, state wanted: WalkDirectory.State) throws -> [WalkDirectory] {
        state.withLock { $0.walkDirectories[batch, default: []].filter { $0.state == wanted } }
    }

    public func recordListing(_ listing: WalkListing, reuse: Bool) throws -> [QueueAddition]? {
        guard state.withLock({ $0.walks[listing.batch].map { !$0.progress.held } ?? false }) else { return nil }
        let added = try add(listing.specs, batch: listing.batch, reuse: reuse)
        state.withLock { s in
            var directories = s.walkDirectories[listing.batch, default: []]
            var known = Set(directories.map(\.key))
            var listingRecorded = listing
            listingRecorded.children = listing.children.filter { known.insert($0.key).inserted }
            for index in directories.indices where directories[index].key == WalkDirectory.key(listing.directory) {
                directories[index].state = listing.state
            }
            s.walkDirectories[listing.batch] = directories + listingRecorded.children
            if var walk = s.walks[listing.batch] {
                listingRecorded.applied(to: &walk.progress)
                s.walks[listing.batch] = walk
            }
        }
        return added
    }

    public func setWalkMethod(batch: Int64, _ method: String) throws {
        state.withLock { $0.walks[batch]?.method = method }
    }

    public func setWalkHeld(batch: Int64, _ held: Bool) throws {
        state.withLock { $0.walks[batch]?.progress.held = held }
    }

    public func retryWalk(batch: Int64) throws -> Int {
        state.withLock { s in
            var again = 0
            for index in s.walkDirectories[batch, default: []].indices where s.walkDirectories[batch]![index].state == .failed {
                s.walkDirectories[batch]![index].state = .pending
                again += 1
            }
            s.walks[batch]?.progress.failed -= again
            s.walks[batch]?.progress.pending += again
            if again > 0 { s.walks[batch]?.progress.trouble = [] }
            return again
        }
    }

    public func removeWalk(batch: Int64) throws {
        state.withLock { s in
            s.walks[batch] = nil
            s.walkDirectories[batch] = nil
        }
    }

    public func saveSpec(_ id: TransferID, _ spec: TransferSpec) throws {
        state.withLock { $0.items[id]?.spec = spec }
    }

    public func keepLeftovers(_ leftovers: [Leftover]) throws {
        state.withLock { s in for leftover in leftovers { s.leftovers[leftover.identity] = leftover } }
    }

    public init() {}

    public func loadAll() throws -> [StoredTransfer] {
        state.withLock { Array($0.items.values) }.sorted { ($0.position, $0.id) < ($1.position, $1.id) }
    }

    public func add(_ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition] {
        state.withLock { s in
            var position = (s.items.values.map(\.position).max() ?? -1) + 1
            return specs.map { spec in
                if reuse, let identity = spec.identity {
                    let same = s.items.values.filter { $0.spec.identity == identity }.sorted { $0.id > $1.id }
                    if let found = StoredTransfer.reusable(among: same) {
                        if let batch { s.items[found.id]?.batch = batch }
                        let previous = found.retakes(spec) ? found.spec : nil
                        if let previous {
                            s.items[found.id]?.spec = spec
                            if spec.rateLimit != previous.rateLimit { s.items[found.id]?.rateLimit = spec.rateLimit }
                        }
                        return QueueAddition(item: s.items[found.id]!, existing: true, previousSpec: previous)
                    }
                }
                var item = StoredTransfer(id: TransferID(s.nextID), position: position, spec: spec)
                item.batch = batch
                if let identity = spec.identity, let leftover = s.leftovers.removeValue(forKey: identity) { _ = leftover.adopt(into: &item) }
                s.nextID += 1
                position += 1
                s.items[item.id] = item
                return QueueAddition(item: item, existing: false)
            }
        }
    }

    public func unfinished(sameAs identities: [String]) throws -> [(id: TransferID, identity: String)] {
        let wanted = Set(identities)
        return state.withLock { s in
            s.items.values.compactMap { item in
                guard item.state != .completed, let identity = item.spec.identity, wanted.contains(identity) else { return nil }
                return (item.id, identity)
            }.sorted { $0.id < $1.id }
        }
    }

    public func byteSums(batch: Int64, only ids: [TransferID]?) throws -> ByteSums {
        state.withLock { s in
            let only = ids.map(Set.init)
            var sums = ByteSums()
            for item in s.items.values where item.batch == batch && only?.contains(item.id) ?? true {
                sums.done += item.bytesDone
                if let expected = item.bytesExpected { sums.expected += expected } else { sums.unknown += 1 }
            }
            return sums
        }
    }

    public func makeBatch(command: String, tree: String?) throws -> Batch {
        state.withLock { s in
            let batch = Batch(id: Int64(s.batches.count + 1), createdAt: Date(), command: command, tree: tree)
            s.batches.append(batch)
            return batch
        }
    }

    public func batches() throws -> [Batch] { state.withLock { $0.batches } }

    @discardableResult
    public func saveBatchLimit(_ batch: Int64, _ rate: Int64?) throws -> Bool {
        state.withLock { s in
            guard let index = s.batches.firstIndex(where: { $0.id == batch }) else { return false }
            s.batches[index].rateLimit = rate
            return true
        }
    }

    /// Like the SQLite store, a save keeps the item's place in the queue (saveRanks moves it).
    public func save(_ item: StoredTransfer) throws {
        state.withLock { s in
            guard let position = s.items[item.id]?.position else { return }
            var item = item
            item.position = position
            s.items[item.id] = item
        }
    }

    public func saveRanks(_ ranks: [(TransferID, Int)]) throws {
        state.withLock { s in
            for (id, rank) in ranks { s.items[id]?.position = rank }
        }
    }

    public func checkpoint(_ id: TransferID, bytesDone: Int64) throws {
        state.withLock { $0.items[id]?.bytesDone = bytesDone }
    }

    public func recordResumable(_ id: TransferID, _ resumable: ResumableUpload?) throws {
        state.withLock { $0.items[id]?.resumable = resumable }
    }

    public func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws {
        state.withLock {
            $0.items[id]?.fileName = fileName
            $0.items[id]?.validators = validators
        }
    }

    public func remove(_ id: TransferID) throws { _ = state.withLock { $0.items.removeValue(forKey: id) } }
}
