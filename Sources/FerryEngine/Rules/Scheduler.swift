import FerryModel
import FerryStorage
import FerryTransport

/// Which queued items start next: the user's order, a global cap and a per-host cap. Pure.
public enum Scheduler {
    public struct Candidate: Sendable, Equatable {
        public var id: TransferID
        public var host: String
        /// Queued and ready (no attempt still draining).
        public var ready: Bool
        /// Holds a connection slot now.
        public var holdsSlot: Bool
        public init(id: TransferID, host: String, ready: Bool, holdsSlot: Bool) {
            self.id = id
            self.host = host
            self.ready = ready
            self.holdsSlot = holdsSlot
        }
    }

    /// `items` in queue order. Returns the ids to start now, in order.
    public static func pick(_ items: [Candidate], maxConcurrent: Int, maxPerHost: Int) -> [TransferID] {
        pick(slotHolders: items.lazy.filter(\.holdsSlot).map(\.host),
             ready: items.lazy.filter(\.ready).map { ($0.id, $0.host) },
             maxConcurrent: maxConcurrent, maxPerHost: maxPerHost)
    }

    /// The same from two sequences: the hosts of whatever holds a slot now, and the ready items in queue
    /// order. `ready` is walked only until the caps are reached (and not at all when no slot is free), so
    /// an engine can pass a lazy view of a long queue and pay only for the part it needs.
    public static func pick<Holders: Sequence<String>, Ready: Sequence<(TransferID, String)>>(
        slotHolders: Holders, ready: Ready, maxConcurrent: Int, maxPerHost: Int
    ) -> [TransferID] {
        var running = 0
        var perHost: [String: Int] = [:]
        for host in slotHolders {
            running += 1
            perHost[host, default: 0] += 1
        }
        var picked: [TransferID] = []
        guard running < maxConcurrent else { return picked }
        for (id, host) in ready {
            guard perHost[host, default: 0] < maxPerHost else { continue }
            picked.append(id)
            running += 1
            perHost[host, default: 0] += 1
            if running >= maxConcurrent { break }
        }
        return picked
    }
}
