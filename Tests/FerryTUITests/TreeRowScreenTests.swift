import Foundation
import Testing
@testable import FerryCore
@testable import FerryModel
@testable import FerryTUI

/// A tree's row (the engine's sums of a `get -r` batch): drawn with its files, opened with Enter to its files
/// and left with Esc back to it; what acts on a row acts on its whole batch.
@Suite struct TreeRowScreenTests {
    static let batch: Int64 = 7

    /// An item, the tree's row (its first file's id, 4), and an item after, as the engine sends them.
    func queue(files: [TransferState: Int] = [.completed: 120, .running: 2, .queued: 1_878], state: TransferState = .running,
               walk: WalkProgress? = nil) -> QueueSnapshot {
        var tree = Fixtures.item(4, "a.bin", state, done: 300 * Fixtures.mib, total: 1_200 * Fixtures.mib, rate: 4 * Double(Fixtures.mib),
                                 eta: 225, url: "https://example.com/pub/a.bin")
        tree.batch = Self.batch
        tree.tree = TreeRow(batch: Self.batch, label: "https://example.com/pub/", files: files)
        tree.tree?.walk = walk
        let items = [Fixtures.item(1, "debian-12.iso", .completed, done: 10, total: 10), tree, Fixtures.item(2_005, "later.bin", .queued)]
        var snapshot = QueueSnapshot(version: 1, items: items, totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
        snapshot.window = QueueWindow(offset: 0, total: 3, of: QueueView(treesAsRows: true))
        return snapshot
    }

    func press(_ keys: [Key], _ start: AppState, _ snapshot: QueueSnapshot) -> (AppState, [Command]) {
        Fixtures.press(keys, from: start, on: snapshot)
    }

    @Test func aTreesRowShowsItsFilesAndItsSums() {
        let screen = Fixtures.render(Fixtures.state(width: 100), queue()).text
        let row = screen.split(separator: "\n").first { $0.contains("pub/") }.map(String.init) ?? ""
        #expect(row.contains("pub/ 120/2000 files"), "\(screen)")
        #expect(row.contains("25%"), "\(row)")
        #expect(row.contains("4.0 MiB/s"), "\(row)")
        #expect(row.contains("3m45s"), "\(row)")
        // Failed files are said on the row; a tree not running says its state, not a file's failure.
        let failed = Fixtures.render(Fixtures.state(width: 100), queue(files: [.completed: 3, .failed: 2], state: .failed)).text
        #expect(failed.contains("pub/ 3/5 files, 2 failed"), "\(failed)")
        // Its walk under way is said on the row.
        let walking = Fixtures.render(Fixtures.state(width: 140), queue(walk: WalkProgress(batch: Self.batch, listed: 3, pending: 40))).text
        #expect(walking.contains("pub/ 120/2000 files, listing 40 dirs"), "\(walking)")
    }

    /// The row's keys act on the walk too: every file done while the walk lists on, p holds it (and again lets it
    /// go on); every file done and a listing that failed, r lists it again.
    @Test func theRowsKeysActOnTheWalkWhenItsFilesAreDone() {
        let whole = Selection(batch: Self.batch)
        let listing = WalkProgress(batch: Self.batch, listed: 3, pending: 2)
        var (state, commands) = press([.down, .character("p")], Fixtures.state(), queue(files: [.completed: 5], state: .completed, walk: listing))
        #expect(commands == [.queueSaying(.pause(whole))])
        var held = listing
        held.held = true
        (state, commands) = press([.down, .character("p")], Fixtures.state(), queue(files: [.completed: 5], state: .completed, walk: held))
        #expect(commands == [.queueSaying(.resume(whole))])
        (state, commands) = press([.down, .character("c")], Fixtures.state(), queue(files: [.completed: 5], state: .completed, walk: listing))
        #expect(commands == [.queueSaying(.cancel(whole))])
        let failedListing = WalkProgress(batch: Self.batch, listed: 3, failed: 1)
        (state, commands) = press([.down, .character("r")], Fixtures.state(), queue(files: [.completed: 5], state: .completed, walk: failedListing))
        #expect(commands == [.queueSaying(.retry(whole))])
        // Ended whole, all files done: nothing to do.
        (state, commands) = press([.down, .character("p")], Fixtures.state(), queue(files: [.completed: 5], state: .completed,
                                                                                    walk: WalkProgress(batch: Self.batch, listed: 4)))
        #expect(commands.isEmpty && state.message?.text == "pub/ is done", "\(String(describing: state.message))")
    }

    @Test func enterOpensTheTreeToItsFilesAndEscComesBackToItsRow() {
        let snapshot = queue()
        let (open, commands) = press([.down, .enter], Fixtures.state(), snapshot)
        #expect(commands.isEmpty)
        #expect(open.screen == .list)
        #expect(open.openTree == AppState.OpenTree(batch: Self.batch, name: "pub/", row: TransferID(4)))
        // The engine is asked for the batch's files, each a row.
        #expect(open.queueView.batch == Self.batch)
        #expect(open.queueView.treesAsRows == nil)
        #expect(open.wantedView(open.rows(snapshot)).batch == Self.batch)
        // Until the batch's rows come, the tree's row is not taken for one of them.
        #expect(open.rows(snapshot).pending)
        let header = Fixtures.render(open, snapshot).text.split(separator: "\n").first.map(String.init) ?? ""
        #expect(header.contains("in pub/"), "\(header)")
        let (back, _) = press([.escape], open, snapshot)
        #expect(back.openTree == nil)
        #expect(back.selectedID == TransferID(4))
        #expect(back.queueView.treesAsRows == true)
        #expect(back.selectionIndex(in: back.rows(snapshot)) == 1)
    }

    @Test func theRowsKeysActOnTheWholeBatch() {
        let snapshot = queue()
        let whole = Selection(batch: Self.batch)
        var (state, commands) = press([.down, .character("p")], Fixtures.state(), snapshot)
        #expect(commands == [.queueSaying(.pause(whole))])
        #expect(state.message?.text == "pausing pub/")
        (state, commands) = press([.down, .character("p")], Fixtures.state(), queue(files: [.paused: 5, .completed: 1], state: .paused))
        #expect(commands == [.queueSaying(.resume(whole))])
        (state, commands) = press([.down, .character("c")], Fixtures.state(), snapshot)
        #expect(commands == [.queueSaying(.cancel(whole))])
        // Nothing failed: r says so; with failures it retries the batch (the engine takes the failed ones).
        (state, commands) = press([.down, .character("r")], Fixtures.state(), snapshot)
        #expect(commands.isEmpty && state.message?.text == "nothing of pub/ failed or was cancelled")
        (state, commands) = press([.down, .character("r")], Fixtures.state(), queue(files: [.failed: 1, .completed: 1], state: .failed))
        #expect(commands == [.queueSaying(.retry(whole))])
        // Remove asks, naming the tree and its files; D deletes their partial files too.
        (state, commands) = press([.down, .character("D")], Fixtures.state(), snapshot)
        #expect(state.confirmation?.question == "Remove the tree pub/ (2000 files) from the queue and delete their partial files? Files done stay. (y/n)")
        (state, commands) = press([.character("y")], state, snapshot)
        #expect(commands == [.queueSaying(.remove(whole, deletePart: true))])
        // The tree's own limit, shared by its files (its prompt shows the one it has); J moves the whole batch; a
        // mark is refused (Enter opens it to mark some).
        var limited = snapshot
        limited.items[1].tree?.rateLimit = 2 << 20
        (state, commands) = press([.down, .character("l")], Fixtures.state(), limited)
        #expect(state.prompt?.kind == .treeLimit(batch: Self.batch, name: "pub/") && state.prompt?.editor.text == "2M")
        (state, commands) = press([.down, .character("l"), .control("u")] + "500K".map { .character($0) } + [.enter], Fixtures.state(), limited)
        #expect(commands == [.queue(.setRateLimit(whole, 500 * 1024))])
        #expect(state.message?.text == "pub/ limited to 500.0 KiB/s, shared by its files")
        #expect(press([.down, .character("J")], Fixtures.state(), snapshot).1 == [.queue(.move(whole, .down))])
        (state, commands) = press([.down, .character("m")], Fixtures.state(), snapshot)
        #expect(commands.isEmpty && state.marks.isEmpty)
        // Inside the tree, the keys act on the file selected, as anywhere.
        var inside = Fixtures.state()
        inside.openTree = .init(batch: Self.batch, name: "pub/", row: TransferID(4))
        var files = QueueSnapshot(version: 2, items: [Fixtures.item(4, "a.bin", .running), Fixtures.item(5, "b.bin", .queued)],
                                  totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
        files.window = QueueWindow(offset: 0, total: 2, of: inside.queueView)
        #expect(press([.down, .character("p")], inside, files).1 == [.pause(TransferID(5))])
    }
}
