import Foundation
import Synchronization

/// Everything needed to bring an item back after a restart.
public struct StoredTransfer: Sendable, Codable, Equatable {
    public var id: TransferID
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
    /// Segmented downloads: the ranges and how much of each is on disk.
    public var segments: [SegmentState]?
    /// The item's bandwidth limit in force, bytes per second (nil: none); starts as the spec's.
    public var rateLimit: Int64?

    public init(id: TransferID, position: Int, spec: TransferSpec, state: TransferState = .queued) {
        self.id = id
        self.position = position
        self.spec = spec
        self.state = state
        self.rateLimit = spec.rateLimit
        self.validators = Validators()
        self.bytesDone = 0
        self.retries = 0
        self.attempts = []
    }

    /// Its `.part` file, once it has a name.
    public var partPath: String? { fileName.map { PartialFile.path(directory: spec.directory, name: $0) } }

    /// The expected size as far as it is known.
    public var total: Int64? { bytesExpected ?? validators.totalLength }
}

/// Where the queue is kept. The manager calls it off the URLSession delegate path: on every state
/// transition and about once a second for byte offsets. Several processes may share one store.
public protocol QueueStore: Sendable {
    func loadAll() throws -> [StoredTransfer]
    /// Items with an id above `id` (ids only grow, never reused): what other processes added since.
    func loadAdded(after id: TransferID) throws -> [StoredTransfer]
    /// Appends new queued items at the end of the queue, all or none, and returns them with their ids.
    func add(_ specs: [TransferSpec]) throws -> [StoredTransfer]
    /// Updates an item's state and progress; its place in the queue is saveOrder's business.
    func save(_ item: StoredTransfer) throws
    /// Several saves at once (one transaction where the store has them).
    func save(_ items: [StoredTransfer]) throws
    func saveOrder(_ ids: [TransferID]) throws
    func checkpoint(_ id: TransferID, bytesDone: Int64) throws
    /// The name a download is about to claim (before its `.part` file exists) and what the server said of
    /// the file, so that a restart after a crash finds its `.part` file (or the finished file) by name.
    func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws
    func remove(_ id: TransferID) throws
}

extension QueueStore {
    public func loadAdded(after id: TransferID) throws -> [StoredTransfer] {
        try loadAll().filter { $0.id > id }
    }

    public func save(_ items: [StoredTransfer]) throws {
        for item in items { try save(item) }
    }
}

public final class InMemoryQueueStore: QueueStore {
    private struct State {
        var items: [TransferID: StoredTransfer] = [:]
        var nextID: Int64 = 1
    }
    private let state = Mutex(State())

    public init() {}

    public func loadAll() throws -> [StoredTransfer] {
        state.withLock { Array($0.items.values) }.sorted { ($0.position, $0.id) < ($1.position, $1.id) }
    }

    public func add(_ specs: [TransferSpec]) throws -> [StoredTransfer] {
        state.withLock { s in
            let base = (s.items.values.map(\.position).max() ?? -1) + 1
            return specs.enumerated().map { offset, spec in
                let item = StoredTransfer(id: TransferID(s.nextID), position: base + offset, spec: spec)
                s.nextID += 1
                s.items[item.id] = item
                return item
            }
        }
    }

    /// Like the SQLite store, a save keeps the item's place in the queue (saveOrder moves it).
    public func save(_ item: StoredTransfer) throws {
        state.withLock { s in
            guard let position = s.items[item.id]?.position else { return }
            var item = item
            item.position = position
            s.items[item.id] = item
        }
    }

    public func saveOrder(_ ids: [TransferID]) throws {
        state.withLock { s in
            for (position, id) in ids.enumerated() { s.items[id]?.position = position }
        }
    }

    public func checkpoint(_ id: TransferID, bytesDone: Int64) throws {
        state.withLock { $0.items[id]?.bytesDone = bytesDone }
    }

    public func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws {
        state.withLock {
            $0.items[id]?.fileName = fileName
            $0.items[id]?.validators = validators
        }
    }

    public func remove(_ id: TransferID) throws { _ = state.withLock { $0.items.removeValue(forKey: id) } }
}
