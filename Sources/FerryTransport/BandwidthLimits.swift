import FerryModel
import Foundation
import Synchronization

/// The bandwidth limits of one engine, read by the transport: a global download limit, a global upload
/// limit, a limit per batch (a tree's, shared by its files) and a limit per item. Rates in bytes per second; nil
/// is unlimited. The transport shares the global rate between the items moving in that direction (LimitShares),
/// a batch's between its files as they come and go (one bucket), and an item's rate between its ranges.
public final class BandwidthLimits: Sendable {
    public struct Rates: Sendable, Equatable {
        public var download: Int64?
        public var upload: Int64?
        public var items: [Int64: Int64] = [:]
        public var batches: [Int64: Int64] = [:]
        /// Items whose batch changed while they ran (an add that found them: another tree's re-run), by item: the
        /// batch their running transfers now answer to (LimitMembership.batch is the one they started in).
        public var movedItems: [Int64: Int64] = [:]

        /// No limit at all: every transfer runs free.
        public var limitNothing: Bool { download == nil && upload == nil && items.isEmpty && batches.isEmpty }
    }

    private let rates = Mutex(Rates())
    private let changes = Atomic<UInt64>(0)

    public init() {}

    public var current: Rates { rates.withLock { $0 } }

    /// Bumped on every change: the transport recomputes its shares when it moves.
    package var version: UInt64 { changes.load(ordering: .acquiring) }

    public func setGlobal(download: Int64?, upload: Int64?) {
        update { $0.download = Self.normalized(download); $0.upload = Self.normalized(upload) }
    }

    public func setGlobalDownload(_ rate: Int64?) { update { $0.download = Self.normalized(rate) } }
    public func setGlobalUpload(_ rate: Int64?) { update { $0.upload = Self.normalized(rate) } }

    public func setItem(_ item: Int64, _ rate: Int64?) {
        update { $0.items[item] = Self.normalized(rate) }
    }

    /// A batch's limit (a tree's): its items share it, whichever of them are moving.
    public func setBatch(_ batch: Int64, _ rate: Int64?) {
        update { $0.batches[batch] = Self.normalized(rate) }
    }

    /// An item now in `batch`: its running transfers answer to that batch's limit from now on.
    public func moveItem(_ item: Int64, toBatch batch: Int64) {
        guard current.movedItems[item] != batch else { return }
        update { $0.movedItems[item] = batch }
    }

    private func update(_ change: (inout Rates) -> Void) {
        rates.withLock { change(&$0) }
        changes.add(1, ordering: .releasing)
        CurlTransport.shared.limitsChanged()
    }

    private static func normalized(_ rate: Int64?) -> Int64? {
        guard let rate, rate > 0 else { return nil }
        return rate
    }
}

/// Which limits a transfer answers to: its engine's, as the item it belongs to (and the batch the item is in),
/// in one direction.
package struct LimitMembership {
    package let limits: BandwidthLimits
    package let item: Int64
    package let batch: Int64?
    package let direction: Direction

    /// Whether a limit holds this transfer back now (its item's own, its batch's, or the engine's for its direction).
    package var limited: Bool {
        let rates = limits.current
        return rates.items[item] != nil || batch(in: rates).flatMap { rates.batches[$0] } != nil
            || (direction == .download ? rates.download : rates.upload) != nil
    }

    /// The batch whose limit it answers to now: the one its item was moved to while it ran, else its own.
    package func batch(in rates: BandwidthLimits.Rates) -> Int64? { rates.movedItems[item] ?? batch }

    package init(limits: BandwidthLimits, item: Int64, batch: Int64? = nil, direction: Direction) {
        self.limits = limits
        self.item = item
        self.batch = batch
        self.direction = direction
    }
}
