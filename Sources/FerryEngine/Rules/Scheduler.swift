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
    public static func pick(_ items: [Candidate], maxConcurrent: Int, maxPerHost: Int,
                            streams: (String) -> Int? = { _ in nil }) -> [TransferID] {
        pick(slotHolders: items.lazy.filter(\.holdsSlot).map(\.host),
             ready: items.lazy.filter(\.ready).map { ($0.id, $0.host) },
             maxConcurrent: maxConcurrent, maxPerHost: maxPerHost, streams: streams)
    }

    /// How far past the caps the walk goes looking for more streams of an HTTP/2 connection already open
    /// (so a long queue costs a pass this much at most, not its length).
    static let streamSearchLimit = 10_000

    /// The same from two sequences: the hosts of whatever holds a slot now, and the ready items in queue
    /// order. `ready` is walked only until the caps are reached (and not at all when no slot is free), so
    /// an engine can pass a lazy view of a long queue and pay only for the part it needs.
    ///
    /// The caps count connections. `streams(host)` is nil for a host over HTTP/1.1, where each item is a
    /// connection of its own; for a host over HTTP/2 it is how many of its items may run at once, all as
    /// streams of one connection, which takes one slot of `maxConcurrent` (and of `maxPerHost`).
    ///
    /// `waiting`, when given, is at least how many items of each host `ready` holds (hosts with none left out):
    /// the walk stops once no host with items still ahead can take one. Without it a host over HTTP/2 whose connection is full let
    /// the walk go on to the end of the queue looking for other hosts' items (it takes one slot of the
    /// global cap, so the cap is never reached): 1,000 items of one host walked 1,000 entries per change,
    /// a quarter of the engine's time; a million queued would have walked a million.
    public static func pick<Host: Hashable, Holders: Sequence<Host>, Ready: Sequence<(TransferID, Host)>>(
        slotHolders: Holders, ready: Ready, maxConcurrent: Int, maxPerHost: Int,
        waiting: [Host: Int]? = nil, streams: (Host) -> Int? = { _ in nil }
    ) -> [TransferID] {
        var perHost: [Host: Int] = [:]
        for host in slotHolders { perHost[host, default: 0] += 1 }
        return pick(slotHoldersPerHost: perHost, ready: ready, maxConcurrent: maxConcurrent, maxPerHost: maxPerHost,
                    waiting: waiting, streams: streams)
    }

    /// The same with the slot holders counted per host already (an engine keeps the count as items change: a
    /// count made at every change cost a pass over the holders, 64 of them with HTTP/2 `-j 64`).
    public static func pick<Host: Hashable, Ready: Sequence<(TransferID, Host)>>(
        slotHoldersPerHost: [Host: Int], ready: Ready, maxConcurrent: Int, maxPerHost: Int,
        waiting: [Host: Int]? = nil, streams: (Host) -> Int? = { _ in nil }
    ) -> [TransferID] {
        var perHost = slotHoldersPerHost
        var running = 0
        // Hosts over HTTP/2 with room for more streams on their connection.
        var open = 0
        for (host, count) in perHost {
            if let cap = streams(host) {
                running += 1
                if count < cap { open += 1 }
            } else {
                running += count
            }
        }
        // Whether `host` can take one more item now.
        func takes(_ host: Host) -> Bool {
            let count = perHost[host, default: 0]
            if let cap = streams(host) { return count < cap && (count > 0 || running < maxConcurrent) }
            return count < maxPerHost && running < maxConcurrent
        }
        // The items of each host the walk has passed: what `waiting` still holds ahead is the difference.
        let counted = waiting ?? [:]
        var passed: [Host: Int] = [:]
        func ahead(_ host: Host) -> Int { counted[host, default: 0] - passed[host, default: 0] }
        // Costs what can be ruled out, not the number of hosts: with the slots full only an HTTP/2 connection
        // already open can take more, and those hosts hold slots; with a slot free every host with items
        // ahead can take one but those at their own cap (a few) and those the walk has passed (as many as it
        // has walked), so the scan stops soon (a queue of 100,000 hosts scanned them all at every change).
        func anyHostCanTakeWhatIsLeft() -> Bool {
            if running >= maxConcurrent {
                return open > 0 && perHost.keys.contains { ahead($0) > 0 && takes($0) }
            }
            return counted.keys.contains { ahead($0) > 0 && takes($0) }
        }
        if waiting != nil, !anyHostCanTakeWhatIsLeft() { return [] }
        var picked: [TransferID] = []
        var pastCaps = 0
        for (id, host) in ready {
            if running >= maxConcurrent {
                guard open > 0, pastCaps < streamSearchLimit else { break }
                pastCaps += 1
            }
            var changed = false
            if waiting != nil {
                passed[host, default: 0] += 1
                changed = ahead(host) <= 0
            }
            let count = perHost[host, default: 0]
            if takes(host) {
                if let cap = streams(host) {
                    if count == 0 {
                        running += 1
                        if cap > 1 { open += 1 }
                    } else if count + 1 == cap {
                        open -= 1
                    }
                } else {
                    running += 1
                }
                picked.append(id)
                perHost[host] = count + 1
                changed = true
            }
            if changed, waiting != nil, !anyHostCanTakeWhatIsLeft() { break }
        }
        return picked
    }
}
