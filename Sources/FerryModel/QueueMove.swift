import Foundation

public enum QueueMove: String, Sendable, Codable, CaseIterable {
    case up, down, top, bottom

    /// Where an item taken out at `index` goes back in, among the `count` items left.
    public func target(from index: Int, among count: Int) -> Int {
        switch self {
        case .up: max(0, index - 1)
        case .down: min(count, index + 1)
        case .top: 0
        case .bottom: count
        }
    }

    /// The new ranks a move writes, for the item at `index` of a queue of `count` items ordered by rank
    /// (`rank(i)`: the rank of the item at i). A step swaps ranks with the neighbour; to an end goes past the
    /// end's rank. No other item changes, so a move costs one or two rows whatever the queue's length.
    public func ranks(moving index: Int, count: Int, rank: (Int) -> Int) -> [(index: Int, rank: Int)] {
        switch self {
        case .up where index > 0: return [(index, rank(index - 1)), (index - 1, rank(index))]
        case .down where index < count - 1: return [(index, rank(index + 1)), (index + 1, rank(index))]
        case .top where index > 0: return [(index, rank(0) - 1)]
        case .bottom where index < count - 1: return [(index, rank(count - 1) + 1)]
        default: return []
        }
    }
}
