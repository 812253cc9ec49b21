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

    @Test func demandLeavesRoomToGrowBack() {
        #expect(LimitShares.demand(intake: 1_024_000) == 1_280_000)
        #expect(LimitShares.demand(intake: 0) == 16_384)
    }
}
