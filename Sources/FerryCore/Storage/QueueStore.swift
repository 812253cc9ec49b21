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
    public var retries: Int
    public var attempts: [Attempt]
    public var lastError: String?
}

/// Where the queue is kept. The manager calls it off the delegate path: on state transitions and
/// about once a second for byte offsets. The SQLite store implements this; tests use the in-memory one.
public protocol QueueStore: Sendable {
    func loadAll() throws -> [StoredTransfer]
    func save(_ item: StoredTransfer) throws
    func saveOrder(_ ids: [TransferID]) throws
    func checkpoint(_ id: TransferID, bytesDone: Int64) throws
    func remove(_ id: TransferID) throws
}

public final class InMemoryQueueStore: QueueStore {
    private let items = Mutex<[TransferID: StoredTransfer]>([:])

    public init() {}

    public func loadAll() throws -> [StoredTransfer] {
        items.withLock { Array($0.values) }.sorted { ($0.position, $0.id) < ($1.position, $1.id) }
    }

    public func save(_ item: StoredTransfer) throws { items.withLock { $0[item.id] = item } }

    public func saveOrder(_ ids: [TransferID]) throws {
        items.withLock { all in
            for (position, id) in ids.enumerated() { all[id]?.position = position }
        }
    }

    public func checkpoint(_ id: TransferID, bytesDone: Int64) throws {
        items.withLock { $0[id]?.bytesDone = bytesDone }
    }

    public func remove(_ id: TransferID) throws { _ = items.withLock { $0.removeValue(forKey: id) } }
}
