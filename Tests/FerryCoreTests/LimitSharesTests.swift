@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
import Testing

/// Sharing a global rate between items: max-min fair, with what a slow item cannot use going to the others.
@Suite struct LimitSharesTests {
    typealias Item = LimitShares.Item

    @Test func equalSharesWhenEveryItemWantsMore() {
        let shares = LimitShares.allocate(global: 900, items: [Item(id: 1), Item(id: 2), Item(id: 3)])
        #expect(shares == [1: 300, 2: 300, 3: 300])
    }

    @Test func whatASlowItemCannotUseGoesToTheOthers() {
        let shares = LimitShares.allocate(global: 1000, items: [Item(id: 1, demand: 100), Item(id: 2), Item(id: 3)])
        #expect(shares == [1: 100, 2: 450, 3: 450])
    }

    @Test func anItemsOwnLimitCapsItsShare() {
        let shares = LimitShares.allocate(global: 1000, items: [Item(id: 1, own: 200), Item(id: 2, own: 700), Item(id: 3)])
        #expect(shares == [1: 200, 2: 400, 3: 400])
    }

    @Test func withoutAGlobalRateOnlyOwnLimitsApply() {
        let shares = LimitShares.allocate(global: nil, items: [Item(id: 1, own: 200), Item(id: 2, demand: 50)])
        #expect(shares == [1: 200, 2: Double?.none])
    }

    @Test func demandIsWhatWasUsed() {
        #expect(LimitShares.demand(intake: 1_024_000) == 1_024_000)
        #expect(LimitShares.demand(intake: 0) == 16_384)
        #expect(LimitShares.headroom(1_024_000) == 1_280_000)
    }

    /// An item held to what it used gets a quarter more to grow back, and only what it used is taken from the
    /// others: the fast item gets all the rest of the global rate.
    @Test func anItemHeldToItsDemandHasRoomToGrowAndTheOthersTheRest() {
        let rates = LimitShares.rates(global: 1_000_000, own: [:], members: [.init(item: 1, intake: 200_000), .init(item: 2, intake: nil)])
        #expect(rates == [250_000, 800_000])
        // Two ranges of one item share its rate.
        let ranges = LimitShares.rates(global: 1_000_000, own: [:], members: [.init(item: 1, intake: 100_000), .init(item: 1, intake: 100_000),
                                                                        .init(item: 2, intake: nil)])
        #expect(ranges == [125_000, 125_000, 800_000])
        // An own limit stays the cap (no room past it), and an item that uses more than an equal share gets its share.
        #expect(LimitShares.rates(global: 1_000_000, own: [1: 200_000], members: [.init(item: 1, intake: 200_000), .init(item: 2, intake: nil)]) == [200_000, 800_000])
        #expect(LimitShares.rates(global: 1_000_000, own: [:], members: [.init(item: 1, intake: 900_000), .init(item: 2, intake: nil)]) == [500_000, 500_000])
        // Without a global rate nothing is shared: a slow second's intake never caps an item's own limit (a limit
        // raised to 2 MiB/s held at 0.25 under the whole test suite's load).
        #expect(LimitShares.rates(global: nil, own: [1: 2_000_000], members: [.init(item: 1, intake: 100_000)]) == [2_000_000])
    }
}
