import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import Synchronization

/// State changes reach the store off the delegate path, in order. Records queued while the store is busy
/// are written together, in one transaction (a burst of small downloads makes thousands of changes), and
/// writes begin at most once per interval.
final class StoreWriter: Sendable {
    private struct Pending {
        var records: [TransferID: StoredTransfer] = [:]
        var sequence: [TransferID] = []
        var ranks: [TransferID: Int] = [:]
        var scheduled = false
        /// When the last write began: the next waits until `interval` after it.
        var lastWrite: DispatchTime?
        /// What the write under way is writing (a read until it commits must see it, not the row before).
        var writing: [TransferID: StoredTransfer] = [:]
        var writingRanks: [TransferID: Int] = [:]
    }

    let store: any QueueStore
    private let interval: TimeInterval
    private let queue = DispatchQueue(label: "ferry.store")
    private let pending = Mutex(Pending())
    private let failure = Mutex<(reason: String?, told: String?)>((nil, nil))
    private let changes = Atomic<UInt64>(0)

    /// Changes handed to the writer so far (records, byte counts, removals): what was read from the store after
    /// a `flush` holds while this is the same.
    var generation: UInt64 { changes.load(ordering: .relaxed) }

    /// Why the last write failed (the queue on disk is as last committed; the changes wait and are written
    /// again a second later); nil once a write succeeds.
    var lastFailure: String? { failure.withLock { $0.reason } }

    /// The failure of the moment, once per distinct reason (for a message to the user); nil otherwise.
    func takeNewFailure() -> String? {
        failure.withLock { state in
            guard let reason = state.reason, reason != state.told else { return nil }
            state.told = reason
            return reason
        }
    }

    init(store: any QueueStore, interval: TimeInterval) {
        self.store = store
        self.interval = interval
    }

    /// Queues records (the newest of each item wins) and new ranks (a move's).
    func enqueue(_ records: [StoredTransfer], ranks: [TransferID: Int]) {
        changes.add(1, ordering: .relaxed)
        let schedule = pending.withLock { pending -> Bool in
            for record in records {
                if pending.records[record.id] == nil { pending.sequence.append(record.id) }
                pending.records[record.id] = record
            }
            pending.ranks.merge(ranks) { $1 }
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        guard schedule else { return }
        let due = pending.withLock { $0.lastWrite.map { $0 + interval } }
        if let due, due > .now() {
            queue.asyncAfter(deadline: due) { self.writePending() }
        } else {
            queue.async { self.writePending() }
        }
    }

    /// The newest record of `id` not written yet (a read of the item must see it before the store does).
    func pending(_ id: TransferID) -> StoredTransfer? {
        pending.withLock { pending in
            guard var record = pending.records[id] ?? pending.writing[id] else { return nil }
            if let rank = pending.ranks[id] ?? pending.writingRanks[id] { record.position = rank }
            return record
        }
    }

    /// Byte counts of running single streams, once a second.
    func checkpoint(_ checkpoints: [(TransferID, Int64)]) {
        guard !checkpoints.isEmpty else { return }
        changes.add(1, ordering: .relaxed)
        let store = self.store
        queue.async { try? store.checkpoint(checkpoints) }
    }

    /// Deletes items (in one transaction); a record of them still waiting to be written is dropped (it would
    /// bring the item back).
    func remove(_ ids: [TransferID]) {
        guard !ids.isEmpty else { return }
        changes.add(1, ordering: .relaxed)
        pending.withLock { pending in
            for id in ids {
                pending.records[id] = nil
                pending.ranks[id] = nil
            }
        }
        let store = self.store
        queue.async { try? store.remove(ids) }
    }

    /// Records a download's name before its `.part` file is created; durable when this returns. An older record
    /// of the item still waiting takes the name too, so that written later it does not take it back. Into the
    /// store's claim journal where it keeps one (at once, without waiting for a batch being written: the journal
    /// keeps the claim until a committed batch holds it); otherwise, or when the journal cannot take it, in a
    /// transaction of its own on the store's queue, after the batch being written (which may hold an older
    /// record). The changes queued meanwhile wait for their interval either way (writing them all first made two
    /// transactions for every small file).
    func recordClaim(_ id: TransferID, fileName: String, validators: Validators) {
        let write = { [self] () -> Bool in
            pending.withLock { pending in
                guard pending.records[id] != nil else { return }
                pending.records[id]!.fileName = fileName
                pending.records[id]!.validators = validators
            }
            return (try? store.recordClaim(id, fileName: fileName, validators: validators)) != nil
        }
        if store.claimsAreJournaled, write() { return }
        queue.sync { _ = write() }
    }

    /// A resumable upload's place on the server, written before this returns (as a claim is).
    func recordResumable(_ id: TransferID, _ resumable: ResumableUpload?) {
        queue.sync {
            pending.withLock { pending in
                guard pending.records[id] != nil else { return }
                pending.records[id]!.resumable = resumable
            }
            try? store.recordResumable(id, resumable)
        }
    }

    /// Writes what is pending now, after everything queued before it (a write waiting for its interval would
    /// come too late at shutdown).
    func flush() {
        queue.sync { writePending() }
    }

    /// Writes whatever changes are pending (none when an earlier call took them). On the store queue.
    private func writePending() {
        let (records, ranks) = pending.withLock { pending -> ([StoredTransfer], [TransferID: Int]) in
            let records = pending.sequence.compactMap { pending.records[$0] }
            let ranks = pending.ranks
            pending = Pending(lastWrite: .now())
            pending.writing = Dictionary(records.map { ($0.id, $0) }) { $1 }
            pending.writingRanks = ranks
            return (records, ranks)
        }
        defer {
            pending.withLock {
                $0.writing = [:]
                $0.writingRanks = [:]
            }
        }
        do {
            if !records.isEmpty { try store.save(records) }
            if !ranks.isEmpty { try store.saveRanks(ranks.map { ($0.key, $0.value) }) }
            failure.withLock { $0 = (nil, nil) }
        } catch {
            failure.withLock { $0.reason = "\(error)" }
            // Kept for the next try, in their order; a newer record of an item queued meanwhile wins.
            let schedule = pending.withLock { pending -> Bool in
                for record in records.reversed() where pending.records[record.id] == nil {
                    pending.sequence.insert(record.id, at: 0)
                    pending.records[record.id] = record
                }
                pending.ranks.merge(ranks) { newer, _ in newer }
                defer { pending.scheduled = true }
                return !pending.scheduled
            }
            if schedule { queue.asyncAfter(deadline: .now() + 1) { self.writePending() } }
        }
    }
}
