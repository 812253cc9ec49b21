import Foundation

public enum QueueMove: String, Sendable, Codable, CaseIterable {
    case up, down, top, bottom

    /// Moves the chosen items of `queue` (ordered by rank) together, one step or to an end, keeping their order
    /// among themselves: a step swaps ranks with the unchosen neighbour (chosen items side by side move as a
    /// block, and one at the end stays); to an end, the chosen items take ranks past the end's. Returns the
    /// items whose rank changed (to be saved) and how many chosen items moved. One walk over the queue: moving
    /// a thousand marked items of a million costs what moving one does.
    public func apply<Item>(to queue: inout [Item], rank: WritableKeyPath<Item, Int>, chosen: (Item) -> Bool) -> (ranked: [Item], moved: Int) {
        var ranked: [Item] = []
        var moved = 0
        func swap(_ a: Int, _ b: Int) {
            let rankA = queue[a][keyPath: rank]
            queue[a][keyPath: rank] = queue[b][keyPath: rank]
            queue[b][keyPath: rank] = rankA
            queue.swapAt(a, b)
            ranked += [queue[a], queue[b]]
            moved += 1
        }
        switch self {
        case .up:
            for i in queue.indices.dropFirst() where chosen(queue[i]) && !chosen(queue[i - 1]) { swap(i, i - 1) }
        case .down:
            for i in queue.indices.dropLast().reversed() where chosen(queue[i]) && !chosen(queue[i + 1]) { swap(i, i + 1) }
        case .top, .bottom:
            let picked = queue.filter(chosen)
            guard !picked.isEmpty else { break }
            let rest = queue.filter { !chosen($0) }
            let toTop = self == .top
            // Already there: nothing moves and nothing is written.
            if toTop ? queue.prefix(picked.count).allSatisfy(chosen) : queue.suffix(picked.count).allSatisfy(chosen) { break }
            let base = toTop ? queue[0][keyPath: rank] - picked.count : queue[queue.count - 1][keyPath: rank] + 1
            let placed = picked.enumerated().map { offset, item in
                var item = item
                item[keyPath: rank] = base + offset
                return item
            }
            queue = toTop ? placed + rest : rest + placed
            ranked = placed
            moved = placed.count
        }
        return (ranked, moved)
    }
}
