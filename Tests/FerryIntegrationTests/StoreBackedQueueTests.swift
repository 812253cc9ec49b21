@_spi(Testing) import FerryEngine
import FerryCore
@testable import FerryEngine
import Foundation
import Synchronization
import Testing
import TestHTTPServer

/// The store is the queue: an engine keeps in memory the items that run and a few idle ones (here 3), and
/// everything else is a row. Windows, filters, counts, commands and a restart see the same queue as if every
/// item were loaded: real downloads from the in-process server, a real SQLite store.
@Suite struct StoreBackedQueueTests {
    let server: TestHTTPServer
    let dir: TempDir
    var storePath: String { dir.path + "/queue.sqlite" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    func engine(scope: TransferManager.Scope = .everything) throws -> TransferManager {
        var configuration = testConfiguration(maxConcurrent: 2)
        configuration.loadedLimit = 3
        return try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: storePath), scope: scope)
    }

    /// A first attempt's `.part` file is made, and its name known to the item, before any byte of its body: the
    /// rest of the answer reaches the engine with the first piece or the end (RangeRun). Removed meanwhile with
    /// its `.part`, the file goes and the name is free again.
    @Test func anItemRemovedBeforeItsBodyBeginsTakesItsPartFileAndFreesItsName() async throws {
        let body = Resource.randomBytes(count: 50_000, seed: 9)
        server.route("/slow/a.bin", .serve(Resource(body: body), ServeOptions(stallAfter: 0)))
        server.route("/fast/a.bin", .serve(Resource(body: body)))
        let manager = try engine()
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/slow/a.bin"), directory: dir.path))
        try await eventually("the .part file") { FileManager.default.fileExists(atPath: dir.path + "/a.bin.part") }
        try await eventually(within: 5, "the item's name") {
            manager.snapshot(QueueView(ids: [id.rawValue])).items.first?.fileName == "a.bin"
        }
        let removed = try manager.perform(.remove(Selection(ids: [id.rawValue]), deletePart: true))
        #expect(removed.outcome.changed == [id])
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/a.bin.part"))
        let again = manager.add(TransferSpec(download: server.url("/fast/a.bin"), directory: dir.path))
        try await finish(manager, [again])
        #expect(dir.contents("a.bin") == body)
    }

    /// Issue 41: an unfinished download taken off the queue with its `.part` file kept, then asked for again (a
    /// web UI's Restart: aria2's removeDownloadResult, then addUri of the same URI), goes on from that file under
    /// its name, asking If-Range; it made `a (1).bin` from byte 0 and left `a.bin.part` behind. In another engine
    /// too (the leftover is in the store), and only while the file is there.
    @Test(arguments: [false, true])
    func aTransferRemovedWithItsPartKeptGoesOnFromItWhenAskedAgain(restart: Bool) async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 10)
        let resource = Resource(body: body, etag: "\"r\"")
        server.route("/r/a.bin", [.serve(resource, ServeOptions(stallAfter: 256 << 10)), .serve(resource)])
        let spec = TransferSpec(download: server.url("/r/a.bin"), directory: dir.path)
        var manager = try engine()
        let id = manager.add(spec)
        try await eventually("the first 256 KiB on disk") { (try? FileManager.default.attributesOfItem(atPath: dir.path + "/a.bin.part")[.size] as? Int) == 256 << 10 }
        _ = try manager.perform(.cancel(Selection(ids: [id.rawValue])))
        try await eventually("cancelled") { manager.snapshot(of: id)?.state == .cancelled }
        #expect(try manager.perform(.remove(Selection(ids: [id.rawValue]), deletePart: false)).outcome.changed == [id])
        if restart {
            manager.shutdown()
            manager = try engine()
        }
        defer { manager.shutdown() }
        let again = try #require(try manager.perform(.add(QueueCommand.Addition(specs: [spec]))).added?.first)
        #expect(again.id != id && again.how == .added)
        try await finish(manager, [again.id])
        #expect(manager.snapshot(of: again.id)?.state == .completed)
        #expect(dir.files().filter { !$0.hasPrefix("queue.sqlite") } == ["a.bin"], "no a (1).bin, no .part left")
        #expect(dir.contents("a.bin") == body)
        let second = try #require(server.requests("/r/a.bin").last)
        #expect(second.header("Range") == "bytes=\(256 << 10)-")
        #expect(second.header("If-Range") == "\"r\"")
    }

    @Test func finishedItemsLeaveMemoryAndTheirRowsStillShow() async throws {
        let body = Resource.randomBytes(count: 20_000, seed: 3)
        for index in 1...40 {
            // The server names each file: a name the URL does not hold, known only once the item ran.
            server.route("/f/\(index)", .serve(Resource(body: body, contentDisposition: "attachment; filename=\"named-\(index).dat\"")))
        }
        let manager = try engine()
        defer { manager.shutdown() }
        let ids = manager.add((1...40).map { TransferSpec(download: server.url("/f/\($0)"), directory: dir.path) })
        try await finish(manager, Set(ids))
        #expect(manager.loadedCount <= 3)
        #expect(manager.counts == [.completed: 40])

        // A window in the middle of the queue: rows read from the store, as they finished.
        let window = manager.snapshot(QueueView(offset: 10, limit: 5))
        #expect(window.items.map(\.id) == Array(ids[10..<15]))
        #expect(window.items.allSatisfy { $0.state == .completed && $0.bytesDone == 20_000 })
        #expect(window.items.map(\.fileName) == (11...15).map { "named-\($0).dat" })
        #expect(window.window?.total == 40)

        // A filter matches the name the server gave, of an item no longer loaded.
        let filtered = manager.snapshot(QueueView(filter: "NAMED-27.", limit: 10))
        #expect(filtered.items.map(\.id) == [ids[26]])
        #expect(manager.snapshot(QueueView(states: [.completed], limit: 2)).window?.total == 40)
        // Typed a key at a time, each longer text is matched on the last one's matches: the same rows.
        for text in ["n", "na", "named-", "named-2"] { _ = manager.snapshot(QueueView(filter: text, limit: 50)) }
        #expect(manager.snapshot(QueueView(filter: "named-2", limit: 50)).items.map(\.id) == [ids[1]] + Array(ids[19..<29]))
        #expect(manager.snapshot(QueueView(filter: "named-27", limit: 50)).items.map(\.id) == [ids[26]])
        #expect(manager.snapshot(QueueView(filter: "f/3", limit: 50)).items.map(\.id) == [ids[2]] + Array(ids[29..<39]))
        for index in 1...40 { #expect(dir.contents("named-\(index).dat") == body) }
    }

    @Test func commandsReachItemsThatAreNotLoadedAndARestartSeesThem() async throws {
        let body = Resource.randomBytes(count: 10_000, seed: 5)
        for index in 1...30 { server.route("/g/\(index).bin", .serve(Resource(body: body))) }
        let store = try SQLiteQueueStore(path: storePath)
        _ = try store.add((1...30).map { TransferSpec(download: server.url("/g/\($0).bin"), directory: dir.path) })
        // An engine of its own items only: nothing of the stored queue runs or is loaded until a command asks.
        var manager = try engine(scope: .ownItems)
        #expect(manager.loadedCount == 0)
        let paused = try manager.perform(.pause(Selection(states: [.queued])))
        #expect(paused.outcome.changed.count == 30)
        #expect(manager.counts == [.paused: 30])
        #expect(manager.loadedCount <= 3)
        // Said again: every item is left as it is, named with its state.
        let again = try manager.perform(.pause(Selection(ids: [4])))
        #expect(again.outcome.changed.isEmpty && again.outcome.left.map(\.state) == [.paused])

        #expect(manager.move(TransferID(30), .top))
        #expect(manager.move(TransferID(2), .bottom))
        let resumed = try manager.perform(.resume(Selection(ids: [5, 30])))
        #expect(resumed.outcome.changed == [TransferID(5), TransferID(30)])
        try await finish(manager, [TransferID(5), TransferID(30)])
        #expect(dir.contents("5.bin") == body && dir.contents("30.bin") == body)
        let removed = try manager.perform(.remove(Selection(ids: [7, 8]), deletePart: true))
        #expect(removed.outcome.changed == [TransferID(7), TransferID(8)])
        let order = manager.snapshot(QueueView(limit: 3)).items.map(\.id.rawValue)
        let last = manager.snapshot(QueueView(offset: 27)).items.map(\.id.rawValue)
        manager.shutdown()

        // Another engine on the same store: the same order, states and counts.
        manager = try engine(scope: .ownItems)
        defer { manager.shutdown() }
        #expect(manager.counts == [.paused: 26, .completed: 2])
        #expect(order == [30, 1, 3])
        #expect(manager.snapshot(QueueView(limit: 3)).items.map(\.id.rawValue) == order)
        #expect(last == [2])
        #expect(manager.snapshot(QueueView(offset: 27)).items.map(\.id.rawValue) == last)
        #expect(manager.snapshot(QueueView(states: [.completed])).items.map(\.id.rawValue) == [30, 5])
        #expect(manager.snapshot(of: TransferID(4))?.state == .paused)
        #expect(throws: UsageError.self) { try manager.perform(.resume(Selection(ids: [7]))) }
    }

    /// Issue 24: a screen's marks of a whole view (M) are a Selection of states and a filter's text, less those
    /// unmarked; the engine resolves it on items loaded or not, and marked items move together. The stored
    /// queue (no engine) resolves it the same way.
    @Test func aMarkedViewAndMarkedItemsMovingTogether() throws {
        let store = try SQLiteQueueStore(path: storePath)
        _ = try store.add((1...20).map { TransferSpec(download: server.url("/\($0 % 2 == 0 ? "even" : "odd")/\($0).bin"), directory: dir.path) })
        var manager = try engine(scope: .ownItems)
        let marked = Selection(states: [.queued], filter: "/EVEN/", except: [4])
        let paused = try manager.perform(.pause(marked))
        #expect(paused.outcome.changed.map(\.rawValue) == [2, 6, 8, 10, 12, 14, 16, 18, 20])
        #expect(manager.counts == [.queued: 11, .paused: 9])
        // Marked items side by side move as a block and keep their order; one at the top stays.
        let up = try manager.perform(.move(Selection(ids: [1, 3, 4]), .up))
        #expect(up.outcome.changed.map(\.rawValue) == [3, 4])
        #expect(manager.snapshot(QueueView(limit: 5)).items.map(\.id.rawValue) == [1, 3, 4, 2, 5])
        let top = try manager.perform(.move(Selection(states: [.paused], filter: "even/1"), .top))
        #expect(top.outcome.changed.map(\.rawValue) == [10, 12, 14, 16, 18])
        #expect(manager.snapshot(QueueView(limit: 7)).items.map(\.id.rawValue) == [10, 12, 14, 16, 18, 1, 3])
        #expect(throws: UsageError.self) { try manager.perform(.move(Selection(ids: [99]), .down)) }
        let order = manager.snapshot(QueueView()).items.map(\.id.rawValue)
        manager.shutdown()

        // No engine: the stored queue, the same rules.
        let stored = try StoredQueueCommands.perform(.retry(Selection(all: true, filter: "odd/1", except: [11])), store: store)
        #expect(stored.outcome.changed.isEmpty && stored.outcome.left.map(\.id.rawValue) == [1, 13, 15, 17, 19])
        let resumed = try StoredQueueCommands.perform(.resume(Selection(states: [.paused], filter: "EVEN")), store: store)
        #expect(resumed.outcome.changed.map(\.rawValue) == [10, 12, 14, 16, 18, 2, 6, 8, 20])  // in queue order
        let bottom = try StoredQueueCommands.perform(.move(Selection(ids: [10, 12]), .bottom), store: store)
        #expect(bottom.outcome.changed.map(\.rawValue) == [10, 12])
        manager = try engine(scope: .ownItems)
        defer { manager.shutdown() }
        #expect(manager.snapshot(QueueView()).items.map(\.id.rawValue) == order.filter { $0 != 10 && $0 != 12 } + [10, 12])
    }

    /// A command on thousands of items takes the lock a thousand items at a time (TransferManager.events):
    /// every item across the turns is changed once, in order, and what was left is named.
    @Test func aCommandOnThousandsOfItems() throws {
        let store = try SQLiteQueueStore(path: storePath)
        _ = try store.add((1...2_500).map { TransferSpec(download: server.url("/t/\($0).bin"), directory: dir.path) })
        let manager = try engine(scope: .ownItems)
        defer { manager.shutdown() }
        let paused = try manager.perform(.pause(Selection(all: true)))
        #expect(paused.outcome.changed.map(\.rawValue) == Array(1...2_500) && paused.outcome.left.isEmpty)
        #expect(manager.counts == [.paused: 2_500] && manager.loadedCount <= 3)
        let again = try manager.perform(.pause(Selection(ids: [1, 1_001, 2_001])))
        #expect(again.outcome.changed.isEmpty && again.outcome.left.map(\.id.rawValue) == [1, 1_001, 2_001])
        let cancelled = try manager.perform(.cancel(Selection(states: [.paused], except: Array(1_000...1_002))))
        #expect(cancelled.outcome.changed.count == 2_497 && manager.counts == [.paused: 3, .cancelled: 2_497])
    }

    /// Issue 40: a command over a selection is one operation to the scheduler. With one transfer at a time, a
    /// pause of everything started the next queued item each time the turn before freed the slot (99 requests
    /// and 99 new `.part` files for 100,000 items): now no request is made and no file created by the pause,
    /// and a resume of everything starts the first item only.
    @Test func aPauseOfEverythingStartsNothing() async throws {
        let running = Resource.randomBytes(count: 4 << 20, seed: 40)
        server.route("/p/1.bin", .serve(Resource(body: running, etag: "\"p1\""), ServeOptions(stallAfter: 64 << 10)))
        var configuration = testConfiguration(maxConcurrent: 1)
        configuration.loadedLimit = 3
        let manager = try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: storePath))
        defer { manager.shutdown() }
        let specs = (1...10_000).map { TransferSpec(download: server.url("/p/\($0).bin"), directory: dir.path) }
        // The long calls on a thread of their own, not on the test pool's few threads (the whole suite shares them).
        _ = try await offPool { try manager.addSaved(specs, batch: nil, reuse: false) }
        try await eventually("the first item runs") {
            manager.snapshot(of: TransferID(1))?.state == .running && server.requests("/p/1.bin").count == 1 && dir.files().contains("1.bin.part")
        }
        let filesBefore = dir.files()
        let paused = try await offPool { try manager.perform(.pause(Selection(all: true))) }
        #expect(paused.outcome.changed.count == 10_000)
        #expect(manager.counts == [.paused: 10_000])
        try await eventually("the running item has stopped") { manager.core.withLock { $0.items[TransferID(1)]?.busy ?? false } == false }
        #expect(server.allRequests.count == 1, "the pause started \(server.allRequests.count - 1) items: \(server.allRequests.map(\.path).prefix(5))")
        #expect(dir.files() == filesBefore, "files made by the pause: \(Set(dir.files()).subtracting(filesBefore).prefix(5))")
        _ = try await offPool { try manager.perform(.resume(Selection(all: true))) }
        #expect(manager.counts[.paused, default: 0] == 0)
        try await eventually("the first item runs again") { server.requests("/p/1.bin").count == 2 }
        #expect(server.allRequests.count == 2, "one transfer at a time: \(server.allRequests.map(\.path))")
    }

    /// Issue 40: the engine's core stays in step (the index's counts per state and host, the slot book against
    /// the items holding slots, the loaded items against their entries, the settled prefix) through adds, runs,
    /// pauses, moves, a placement, removes and resumes of a queue past the 2,000 items where its asserts stop.
    @Test func theCoreStaysInStepPastTheSizeItsAssertsCheck() async throws {
        let count = 2_400
        for index in 1...count {
            server.route("/c/\(index).bin", .serve(Resource(body: Resource.randomBytes(count: 512, seed: UInt64(index)))))
        }
        var configuration = testConfiguration(maxConcurrent: 4)
        configuration.maxPerHost = 2
        configuration.loadedLimit = 50
        let manager = try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: storePath))
        defer { manager.shutdown() }
        // Two hosts (the same server by name and by address), alternating; added paused, a few run at a time.
        let specs = (1...count).map { index in
            TransferSpec(download: server.url("/c/\(index).bin", host: index % 2 == 0 ? "localhost" : "127.0.0.1"), directory: dir.path)
        }
        let added = try await offPool { try manager.perform(.add(QueueCommand.Addition(specs: specs, paused: true))) }
        let ids = try #require(added.added).map(\.id)
        #expect(ids.count == count && manager.counts == [.paused: count])
        #expect(manager.violations().isEmpty, "after the add: \(manager.violations())")
        // Some run (slots held on both hosts), then everything is paused.
        _ = try manager.perform(.resume(Selection(ids: ids.prefix(60).map(\.rawValue))))
        try await eventually("some are done") { manager.counts[.completed, default: 0] >= 20 }
        #expect(manager.violations().isEmpty, "while running: \(manager.violations())")
        _ = try await offPool { try manager.perform(.pause(Selection(all: true))) }
        #expect(manager.violations().isEmpty, "after the pause: \(manager.violations())")
        _ = try manager.perform(.move(Selection(ids: ids.suffix(300).map(\.rawValue)), .top))
        _ = try manager.perform(.move(Selection(ids: ids.prefix(100).map(\.rawValue)), .bottom))
        _ = try manager.perform(.move(Selection(ids: ids.dropFirst(1_000).prefix(10).map(\.rawValue)), .up))
        _ = try manager.perform(.place(ids[1_500], Placement(.start, 7, among: [.paused])))
        #expect(manager.violations().isEmpty, "after the moves: \(manager.violations())")
        let removed = ids.dropFirst(600).prefix(200)
        _ = try manager.perform(.remove(Selection(ids: removed.map(\.rawValue)), deletePart: true))
        #expect(manager.violations().isEmpty, "after the remove: \(manager.violations())")
        // Those moved to the top and some of the first ones, resumed and run to their end; the rest stay paused.
        let resumed = Array(ids.suffix(40)) + Array(ids.prefix(80))
        _ = try manager.perform(.resume(Selection(ids: resumed.map(\.rawValue))))
        try await finish(manager, Set(resumed))
        let done = manager.counts[.completed, default: 0]
        #expect(done >= resumed.count && manager.counts[.paused, default: 0] == count - removed.count - done, "\(manager.counts)")
        #expect(manager.violations().isEmpty, "at the end: \(manager.violations())")
    }

    /// Issue 40: a row left running (or waiting) by an engine that was killed is queued to every verb without
    /// an engine, as it is to `ferry list` and to the next engine (`ferry resume 1` said "#1 is running, left as
    /// it is" of an item nothing ran, and `--state running` chose it).
    @Test func aRowLeftRunningByAKilledEngineIsQueuedToEveryVerb() throws {
        let store = try SQLiteQueueStore(path: storePath)
        let added = try store.add((1...3).map { TransferSpec(download: server.url("/k/\($0).bin"), directory: dir.path) })
        for (record, state) in zip(added, [TransferState.running, .waiting, .paused]) {
            var item = record
            item.state = state
            try store.save(item)
        }
        var listed: [StoredTransfer] = []
        try QueueListing.items(of: QueueView(), in: StateDirectory(option: dir.path)) { listed += $0 }
        #expect(listed.map(\.state) == [.queued, .queued, .paused])
        let resumed = try StoredQueueCommands.perform(.resume(Selection(ids: [1, 2, 3])), store: store)
        #expect(resumed.outcome.changed.map(\.rawValue) == [3])
        #expect(resumed.outcome.left.map(\.state) == [.queued, .queued], "\(resumed.outcome.left)")
        #expect(try StoredQueueCommands.perform(.pause(Selection(states: [.running])), store: store).outcome.changed.isEmpty)
        let paused = try StoredQueueCommands.perform(.pause(Selection(states: [.queued])), store: store)
        #expect(paused.outcome.changed.map(\.rawValue) == [1, 2, 3])
    }

    /// Issue 24: a sorted view's window, on items loaded or not (their names, sizes and states as the store has
    /// them); sorting leaves the queue's order as it was.
    @Test func aSortedViewsWindow() async throws {
        for (index, size) in [(1, 3_000), (2, 1_000), (3, 2_000)] {
            server.route("/s/\(index)", .serve(Resource(body: Resource.randomBytes(count: size, seed: UInt64(index)),
                                                        contentDisposition: "attachment; filename=\"\(["b", "C", "a"][index - 1]).dat\"")))
        }
        let manager = try engine()
        defer { manager.shutdown() }
        let done = manager.add((1...3).map { TransferSpec(download: server.url("/s/\($0)"), directory: dir.path) })
        try await finish(manager, Set(done))
        // Paused from the start (added and then paused, the first could start and fail on its 404 in between).
        _ = try manager.addSaved((4...12).map { TransferSpec(download: server.url("/never/z\($0).bin"), directory: dir.path) },
                                 batch: nil, reuse: false, paused: true)
        #expect(manager.loadedCount <= 3)
        func ids(_ view: QueueView) -> [Int64] { manager.snapshot(view).items.map(\.id.rawValue) }
        #expect(ids(QueueView(limit: 3, sort: .name)) == [3, 1, 2])  // a, b, C: case ignored
        #expect(ids(QueueView(offset: 3, limit: 2, sort: .name)) == [4, 5])  // z4, z5 (numbers as numbers: z10 after z9)
        #expect(ids(QueueView(sort: .name)).suffix(3) == [10, 11, 12])
        #expect(ids(QueueView(limit: 2, sort: .added)) == [12, 11])
        #expect(ids(QueueView(sort: .state)).prefix(9) == ArraySlice(4...12) && ids(QueueView(sort: .state)).suffix(3) == [1, 2, 3])
        #expect(ids(QueueView(states: [.completed], sort: .progress)) == [1, 2, 3])
        #expect(manager.snapshot(QueueView(limit: 2, sort: .name)).window?.total == 12)
        #expect(ids(QueueView(filter: ".dat", sort: .name)) == [3, 1, 2])
        // Sorted rows are kept while nothing they depend on changes, and sorted again when something does.
        #expect(ids(QueueView(limit: 2, sort: .state)) == [4, 5])
        _ = try manager.perform(.cancel(Selection(ids: [4])))
        #expect(ids(QueueView(limit: 2, sort: .state)) == [5, 6])
        #expect(ids(QueueView(sort: .state)).suffix(4) == [4, 1, 2, 3])
        _ = try manager.perform(.remove(Selection(ids: [5]), deletePart: false))
        #expect(ids(QueueView(limit: 2, sort: .state)) == [6, 7] && manager.snapshot(QueueView(limit: 1, sort: .state)).window?.total == 11)
        #expect(ids(QueueView(limit: 4)) == [1, 2, 3, 4])
    }

    /// A remove reaches the store a moment later; an add at once must not find the removed item's row and
    /// take it for the same transfer (an entry with no row: never run, never listed).
    @Test func anItemRemovedThenAskedForAgainAtOnceIsANewItemThatRuns() async throws {
        let body = Resource.randomBytes(count: 10_000, seed: 9)
        server.route("/again.bin", .serve(Resource(body: body)))
        let manager = try engine()
        defer { manager.shutdown() }
        let spec = TransferSpec(download: server.url("/again.bin"), directory: dir.path)
        let first = manager.add(spec)
        try await finish(manager, [first])
        for _ in 0..<20 {
            let previous = manager.snapshot(QueueView()).items.map(\.id)
            #expect(previous.count == 1)
            for id in previous { #expect(manager.remove(id)) }
            let again = try manager.addSaved([spec], batch: nil, reuse: true)
            #expect(again.map(\.how) == [.added])
            try await finish(manager, Set(again.map(\.id)))
            #expect(manager.counts == [.completed: 1])
            #expect(manager.snapshot(QueueView()).items.map(\.state) == [.completed])
        }
    }

    /// An item this engine adds is loaded at once while the cache has room (its record is in hand), so the
    /// scheduler starts it without reading its row back under the engine's lock: that read per start made
    /// 1,000 small files a third slower. Past the cache's room, items are read when they start, the first of them
    /// with those after it (TransferManager.loadAhead, up to half the cache): one read for the eight, not one each.
    @Test func itemsAddedWhileTheCacheHasRoomStartWithoutReadingTheirRows() async throws {
        let body = Resource.randomBytes(count: 5_000, seed: 11)
        for index in 1...24 { server.route("/c/\(index).bin", .serve(Resource(body: body))) }
        let store = try LoadCountingStore(SQLiteQueueStore(path: storePath))
        var configuration = testConfiguration(maxConcurrent: 2)
        configuration.loadedLimit = 16
        let manager = try TransferManager(configuration: configuration, store: store)
        defer { manager.shutdown() }
        let added = try manager.addSaved((1...24).map { TransferSpec(download: server.url("/c/\($0).bin"), directory: dir.path) },
                                         batch: nil, reuse: true)
        let ids = added.map(\.id)
        try await finish(manager, Set(ids))
        #expect(manager.counts == [.completed: 24])
        let read = store.loaded
        #expect(read.isDisjoint(with: ids[..<16]), "items loaded at their add were read back: \(read.sorted())")
        #expect(read.isSuperset(of: ids[16...]), "items past the cache's room must be read when they start")
        #expect(store.reads == 1, "\(store.reads) reads")
        for index in 1...24 { #expect(dir.contents("\(index).bin") == body) }
    }

    /// Session 37: a finishing item holds no slot (its file waits for its group's sync), but while `finishingLimit`
    /// items are finishing nothing more starts: each holds its file open and stays loaded, and a disk slower than the
    /// network would pile them up. With a cache of 8 the limit is 2; the publish queue held, what finishes waits.
    @Test func nothingStartsWhileTheFinishingLimitIsReached() async throws {
        let body = Resource.randomBytes(count: 3_000, seed: 23)
        for index in 1...10 { server.route("/f/\(index).bin", .serve(Resource(body: body))) }
        var configuration = testConfiguration(maxConcurrent: 4)
        configuration.loadedLimit = 8
        let manager = try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: storePath))
        defer { manager.shutdown() }
        #expect(manager.core.withLock { $0.finishingLimit } == 2)
        let hold = DispatchSemaphore(value: 0)
        manager.publishQueue.async { hold.wait() }
        defer { hold.signal() }  // before the shutdown, which waits for what is finishing, should a check fail
        let ids = manager.add((1...10).map { TransferSpec(download: server.url("/f/\($0).bin"), directory: dir.path) })
        func moving(_ core: TransferManager.Core) -> Int { core.items.values.filter { $0.state == .running && !$0.finishing }.count }
        // Those started before the limit was reached finish too (a slot's item is never stopped for it), then none runs.
        try await eventually("the limit reached and nothing running") {
            manager.core.withLock { $0.finishing.count >= 2 && moving($0) == 0 }
        }
        let (finishing, queued) = manager.core.withLock { ($0.finishing.count, $0.queue.counts[.queued] ?? 0) }
        #expect(finishing < 10 && queued == 10 - finishing, "\(finishing) finishing, \(queued) queued")
        // A pass of the scheduler now (a command's) starts nothing either.
        _ = try manager.perform(.resume(Selection(all: true)))
        #expect(manager.core.withLock { moving($0) } == 0)
        hold.signal()
        try await finish(manager, Set(ids))
        #expect(manager.counts == [.completed: 10])
        for index in 1...10 { #expect(dir.contents("\(index).bin") == body) }
    }

    /// Issue 24, bug 7: the header's rate is the engine's bytes moved per second, and a file that finishes
    /// between two samples counts in it (the sum of the running items' rates said 0 B/s while small files came
    /// one after another). Every byte of 30 small files is counted once; a reload does not count its past again.
    @Test func everyByteMovedIsCountedOnceForTheHeadersRate() async throws {
        let body = Resource.randomBytes(count: 7_000, seed: 13)
        for index in 1...30 { server.route("/m/\(index).bin", .serve(Resource(body: body))) }
        let manager = try engine()
        defer { manager.shutdown() }
        let ids = manager.add((1...30).map { TransferSpec(download: server.url("/m/\($0).bin"), directory: dir.path) })
        try await finish(manager, Set(ids))
        #expect(manager.core.withLock { ($0.moved.down, $0.moved.up) } == (30 * 7_000, 0))
        // The finished items, loaded again from the store (the cache holds 3), bring no bytes of their past.
        _ = try manager.perform(.retry(Selection(ids: [ids[0].rawValue])))
        #expect(manager.core.withLock { $0.moved.down } == 30 * 7_000)
    }

    /// Issue 24: a window of the whole queue says where its first running item is, so a screen opens there and
    /// not on the top of a long run of finished files.
    @Test func aWindowOfTheWholeQueueSaysWhereTheFirstRunningItemIs() async throws {
        let small = Resource.randomBytes(count: 2_000, seed: 17)
        let slow = Resource.randomBytes(count: 4 << 20, seed: 19)
        for index in 1...3 { server.route("/o/\(index).bin", .serve(Resource(body: small))) }
        for index in 4...6 { server.route("/o/\(index).bin", .serve(Resource(body: slow), ServeOptions(bytesPerSecond: 64 << 10))) }
        let manager = try engine()
        defer { manager.shutdown() }
        let ids = manager.add((1...6).map { TransferSpec(download: server.url("/o/\($0).bin"), directory: dir.path) })
        try await finish(manager, Set(ids[..<3]))
        try await eventually("#4 runs") { manager.snapshot(of: ids[3])?.state == .running }
        #expect(manager.snapshot(QueueView(offset: 0, limit: 2)).window?.firstRunning == 3)
        _ = try manager.perform(.pause(Selection(all: true)))
        #expect(manager.snapshot(QueueView(offset: 0, limit: 2)).window?.firstRunning == nil)
    }

    /// What each item of the queue costs the engine in memory, loaded or not.
    @Test func anIndexEntryIsThirtyTwoBytes() {
        #expect(TransferManager.indexEntrySize == 32)
    }
}

/// A real SQLite store that notes which items were read back by id (QueueStore.load), and in how many reads.
final class LoadCountingStore: QueueStore {
    let base: SQLiteQueueStore
    private let read = Mutex<(ids: Set<TransferID>, reads: Int)>(([], 0))
    var loaded: Set<TransferID> { read.withLock { $0.ids } }
    var reads: Int { read.withLock { $0.reads } }

    init(_ base: SQLiteQueueStore) { self.base = base }

    func load(_ ids: [TransferID]) throws -> [StoredTransfer] {
        read.withLock {
            $0.ids.formUnion(ids)
            $0.reads += 1
        }
        return try base.load(ids)
    }

    func loadAll() throws -> [StoredTransfer] { try base.loadAll() }
    func forEachIndexRow(_ body: (QueueIndexRow) throws -> Void) throws { try base.forEachIndexRow(body) }
    func forEachText(after id: TransferID, _ body: (TransferID, String, String?) throws -> Void) throws { try base.forEachText(after: id, body) }
    func forEachText(of ids: [TransferID], _ body: (TransferID, String, String?) throws -> Void) throws { try base.forEachText(of: ids, body) }
    func loadAdded(after id: TransferID) throws -> [StoredTransfer] { try base.loadAdded(after: id) }
    func add(_ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition] { try base.add(specs, batch: batch, reuse: reuse) }
    func keepLeftovers(_ leftovers: [Leftover]) throws { try base.keepLeftovers(leftovers) }
    func saveSpec(_ id: TransferID, _ spec: TransferSpec) throws { try base.saveSpec(id, spec) }
    func unfinished(sameAs identities: [String]) throws -> [(id: TransferID, identity: String)] { try base.unfinished(sameAs: identities) }
    func makeBatch(command: String, tree: String?) throws -> Batch { try base.makeBatch(command: command, tree: tree) }
    func saveBatchLimit(_ batch: Int64, _ rate: Int64?) throws -> Bool { try base.saveBatchLimit(batch, rate) }
    func startWalk(_ job: TreeJob, batch: Int64) throws { try base.startWalk(job, batch: batch) }
    func walks() throws -> [StoredWalk] { try base.walks() }
    func walkDirectories(batch: Int64, state: WalkDirectory.State) throws -> [WalkDirectory] { try base.walkDirectories(batch: batch, state: state) }
    func recordListing(_ listing: WalkListing, reuse: Bool) throws -> [QueueAddition]? { try base.recordListing(listing, reuse: reuse) }
    func setWalkMethod(batch: Int64, _ method: String) throws { try base.setWalkMethod(batch: batch, method) }
    func setWalkHeld(batch: Int64, _ held: Bool) throws { try base.setWalkHeld(batch: batch, held) }
    func retryWalk(batch: Int64) throws -> Int { try base.retryWalk(batch: batch) }
    func removeWalk(batch: Int64) throws { try base.removeWalk(batch: batch) }
    func byteSums(batch: Int64, only ids: [TransferID]?) throws -> ByteSums { try base.byteSums(batch: batch, only: ids) }
    func batches() throws -> [Batch] { try base.batches() }
    func save(_ item: StoredTransfer) throws { try base.save(item) }
    func save(_ items: [StoredTransfer]) throws { try base.save(items) }
    func saveRanks(_ ranks: [(TransferID, Int)]) throws { try base.saveRanks(ranks) }
    func checkpoint(_ id: TransferID, bytesDone: Int64) throws { try base.checkpoint(id, bytesDone: bytesDone) }
    func recordResumable(_ id: TransferID, _ resumable: ResumableUpload?) throws {
        try base.recordResumable(id, resumable)
    }

    func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws {
        try base.recordClaim(id, fileName: fileName, validators: validators)
    }
    func remove(_ id: TransferID) throws { try base.remove(id) }
    func remove(_ ids: [TransferID]) throws { try base.remove(ids) }
}

/// Issue 24, bug 10: transfers at once and the global limits changed while an engine runs are kept in the
/// state directory (the next engine starts with them); a file that is not ferry's is named and left aside.
@Suite struct LiveSettingsTests {
    @Test func changesWhileRunningAreKeptAndABrokenFileIsNamed() throws {
        let dir = try TempDir()
        let path = dir.path + "/settings.json"
        var configuration = testConfiguration(maxConcurrent: 2)
        configuration.liveSettingsPath = path
        let manager = try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: dir.path + "/queue.sqlite"))
        defer { manager.shutdown() }
        _ = try manager.perform(.setGlobalLimits(download: 2 << 20, upload: nil))
        _ = try manager.perform(.setConcurrency(7))
        let kept = LiveSettings.load(path)
        #expect(kept.problem == nil && kept.settings.concurrency == 7)
        #expect(kept.settings.limits == LiveSettings.Limits(download: 2 << 20, upload: nil) && kept.settings.limitsChangedAt != nil)
        // A refused value changes nothing, kept or not.
        #expect(throws: UsageError.self) { try manager.perform(.setConcurrency(0)) }
        #expect(LiveSettings.load(path).settings.concurrency == 7)

        try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
        let broken = LiveSettings.load(path)
        #expect(broken.settings == LiveSettings() && broken.problem?.contains(path) == true)
    }
}
