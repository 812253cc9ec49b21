import FerryCore
import Testing

/// The one concurrency rule: -j, the config and the UI's + and - all go through ConcurrencyCaps.
@Suite struct ConcurrencyCapsTests {
    @Test func aPerHostCapAsHighAsTheGlobalOneFollowsIt() {
        let caps = ConcurrencyCaps(global: 4, perHost: 4)
        #expect(caps.perHostCap == nil)
        #expect(caps.stepped(by: 1).perHost == 5)
        #expect(caps.with(global: 8).perHost == 8)
        #expect(caps.stepped(by: -1).perHost == 3)
    }

    @Test func aLowerPerHostCapHoldsWhereverTheGlobalOneGoes() {
        let caps = ConcurrencyCaps(global: 8, perHost: 2)
        #expect(caps.with(global: 20).perHost == 2)
        #expect(caps.with(global: 1).perHost == 1)
        #expect(caps.with(global: 1).with(global: 6).perHost == 2)
    }

    @Test func stepsNeverMoveTheOtherWayOrLeaveTheRange() {
        #expect(ConcurrencyCaps(global: 100).stepped(by: 1).global == 101)
        #expect(ConcurrencyCaps(global: 256).stepped(by: 1).global == 256)
        #expect(ConcurrencyCaps(global: 1).stepped(by: -1).global == 1)
        #expect(ConcurrencyCaps(global: 0).global == 1)
    }

    @Test func theConfigsDefaultsLeaveNoPerHostCapOfItsOwn() {
        #expect(Config().engine.caps == ConcurrencyCaps(global: 4))
        var config = Config()
        config.concurrency = 8
        config.perHost = 2
        #expect(config.engine.caps.perHostCap == 2)
    }
}
