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
        var running = 0
        var perHost: [String: Int] = [:]
        for item in items where item.holdsSlot {
            running += 1
            perHost[item.host, default: 0] += 1
        }
        var picked: [TransferID] = []
        for item in items where item.ready {
            guard running < maxConcurrent else { break }
            guard perHost[item.host, default: 0] < maxPerHost else { continue }
            picked.append(item.id)
            running += 1
            perHost[item.host, default: 0] += 1
        }
        return picked
    }
}

public enum QueueMove: Sendable {
    case up, down, top, bottom
}
