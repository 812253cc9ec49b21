import Dispatch
import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI

/// When the run loop's timer runs, and how engine events reach the main queue. No clock is involved.
@Suite struct RunLoopTests {
    func queue(_ states: [TransferState]) -> QueueSnapshot {
        let items = states.enumerated().map { Fixtures.item(Int64($0.offset + 1), "f\($0.offset).bin", $0.element, total: 10) }
        var totals = QueueTotals()
        for item in items { totals.count[item.state, default: 0] += 1 }
        return QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
    }

    @Test func theTimerRunsOnlyWhileSomethingCanChangeWithoutAKey() {
        let list = Fixtures.state()
        // Idle: nothing moves, so no timer at all.
        #expect(Pace.wanted(queue([]), list) == .off)
        #expect(Pace.wanted(queue([.paused, .completed, .failed, .cancelled, .queued]), list) == .off)
        var help = list
        help.screen = .help
        #expect(Pace.wanted(queue([.paused]), help) == .off)
        // A transfer runs (progress raises no engine event): frames.
        #expect(Pace.wanted(queue([.paused, .running]), list) == .frames)
        #expect(Pace.wanted(Fixtures.queue(), list) == .frames)
        // Only the clock changes what is shown: a retry countdown, or the detail's "3s ago".
        #expect(Pace.wanted(queue([.paused, .waiting]), list) == .once)
        var detail = list
        detail.screen = .detail(TransferID(1))
        #expect(Pace.wanted(queue([.completed]), detail) == .once)
        #expect(Pace.wanted(queue([.running]), detail) == .frames)
    }

    /// Runs after everything already queued on the main queue (FIFO), which is where the main actor runs here.
    @MainActor
    func mainQueueDrained() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.main.async { done.resume() }
        }
    }

    @MainActor
    @Test func nudgesCoalesceIntoOneCallOnTheMainQueue() async {
        let wakeup = TerminalWakeup()
        wakeup.nudge()
        await mainQueueDrained()  // no handler yet (the app is not running): nothing happens, nothing is stuck

        var calls = 0
        wakeup.handler = { calls += 1 }
        // While the main actor is busy here, a burst of nudges (from this thread and another) makes one hop.
        for _ in 0..<100 { wakeup.nudge() }
        DispatchQueue.global().sync {
            for _ in 0..<100 { wakeup.nudge() }
        }
        #expect(calls == 0)
        await mainQueueDrained()
        #expect(calls == 1)

        // The next change after that hop wakes it again.
        DispatchQueue.global().sync { wakeup.nudge() }
        await mainQueueDrained()
        #expect(calls == 2)
    }
}
