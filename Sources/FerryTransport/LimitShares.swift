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

    /// What an item that was never held back took in gives its demand in the sharing: what it used, never under
    /// one of libcurl's 16 KiB writes a second.
    static func demand(intake: Double) -> Double {
        max(intake, Double(16 << 10))
    }

    /// The rate of an item held to its demand: a quarter more, so that it can grow back to a fair share. Only
    /// the demand is taken from what the others share (with the quarter taken too, a 256 KiB/s server beside a
    /// fast one left 6 % of a 1 MiB/s limit unused); the engine's own bucket keeps the total at the global rate
    /// while the item grows.
    static func headroom(_ demand: Double) -> Double {
        demand * 1.25
    }

    /// One transfer of a group moving one way: the item it belongs to and its last measured intake (nil: held
    /// back, or new).
    struct Member {
        var item: Int64
        var intake: Double?
    }

    /// Each member's rate, in the order given: the global rate shared between the items (`allocate`; an item
    /// whose members all measured an intake asks for that, `demand`), and an item's rate equally between its
    /// members (its ranges). nil: unlimited.
    static func rates(global: Double?, own: [Int64: Int64], members: [Member]) -> [Double?] {
        let byItem = Dictionary(grouping: members.indices) { members[$0].item }
        let items = byItem.map { item, indices -> Item in
            let intakes = indices.compactMap { members[$0].intake }
            let demand = intakes.count < indices.count ? nil : Self.demand(intake: intakes.reduce(0, +))
            return Item(id: item, own: own[item].map(Double.init), demand: demand)
        }
        let shares = allocate(global: global, items: items)
        let demands = Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0) })
        return members.map { member in
            guard var share = shares[member.item] ?? nil else { return nil }
            // Held to its demand by the sharing (not to its own limit, nor to an equal share below its demand, nor
            // without a global rate, when nothing is shared): room to grow back.
            if global != nil, let item = demands[member.item], let demand = item.demand, share == demand, demand < (item.own ?? .infinity) {
                share = min(headroom(demand), item.own ?? .infinity, global ?? .infinity)
            }
            return share / Double(byItem[member.item]!.count)
        }
    }
}
