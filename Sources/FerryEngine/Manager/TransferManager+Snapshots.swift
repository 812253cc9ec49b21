import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// What front ends read: snapshots of the queue, and waiting for items to finish.
extension TransferManager {
    public func snapshot() -> QueueSnapshot { snapshot(nil) }

    /// The rows of `view`'s window (nil: the whole queue), with the queue's counts and rates: one walk over
    /// the queue, a snapshot made only of the rows in the window.
    public func snapshot(_ view: QueueView?) -> QueueSnapshot {
        core.withLock { core in
            var totals = QueueTotals()
            totals.count = core.counts.filter { $0.value > 0 }
            // Only items holding a slot can be running.
            for id in core.slotHolders.keys {
                guard let transfer = core.items[id], transfer.state == .running, let rate = transfer.rate.bytesPerSecond else { continue }
                if transfer.spec.direction == .download { totals.downloadBytesPerSecond += rate }
                else { totals.uploadBytesPerSecond += rate }
            }
            var items: [TransferSnapshot] = []
            var row = 0
            /// One row of the window: the rate history only for the item whose details are shown.
            func add(_ transfer: Transfer) {
                var item = transfer.snapshot()
                if let view, view.limit != nil, view.detail != transfer.id.rawValue { item.rateHistory = [] }
                items.append(item)
            }
            if view?.selectsAll ?? true {
                // Every item is a row: the window is a slice of the queue, whatever its length.
                let start = min(max(0, view?.offset ?? 0), core.queue.count)
                let end = view?.limit.map { min(core.queue.count, start + $0) } ?? core.queue.count
                items.reserveCapacity(end - start)
                core.queue[start..<end].forEach(add)
                row = core.queue.count
            }
            let matcher = view.flatMap { $0.selectsAll ? nil : $0.matcher }
            for transfer in matcher == nil ? [] : core.queue {
                if let matcher, !matcher.matches(id: transfer.id, state: transfer.state, batch: transfer.batch,
                                                 name: { TransferSnapshot.knownName(spec: transfer.spec, fileName: transfer.fileName) },
                                                 url: { transfer.spec.url.absoluteString }) {
                    continue
                }
                if view?.windowContains(row) ?? true { add(transfer) }
                row += 1
            }
            var snapshot = QueueSnapshot(version: core.version, items: items, totals: totals,
                                         maxConcurrent: core.caps.global, maxPerHost: core.caps.perHost)
            let rates = limits.current
            snapshot.downloadLimit = rates.download
            snapshot.uploadLimit = rates.upload
            snapshot.window = view.map { QueueWindow(offset: $0.offset, total: row, of: $0) }
            return snapshot
        }
    }

    /// The records of `view`'s window, as the store keeps them with the bytes done now, and the rows in the
    /// view (`ferry list` pages through a running engine's queue with it).
    public func records(_ view: QueueView) -> (items: [StoredTransfer], total: Int) {
        core.withLock { core in
            if view.selectsAll {
                // A page of the whole queue: a slice, not a walk from the top (a listing of a long queue).
                let start = min(max(0, view.offset), core.queue.count)
                let end = view.limit.map { min(core.queue.count, start + $0) } ?? core.queue.count
                return (core.queue[start..<end].map { $0.record() }, core.queue.count)
            }
            let matcher = view.matcher
            var items: [StoredTransfer] = []
            var row = 0
            for transfer in core.queue {
                guard matcher.matches(id: transfer.id, state: transfer.state, batch: transfer.batch,
                                      name: { TransferSnapshot.knownName(spec: transfer.spec, fileName: transfer.fileName) },
                                      url: { transfer.spec.url.absoluteString }) else { continue }
                if view.windowContains(row) { items.append(transfer.record()) }
                row += 1
            }
            return (items, row)
        }
    }

    /// Items per state (kept as they change: no walk over the queue).
    public var counts: [TransferState: Int] { core.withLock { $0.counts.filter { $0.value > 0 } } }

    /// What this engine has still to do: the items of its scope running, queued or waiting for a retry, or
    /// still busy. (A headless run waits for them: its own, and any added, resumed or retried through it.)
    public func workLeft() -> Set<TransferID> {
        core.withLock { core in
            func open(_ item: Transfer) -> Bool { item.state.isPending || item.busy || item.finishing }
            if let runnable = core.runnable { return runnable.filter { core.items[$0].map(open) ?? false } }
            return Set(core.queue.lazy.filter(open).map(\.id))
        }
    }

    /// Something holds a connection slot or is being finished: byte counts and rates are moving.
    public var moving: Bool { core.withLock { !$0.slotHolders.isEmpty } }

    /// Changes whenever a state, the order, a setting or a byte count changed (what `snapshot().version` says).
    public var version: UInt64 { core.withLock { $0.version } }

    public func snapshot(of id: TransferID) -> TransferSnapshot? {
        core.withLock { core in core.items[id]?.snapshot() }
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

    private static func isFinished(_ id: TransferID, in core: Core) -> Bool {
        guard let transfer = core.items[id] else { return true }
        return transfer.state.isTerminal && !transfer.busy
    }

    /// Waiters whose last pending item just finished; only the items this change touched are looked at.
    func takeFinishedWaiters(_ core: inout Core, changed: Set<TransferID>) -> [CheckedContinuation<Void, Never>] {
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
}
