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

    // HTTP/2: a host's items are streams of one connection, which takes one slot.

    @Test func aMultiplexedHostTakesOneSlotForUpToItsStreams() {
        let items = (1...8).map { item($0, "h2") } + [item(9, "b"), item(10, "c"), item(11, "d")]
        let picked = Scheduler.pick(items, maxConcurrent: 3, maxPerHost: 3) { $0 == "h2" ? 5 : nil }
        #expect(picked == [1, 2, 3, 4, 5, 9, 10].map(TransferID.init), "5 streams on one slot, two slots for the others")
    }

    @Test func runningStreamsLeaveRoomOnTheirConnectionWhenTheSlotsAreFull() {
        let items = [item(1, "h2", ready: false, running: true), item(2, "b", ready: false, running: true),
                     item(3, "b"), item(4, "h2"), item(5, "h2")]
        let picked = Scheduler.pick(items, maxConcurrent: 2, maxPerHost: 2) { $0 == "h2" ? 3 : nil }
        #expect(picked == [4, 5].map(TransferID.init))
    }

    @Test func aNewMultiplexedHostNeedsAFreeSlot() {
        let items = [item(1, "b", ready: false, running: true), item(2, "h2"), item(3, "h2")]
        #expect(Scheduler.pick(items, maxConcurrent: 1, maxPerHost: 1) { $0 == "h2" ? 4 : nil }.isEmpty)
    }

    @Test func theCapsStreamsFollowTheGlobalCapAboveTheMinimum() {
        #expect(ConcurrencyCaps(global: 4).streams == ConcurrencyCaps.minimumStreams)
        #expect(ConcurrencyCaps(global: 64).streams == 64)
    }

    // The walk of a long queue: with `waiting` (queued items per host) it ends once no host with items ahead
    // can take one.

    /// Counts how many items a walk looked at.
    final class Walk: @unchecked Sendable { var looked = 0 }
    func walk(_ ready: [(TransferID, String)], _ walk: Walk) -> LazyMapSequence<[(TransferID, String)], (TransferID, String)> {
        ready.lazy.map { walk.looked += 1; return $0 }
    }

    /// 10,000 items of one HTTP/2 host (64 streams a connection) queued behind `running` of its streams: what was
    /// picked and how many items the walk looked at (with the queued counts, or without them).
    func pickBehind(running: Int, counted: Bool = true) -> (picked: [TransferID], looked: Int) {
        let queued = (1...10_000).map { (TransferID(Int64($0)), "h2") }
        let looked = Walk()
        let picked = Scheduler.pick(slotHolders: Array(repeating: "h2", count: running), ready: walk(queued, looked),
                                    maxConcurrent: 64, maxPerHost: 64, waiting: counted ? ["h2": queued.count] : nil) { _ in 64 }
        return (picked, looked.looked)
    }

    @Test func aFullMultiplexedConnectionEndsTheWalkBeforeItBegins() {
        let full = pickBehind(running: 64)
        #expect(full.picked.isEmpty)
        #expect(full.looked == 0)
        // Without the counts it looks at every item (what the engine did before).
        #expect(pickBehind(running: 64, counted: false).looked == 10_000)
    }

    @Test func aStreamThatEndedStartsOneMoreAndTheWalkStopsThere() {
        let oneFree = pickBehind(running: 63)
        #expect(oneFree.picked == [TransferID(1)])
        #expect(oneFree.looked == 1)
    }

    @Test func anotherHostsItemFarBehindAFullConnectionStillStarts() {
        let running = Array(repeating: "h2", count: 64)
        let queued = (1...500).map { (TransferID(Int64($0)), "h2") } + [(TransferID(501), "b")]
        let counted = Walk()
        let picked = Scheduler.pick(slotHolders: running, ready: walk(queued, counted), maxConcurrent: 64, maxPerHost: 64,
                                    waiting: ["h2": 500, "b": 1]) { $0 == "h2" ? 64 : nil }
        #expect(picked == [TransferID(501)])
        #expect(counted.looked == 501)
    }

    @Test func itemsCountedButNotReadyNeverStopTheWalkEarly() {
        // `waiting` may count more than `ready` holds (queued items busy or not this engine's): the walk then
        // goes on, as it did without the counts.
        let queued = [(TransferID(1), "a"), (TransferID(2), "b")]
        let picked = Scheduler.pick(slotHolders: [String](), ready: queued, maxConcurrent: 4, maxPerHost: 1,
                                    waiting: ["a": 5, "b": 1])
        #expect(picked == [TransferID(1), TransferID(2)])
    }

    /// Review finding: the counts made each change scan every host with queued items (`streams`, asked of each
    /// host a scan looks at, counts them): a list over 100,000 hosts scanned 100,000 at every change.
    @Test(arguments: [8, 7])
    func aQueueOverManyHostsCostsWhatTheCapsRuleOutNotItsHosts(busy: Int) {
        let hosts = (0..<10_000).map { "h\($0)" }
        let ready = hosts.enumerated().map { (TransferID(Int64($0.offset)), $0.element) }
        var asked = 0
        let picked = Scheduler.pick(slotHolders: (0..<busy).map { "busy\($0)" }, ready: ready, maxConcurrent: 8,
                                    maxPerHost: 1, waiting: Dictionary(uniqueKeysWithValues: hosts.map { ($0, 1) }),
                                    streams: { _ in asked += 1; return nil })
        #expect(picked == (busy == 8 ? [] : [TransferID(0)]))
        #expect(asked < 100, "\(asked) hosts asked")
    }
}

