import FerryModel
import Foundation

/// How a global rate is shared between the items moving one way: max-min fair. An item gets at most what
/// it can use (its own limit, or what it took in the last second when that was under its share: a slow
/// server, a slow disk), and what it leaves is shared equally by the others, so a global limit is not
/// left half used when one item cannot keep up.
enum LimitShares {
    struct Item: Equatable {
        var id: Int64
        /// The item's own limit, nil for none.
        var own: Double? = nil
        /// What the item can use by the last measurement, nil when it used all it was given.
        var demand: Double? = nil
    }

    /// Each item's rate, nil for unlimited (no global rate and no own limit).
    static func allocate(global: Double?, items: [Item]) -> [Int64: Double?] {
        var result: [Int64: Double?] = [:]
        guard let global else {
            for item in items { result[item.id] = item.own }
            return result
        }
        // Caps below an equal share are met in full, smallest first; the rest share what is left.
        var open = items.map { (id: $0.id, cap: [$0.own, $0.demand].compactMap { $0 }.min()) }
        var left = global
        while !open.isEmpty {
            let equal = left / Double(open.count)
            let met = open.filter { ($0.cap ?? .infinity) <= equal }
            if met.isEmpty {
                for item in open { result[item.id] = equal }
                break
            }
            for item in met {
                result[item.id] = item.cap!
                left -= item.cap!
            }
            open.removeAll { item in met.contains { $0.id == item.id } }
        }
        return result
    }

    /// What an item that was never held back took in gives its demand: a quarter more (so that it can grow
    /// back to a fair share) and never under one of libcurl's 16 KiB writes a second.
    static func demand(intake: Double) -> Double {
        max(intake * 1.25, Double(16 << 10))
    }
}
