import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct SchedulerTests {
    func item(_ id: Int64, _ host: String = "a", ready: Bool = true, running: Bool = false) -> Scheduler.Candidate {
        Scheduler.Candidate(id: TransferID(id), host: host, ready: ready, holdsSlot: running)
    }

    @Test func startsInQueueOrderUpToTheCap() {
        let picked = Scheduler.pick((1...6).map { item($0) }, maxConcurrent: 4, maxPerHost: 4)
        #expect(picked == [1, 2, 3, 4].map(TransferID.init))
    }

    @Test func runningItemsCountAgainstTheCap() {
        let items = [item(1, ready: false, running: true), item(2, ready: false, running: true), item(3), item(4)]
        #expect(Scheduler.pick(items, maxConcurrent: 3, maxPerHost: 3) == [TransferID(3)])
    }

    @Test func perHostCapSkipsToAnotherHost() {
        let items = [item(1, "a", ready: false, running: true), item(2, "a"), item(3, "b"), item(4, "a")]
        #expect(Scheduler.pick(items, maxConcurrent: 4, maxPerHost: 1) == [TransferID(3)])
    }

    @Test func notReadyItemsAreSkipped() {
        let items = [item(1, ready: false), item(2)]
        #expect(Scheduler.pick(items, maxConcurrent: 1, maxPerHost: 1) == [TransferID(2)])
    }
}
