import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// Bandwidth limits: the transport applies them (BandwidthLimits); the manager keeps them with the items.
extension TransferManager {
    /// The limits a task of `transfer` answers to; the item's own limit is handed to the transport here.
    func limitMembership(_ transfer: Transfer) -> LimitMembership {
        if limits.current.items[transfer.id.rawValue] != transfer.rateLimit { limits.setItem(transfer.id.rawValue, transfer.rateLimit) }
        return LimitMembership(limits: limits, item: transfer.id.rawValue, batch: transfer.batch, direction: transfer.spec.direction)
    }

    /// The limit every one of `specs` has, when they have one and the same (a tree's `--limit-rate`).
    static func commonLimit(_ specs: [TransferSpec]) -> Int64? {
        guard let rate = specs.first?.rateLimit, specs.allSatisfy({ $0.rateLimit == rate }) else { return nil }
        return rate
    }

    /// Sets a batch's own limit (bytes per second, nil for none), shared by its items, at once for those running,
    /// and saves it with the batch. A batch the store does not have is refused (nothing set).
    func setBatchLimit(_ batch: Int64, _ rate: Int64?) throws {
        let rate = rate.flatMap { $0 > 0 ? $0 : nil }
        let found: Bool
        do {
            found = try store.saveBatchLimit(batch, rate)
        } catch {
            throw StateError("cannot save the limit: \((error as? StateError)?.description ?? "\(error)")")
        }
        guard found else { throw UsageError("no batch \(batch)") }
        limits.setBatch(batch, rate)
        mutate { core in
            core.batchLimits[batch] = rate
            core.version &+= 1
            return ((), [])
        }
    }

    /// Sets one item's bandwidth limit (bytes per second, nil for none), at once for its running transfer,
    /// and saves it with the item. False when there is no such item.
    @discardableResult
    @_spi(Testing) public func setRateLimit(_ id: TransferID, _ rate: Int64?) -> Bool {
        let rate = rate.flatMap { $0 > 0 ? $0 : nil }
        let found: Bool = mutate { core in
            guard let transfer = loaded(id, &core) else { return (false, []) }
            transfer.rateLimit = rate
            core.touch(id)
            return (true, [])
        }
        if found { limits.setItem(id.rawValue, rate) }
        return found
    }

    /// Sets the global limits (bytes per second, nil for none); a schedule, if any, sets the download limit
    /// again at its next change.
    @_spi(Testing) public func setGlobalLimits(download: Int64?, upload: Int64?) {
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
    func followSchedule(_ schedule: LimitSchedule) {
        let now = clock.now
        limits.setGlobalDownload(schedule.rate(at: now))
        let next = schedule.nextChange(after: now)
        clock.after(max(1, next.timeIntervalSince(now))) { [weak self] in
            guard let self, !self.core.withLock({ $0.shuttingDown }) else { return }
            self.followSchedule(schedule)
            self.limitsShown()
        }
    }
}
