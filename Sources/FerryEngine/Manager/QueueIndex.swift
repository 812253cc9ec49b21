import FerryModel
import FerryStorage

/// Every item of the queue in the user's order (rank, then id), loaded or not, with what is counted of them: the
/// items per state and the queued items per host. It is what ordering, counting, choosing and scheduling need of
/// an item the engine has not loaded (the rest is its row in the store). A value with its own invariants
/// (`violations`): every change goes through its methods, which keep the counts with the entries, so nothing
/// outside can put them out of step. QueueIndexTests checks them after every kind of change, at any size.
struct QueueIndex: RandomAccessCollection {
    /// One item as the index keeps it.
    struct Entry {
        // In this order the entry takes 32 bytes (the batch's tag, the state and the host fill one word): 8 MB
        // less at 1,000,000 items than in the order of their importance.
        var rank: Int
        var id: TransferID
        var batch: Int64?
        var state: TransferState
        /// An index into `hosts`.
        var host: Int32

        /// Queue order: by rank, ties by id.
        func precedes(rank: Int, id: TransferID) -> Bool { (self.rank, self.id) < (rank, id) }
    }

    private var entries: [Entry] = []
    /// The hosts of the queue's items, each once (Entry.host indexes it; a host stays once its items are gone).
    private(set) var hosts: [String] = []
    private(set) var hostIDs: [String: Int32] = [:]
    /// Items per state (a state with none is not in it): a front end's counts and a window of the whole queue
    /// cost no walk over it.
    private(set) var counts: [TransferState: Int] = [:]
    /// Queued items per host (Entry.host; a host with none is not in it, since the scheduler scans it: a queue
    /// over 100,000 hosts). The scheduler's walk stops once no host with queued items ahead can take one
    /// (Scheduler.pick's `waiting`).
    private(set) var queuedPerHost: [Int32: Int] = [:]
    /// Items per state of each batch (a tree's row says its files' states without a walk over them).
    private(set) var countsPerBatch: [Int64: [TransferState: Int]] = [:]

    var startIndex: Int { 0 }
    var endIndex: Int { entries.count }
    subscript(position: Int) -> Entry { entries[position] }

    /// The id a host has in the entries, given it if it has none.
    mutating func hostID(_ host: String) -> Int32 {
        if let id = hostIDs[host] { return id }
        hosts.append(host)
        hostIDs[host] = Int32(hosts.count - 1)
        return Int32(hosts.count - 1)
    }

    /// A new item after every other (its rank and id must come after the last's).
    mutating func append(id: TransferID, rank: Int, batch: Int64?, state: TransferState, host: String) {
        precondition(entries.last.map { $0.precedes(rank: rank, id: id) } ?? true, "an item appended out of order")
        entries.append(Entry(rank: rank, id: id, batch: batch, state: state, host: hostID(host)))
        count(entries[entries.count - 1], +1)
    }

    /// Where `id` is, found by its rank (nil: not in the queue).
    func position(of id: TransferID, rank: Int) -> Int? {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].precedes(rank: rank, id: id) { low = mid + 1 } else { high = mid }
        }
        if low < entries.count, entries[low].id == id { return low }
        return nil
    }

    /// Where `id` is, found by a walk (its rank unknown).
    func position(of id: TransferID) -> Int? { entries.firstIndex { $0.id == id } }

    /// The entry at `position` takes `state` and `batch`, counted.
    mutating func set(_ state: TransferState, batch: Int64?, at position: Int) {
        guard entries[position].state != state || entries[position].batch != batch else { return }
        count(entries[position], -1)
        entries[position].state = state
        entries[position].batch = batch
        count(entries[position], +1)
    }

    /// Takes the items of `ids` out (one walk, the others' order kept); those taken, in queue order.
    mutating func remove(_ ids: Set<TransferID>) -> [Entry] {
        var gone: [Entry] = []
        var kept: [Entry] = []
        kept.reserveCapacity(entries.count)
        for entry in entries {
            if ids.contains(entry.id) { gone.append(entry) } else { kept.append(entry) }
        }
        guard !gone.isEmpty else { return [] }
        entries = kept
        for entry in gone { count(entry, -1) }
        return gone
    }

    /// Moves the items of `ids` together (QueueMove.apply); the entries whose rank changed, with their new ranks.
    mutating func move(_ ids: Set<TransferID>, _ direction: QueueMove) -> [Entry] {
        guard !ids.isEmpty else { return [] }
        let (ranked, moved) = direction.apply(to: &entries, rank: \.rank) { ids.contains($0.id) }
        return moved > 0 ? ranked : []
    }

    /// The entry at `from` goes to `to`, and those between each take their neighbour's rank (so the others keep
    /// their order and only that span's ranks change); the entries whose rank changed. Nothing moves (and nil
    /// comes back) when two ranks in the span are equal (the id orders them, and a shift of ranks cannot).
    mutating func shift(from: Int, to: Int) -> [Entry]? {
        let span = Swift.min(from, to)...Swift.max(from, to)
        let ranks = span.map { entries[$0].rank }
        guard zip(ranks, ranks.dropFirst()).allSatisfy({ $0 < $1 }) else { return nil }
        let entry = entries.remove(at: from)
        entries.insert(entry, at: to)
        for (index, rank) in zip(span, ranks) { entries[index].rank = rank }
        return span.map { entries[$0] }
    }

    private mutating func count(_ entry: Entry, _ delta: Int) {
        let now = counts[entry.state, default: 0] + delta
        counts[entry.state] = now == 0 ? nil : now
        if entry.state == .queued {
            let queued = queuedPerHost[entry.host, default: 0] + delta
            queuedPerHost[entry.host] = queued == 0 ? nil : queued
        }
        if let batch = entry.batch {
            let inBatch = countsPerBatch[batch, default: [:]][entry.state, default: 0] + delta
            countsPerBatch[batch, default: [:]][entry.state] = inBatch == 0 ? nil : inBatch
            if countsPerBatch[batch]?.isEmpty == true { countsPerBatch[batch] = nil }
        }
    }

    /// What is out of step, counted afresh from the entries (empty: nothing): the order by rank and id, one
    /// entry per id, hosts that are known, and the counts per state and the queued per host. A walk over the
    /// whole queue: for tests, and for asserts on a small queue.
    func violations() -> [String] {
        var found: [String] = []
        if let at = entries.indices.dropLast().first(where: { !entries[$0].precedes(rank: entries[$0 + 1].rank, id: entries[$0 + 1].id) }) {
            found.append("entries \(at) and \(at + 1) are out of order (\(entries[at].rank)/\(entries[at].id), \(entries[at + 1].rank)/\(entries[at + 1].id))")
        }
        if Set(entries.map(\.id)).count != entries.count { found.append("an id is in the index twice") }
        if entries.contains(where: { $0.host < 0 || Int($0.host) >= hosts.count }) { found.append("an entry names an unknown host") }
        if hostIDs.count != hosts.count || hostIDs.contains(where: { hosts[Int($0.value)] != $0.key }) {
            found.append("the hosts and their ids disagree")
        }
        let counted = Dictionary(grouping: entries, by: \.state).mapValues(\.count)
        if counted != counts { found.append("counts per state \(counts) are not the entries' \(counted)") }
        let queued = Dictionary(grouping: entries.filter { $0.state == .queued }, by: \.host).mapValues(\.count)
        if queued != queuedPerHost { found.append("queued per host \(queuedPerHost) is not the entries' \(queued)") }
        var perBatch: [Int64: [TransferState: Int]] = [:]
        for entry in entries { if let batch = entry.batch { perBatch[batch, default: [:]][entry.state, default: 0] += 1 } }
        if perBatch != countsPerBatch { found.append("counts per batch \(countsPerBatch) are not the entries' \(perBatch)") }
        return found
    }
}

/// The items that hold a connection slot or are finishing, with their hosts (QueueIndex's host ids): what the
/// scheduler counts against the caps, kept per host too so that no pass over the queue is needed (a pass per
/// change made a long queue quadratic: 1,000 files, 4,000 passes). A value with its own invariant (`violations`):
/// the count per host is always the holders'. SlotBookTests checks it.
struct SlotBook {
    private(set) var holders: [TransferID: Int32] = [:]
    /// `holders` counted per host (a host with none is not in it).
    private(set) var perHost: [Int32: Int] = [:]

    var isEmpty: Bool { holders.isEmpty }

    /// `id` holds a slot on `host`, or none (nil).
    mutating func set(_ id: TransferID, _ host: Int32?) {
        let before = holders[id]
        guard before != host else { return }
        if let before {
            let left = perHost[before, default: 0] - 1
            perHost[before] = left == 0 ? nil : left
        }
        if let host { perHost[host, default: 0] += 1 }
        holders[id] = host
    }

    /// What is out of step (empty: nothing): the count per host against the holders.
    func violations() -> [String] {
        let counted = Dictionary(grouping: holders.values, by: { $0 }).mapValues(\.count)
        return counted == perHost ? [] : ["slots per host \(perHost) are not the holders' \(counted)"]
    }
}
