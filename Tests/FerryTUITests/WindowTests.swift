import Foundation
import Testing
@testable import FerryCore
@testable import FerryModel
@testable import FerryTUI

/// The list of a long queue from an engine that sends windows: the screen shows the window's rows, keys move
/// over the whole view, and the app knows which window to ask for next.
@Suite struct WindowTests {
    /// Rows `offset..<offset+count` of a 100,000-item view, as the engine sends them.
    func window(offset: Int, count: Int = 36, total: Int = 100_000) -> QueueSnapshot {
        let items = (offset..<min(total, offset + count)).map { Fixtures.item(Int64($0 + 1), "f\($0 + 1).bin", .queued) }
        var snapshot = QueueSnapshot(version: 1, items: items, totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
        snapshot.totals.count[.queued] = total
        snapshot.window = QueueWindow(offset: offset, total: total, of: QueueView(treesAsRows: true))
        return snapshot
    }

    @Test func gOnAWindowSelectsTheLastRowOfTheViewAndAsksForItsWindow() {
        let state = Fixtures.state()  // 12 rows of list
        let first = window(offset: 0)
        #expect(state.wantedView(state.rows(first)) == QueueView(offset: 0, limit: 36, treesAsRows: true))
        #expect(state.windowCovers(QueueView(offset: 0, limit: 36, treesAsRows: true), state.rows(first)))

        let (jumped, _) = reduce(state, .character("G"), first)
        #expect(jumped.selectedIndex == 99_999)
        #expect(jumped.selectedID == nil)  // not held yet
        #expect(!jumped.windowCovers(QueueView(offset: 0, limit: 36, treesAsRows: true), jumped.rows(first)))
        let wanted = jumped.wantedView(jumped.rows(first))
        #expect(wanted == QueueView(offset: 99_976, limit: 36, treesAsRows: true))

        // The window comes: the last row is selected and shown, with the rows above it.
        let last = window(offset: 99_976)
        #expect(jumped.selectedItem(last)?.id == TransferID(100_000))
        let screen = Fixtures.render(jumped, last).text
        #expect(screen.contains("f100000.bin"))
        #expect(screen.contains("f99989.bin"))
        #expect(!screen.contains("f99988.bin"))
        // Enter opens the held row's details.
        let (detail, _) = reduce(jumped, .enter, last)
        #expect(detail.screen == .detail(TransferID(100_000)))
        // Enter before the window came: the details open when it comes (the app does it), unless another key
        // came first.
        let (early, _) = reduce(jumped, .enter, first)
        #expect(early.screen == .list && early.openWhenHeld)
        #expect(!reduce(early, .character("j"), first).0.openWhenHeld)
    }

    @Test func aViewOrAFilterAsksTheEngineForItsRows() {
        var state = Fixtures.state()
        state.view = .failed
        state.filter = "host.example"
        let wanted = state.wantedView(state.rows(window(offset: 0)))
        #expect(wanted.states == [.failed, .cancelled])
        #expect(wanted.filter == "host.example")
        #expect(!state.windowCovers(QueueView(offset: 0, limit: 36, treesAsRows: true), state.rows(window(offset: 0))))
    }

    @Test func rowsNotHeldYetAreBlankForAFrame() {
        var state = Fixtures.state()
        state.selectedIndex = 50_000
        let screen = Fixtures.render(state, window(offset: 0)).text
        #expect(!screen.contains(".bin"))
    }

    /// A new window of an unchanged queue has the engine's same version: the app redraws on what it shows
    /// (before, it waited for the next whole second: G then Enter took a second on a quiet queue).
    @Test func aNewWindowOfTheSameVersionIsSomethingNewToShow() {
        let top = window(offset: 0), end = window(offset: 99_976)
        #expect(top.version == end.version)
        #expect(top.shown != end.shown)
        #expect(top.shown == window(offset: 0).shown)
    }

    /// Keys after a change of view but before its rows come (1 then G at once): the old view's rows are not
    /// the new view's, so G means the end of the new view, found when its rows come.
    @Test func keysBeforeTheNewViewsRowsComeActOnTheNewView() {
        var failedView = window(offset: 0, count: 20, total: 20)
        failedView.window = QueueWindow(offset: 0, total: 20, of: QueueView(states: ListView.failed.states, treesAsRows: true))
        var state = Fixtures.state()
        state.view = .failed
        #expect(state.rows(failedView).total == 20)
        let (all, _) = reduce(state, .character("1"), failedView)
        #expect(all.rows(failedView).pending)
        let (end, _) = reduce(all, .character("G"), failedView)
        // The rows of view 1 come: the selection is its last row.
        let rows = end.rows(window(offset: 99_976))
        #expect(end.selectionIndex(in: rows) == 99_999)
        #expect(end.wantedView(end.rows(window(offset: 0))).offset == 99_976)
        // Nothing is drawn from the old view's rows meanwhile.
        #expect(!Fixtures.render(all, failedView).text.contains(".bin"))
    }
}

/// Issue 24: `ferry` on a queue opens on what is active, not on the top of thousands of finished items.
@Suite struct OpenOnActiveTests {
    @Test func theSelectionGoesToTheFirstRunningRowOnce() {
        var state = Fixtures.state()
        var snapshot = QueueSnapshot(version: 1, items: [], totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
        snapshot.window = QueueWindow(offset: 0, total: 2_041, of: QueueView(treesAsRows: true))
        snapshot.window?.firstRunning = 511
        state.openOnActive(snapshot)
        #expect(state.selectedIndex == 511 && state.opened)
        // Once: a later window does not move it.
        snapshot.window?.firstRunning = 7
        state.openOnActive(snapshot)
        #expect(state.selectedIndex == 511)
        // Nothing runs: the top.
        var idle = Fixtures.state()
        snapshot.window?.firstRunning = nil
        idle.openOnActive(snapshot)
        #expect(idle.selectedIndex == 0 && idle.opened)
        // The whole queue in hand (an engine in this process): its first running row.
        var local = Fixtures.state()
        var queue = Fixtures.queue()
        queue.items.swapAt(0, 6)  // a finished item first
        local.openOnActive(queue)
        #expect(local.selectedIndex == 1)
    }
}
