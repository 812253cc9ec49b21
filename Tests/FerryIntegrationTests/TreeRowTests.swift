@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// A tree (the batch a `get -r` queues) is one row in a view that asks for it: its files' sums, asked of the
/// engine (counts from the queue's index, bytes from the loaded items and the store), in the place of its first
/// file; a view of its batch shows the files. Real downloads, a real SQLite store, an engine started twice.
@Suite struct TreeRowTests {
    let server: TestHTTPServer
    let dir: TempDir
    var storePath: String { dir.path + "/queue.sqlite" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    func engine() throws -> TransferManager {
        var configuration = testConfiguration(maxConcurrent: 2)
        // Few items kept loaded: most of a tree's figures come from the store.
        configuration.loadedLimit = 2
        return try TransferManager(configuration: configuration, store: SQLiteQueueStore(path: storePath))
    }

    func spec(_ path: String) -> TransferSpec { TransferSpec(download: server.url(path), directory: dir.path) }

    @Test func aTreeIsOneRowWithItsFilesSumsAndItsBatchShowsTheFiles() async throws {
        let sizes = [1_000, 20_000, 300_000, 4_000]
        for (index, size) in sizes.enumerated() {
            server.route("/pub/f\(index).bin", .serve(Resource(body: Resource.randomBytes(count: size, seed: UInt64(index)))))
        }
        server.route("/single.bin", .serve(Resource(body: Data(count: 10))))
        var manager = try engine()
        let first = try manager.perform(.add(.init(specs: [spec("/single.bin")], typed: "ferry get single", paused: true)))
        let tree = try manager.perform(.add(.init(specs: sizes.indices.map { spec("/pub/f\($0).bin") }, typed: "ferry get -r",
                                                   paused: true, tree: server.url("/pub/").absoluteString)))
        let batch = try #require(tree.batch)
        let files = try #require(tree.added).map(\.id)
        let last = try manager.perform(.add(.init(specs: [spec("/single.bin?2")], typed: "ferry get single 2", paused: true)))

        let grouped = QueueView(treesAsRows: true)
        var rows = manager.snapshot(grouped)
        #expect(rows.items.map(\.id) == [first.added![0].id, files[0], last.added![0].id])
        #expect(rows.window?.total == 3)
        let row = try #require(rows.items[1].tree)
        #expect(row.batch == batch)
        #expect(row.count == 4 && row.files[.paused] == 4)
        #expect(row.name == "pub/")
        #expect(rows.items[1].state == .paused)
        #expect(rows.items[0].tree == nil && rows.items[2].tree == nil)
        // No size known before an answer: no total (a part said as the whole would be a lie).
        #expect(rows.items[1].bytesExpected == nil && row.sizesUnknown == 4)
        // Without asking, and in the view of its batch: the files, each a row.
        #expect(manager.snapshot(QueueView()).items.count == 6)
        #expect(manager.snapshot(QueueView(batch: batch, treesAsRows: true)).items.map(\.id) == files)
        // A window past the tree's row, and the row of one of its files (`around`): the tree's.
        var window = QueueView(offset: 2, limit: 5, treesAsRows: true)
        window.around = files[2].rawValue
        #expect(manager.snapshot(window).items.map(\.id) == [last.added![0].id])
        #expect(manager.snapshot(window).window?.aroundRow == 1)

        // The whole batch resumed from its row's selection: every file done, the row's bytes their sum (from the
        // store: at most two items stay loaded).
        _ = try manager.perform(.resume(Selection(batch: batch)))
        await manager.waitUntilFinished(Set(files))
        rows = manager.snapshot(grouped)
        let done = rows.items[1]
        #expect(done.state == .completed)
        #expect(done.tree?.done == 4)
        #expect(done.bytesDone == Int64(sizes.reduce(0, +)))
        #expect(done.bytesExpected == Int64(sizes.reduce(0, +)))
        #expect(rows.items[0].state == .paused && rows.items[2].state == .paused)

        // The tree stays a tree for the next engine (the store keeps it).
        manager.shutdown()
        manager = try engine()
        defer { manager.shutdown() }
        rows = manager.snapshot(grouped)
        #expect(rows.items.map(\.id) == [first.added![0].id, files[0], last.added![0].id])
        #expect(rows.items[1].tree?.done == 4)
        #expect(rows.items[1].bytesDone == Int64(sizes.reduce(0, +)))
    }

    /// A listing that gave the files' sizes (nginx's JSON, WebDAV) gives the tree its total before any file runs.
    @Test func theListingsSizesAreTheTreesTotalBeforeAnyAnswer() async throws {
        let manager = try engine()
        defer { manager.shutdown() }
        let specs = [1_000, 2_500, 40].enumerated().map { index, size in
            var spec = spec("/listed/f\(index).bin")
            spec.mirror = .init(size: Int64(size), modified: nil)
            return spec
        }
        _ = try manager.perform(.add(.init(specs: specs, typed: "ferry get -r", paused: true, tree: server.url("/listed/").absoluteString)))
        let row = manager.snapshot(QueueView(treesAsRows: true)).items[0]
        #expect(row.bytesExpected == 3_540 && row.bytesDone == 0)
        #expect(row.tree?.sizesUnknown == 0)
    }

    /// While files run, the row says the bytes so far of every file (running ones live, finished ones stored,
    /// queued ones none) and the sum of the running ones' rates; a filter shows the tree when a file matches.
    @Test func aRunningTreesRowSumsLiveAndStoredFigures() async throws {
        let stalled = Resource(body: Resource.randomBytes(count: 200_000, seed: 1))
        server.route("/t/slow.bin", .serve(stalled, ServeOptions(stallAfter: 50_000)))
        server.route("/t/done.bin", .serve(Resource(body: Data(count: 7_000))))
        server.route("/t/later.bin", .serve(Resource(body: Data(count: 5))))
        let manager = try engine()
        defer { manager.shutdown() }
        let tree = try manager.perform(.add(.init(specs: [spec("/t/done.bin"), spec("/t/slow.bin")], typed: "ferry get -r",
                                                   tree: server.url("/t/").absoluteString)))
        let ids = try #require(tree.added).map(\.id)
        await manager.waitUntilFinished([ids[0]])
        try await eventually("the slow file's first bytes") {
            manager.snapshot(QueueView(treesAsRows: true)).items.first?.bytesDone == 57_000
        }
        let row = manager.snapshot(QueueView(treesAsRows: true)).items[0]
        #expect(row.state == .running)
        #expect(row.tree?.files[.running] == 1 && row.tree?.done == 1)
        #expect(row.bytesExpected == 207_000)
        #expect(manager.snapshot(QueueView(filter: "slow", treesAsRows: true)).items.map(\.tree?.batch) == [tree.batch])
        #expect(manager.snapshot(QueueView(filter: "nothing-like-it", treesAsRows: true)).items.isEmpty)
        _ = try manager.perform(.cancel(Selection(batch: tree.batch)))
        #expect(manager.snapshot(QueueView(treesAsRows: true)).items[0].state == .cancelled)
    }

    /// A walk in the engine: its row says how many directories are still to list; a pause of its batch holds it
    /// (the listing under way is dropped, not kept), a resume lists on, a retry lists again what failed, a remove
    /// forgets it.
    @Test func aWalksRowSaysItsDirectoriesAndItsBatchsCommandsSteerIt() async throws {
        func index(_ names: [String]) -> Behavior {
            .serve(Resource(body: Data(("<html><body>" + names.map { "<a href=\"\($0)\">\($0)</a>" }.joined() + "</body></html>").utf8),
                            contentType: "text/html"))
        }
        server.route("/w/", index(["a.bin", "slow/", "bad/"]))
        server.route("/w/a.bin", .serve(Resource(body: Data(count: 100))))
        // The first listing of slow/ never answers (a pause drops it); bad/ fails four times (once and its three
        // retries), then lists.
        server.route("/w/slow/", [.hang, index(["b.bin"])])
        server.route("/w/bad/", [.status(500), .status(500), .status(500), .status(500), index(["c.bin"])])
        server.route("/w/slow/b.bin", .serve(Resource(body: Data(count: 200))))
        server.route("/w/bad/c.bin", .serve(Resource(body: Data(count: 300))))
        let manager = try engine()
        let job = TreeJob(root: server.url("/w/"), directory: dir.path, template: TransferSpec(download: server.url("/w/"), directory: dir.path))
        let batch = try #require(try manager.perform(.walk(job)).batch)
        func walk() -> WalkProgress? { manager.walks.first { $0.batch == batch } }
        func row() -> TreeRow? { manager.snapshot(QueueView(treesAsRows: true)).items.first?.tree }
        try await eventually("slow/ is asked, bad/ failed, a.bin done: \(String(describing: walk()))") {
            walk()?.failed == 1 && walk()?.pending == 1 && server.requests("/w/slow/").count == 1
                && manager.snapshot(QueueView(batch: batch)).items.first?.state == .completed
        }
        #expect(row()?.walk?.rowText == "listing 1 dir")
        #expect(walk()?.trouble == ["cannot list \(server.url("/w/bad/").absoluteString): the listing answered 500"])

        _ = try manager.perform(.pause(Selection(batch: batch)))
        await manager.waitUntilWalksStop()
        #expect(walk()?.held == true)
        #expect(row()?.walk?.rowText == "walk held, 1 dir to list")
        _ = try manager.perform(.resume(Selection(batch: batch)))
        try await eventually("slow/ listed again and b.bin done") {
            walk()?.pending == 0 && manager.snapshot(QueueView(batch: batch)).items.filter { $0.state == .completed }.count == 2
        }
        #expect(server.requests("/w/slow/").count == 2)
        #expect(row()?.walk?.rowText == "1 dir not listed")

        // The engine started again resumes no walk that ended; a retry of the batch lists again what failed.
        manager.shutdown()
        let again = try engine()
        #expect(again.walks.isEmpty)
        #expect(try SQLiteQueueStore(path: storePath).walks().map(\.progress.ended) == [true])
        _ = try again.perform(.retry(Selection(batch: batch)))
        func walkAgain() -> WalkProgress? { again.walks.first { $0.batch == batch } }
        try await eventually("bad/ listed and c.bin done") {
            walkAgain()?.failed == 0 && walkAgain()?.ended == true
                && again.snapshot(QueueView(batch: batch)).items.filter { $0.state == .completed }.count == 3
        }
        #expect(walkAgain()?.summary == "3 files in 3 directories: 3 to download, 0 already here, 0 left alone")
        #expect(again.treeRow(batch: batch)?.tree?.walk?.rowText == nil)
        #expect(FileManager.default.contents(atPath: dir.path + "/bad/c.bin")?.count == 300)
        // A remove of the batch forgets the walk.
        _ = try again.perform(.remove(Selection(batch: batch), deletePart: false))
        #expect(try SQLiteQueueStore(path: storePath).walks().isEmpty)
    }

    /// `get -r --limit-rate` (the walk's template) is the tree's limit, not each file's; the tree's row says it, a
    /// whole-batch limit changes it (with an engine or without), and the next engine keeps it for the files.
    @Test func aTreesLimitIsTheTreesAndTheStoreKeepsIt() async throws {
        server.route("/l/", .serve(Resource(body: Data("<a href=\"a.bin\">a</a><a href=\"b.bin\">b</a>".utf8), contentType: "text/html")))
        for name in ["a.bin", "b.bin"] { server.route("/l/" + name, .serve(Resource(body: Data(count: 1_000)))) }
        var manager = try engine()
        var template = TransferSpec(download: server.url("/l/"), directory: dir.path)
        template.rateLimit = 300 << 10
        let batch = try #require(try manager.perform(.walk(TreeJob(root: server.url("/l/"), directory: dir.path, template: template))).batch)
        func row() -> TransferSnapshot? { manager.snapshot(QueueView(treesAsRows: true)).items.first { $0.batch == batch } }
        try await eventually("both files done") { row()?.tree?.done == 2 }
        #expect(row()?.tree?.rateLimit == 300 << 10 && row()?.rateLimit == 300 << 10)
        #expect(manager.snapshot(QueueView(batch: batch)).items.allSatisfy { $0.rateLimit == nil }, "not each file's")
        let files = manager.snapshot(QueueView(batch: batch)).items.map(\.id.rawValue)
        // A whole-batch limit (the row's `l`, the tree's GID) changes the tree's; one naming files changes theirs.
        _ = try manager.perform(.setRateLimit(Selection(batch: batch), 2 << 20))
        #expect(row()?.tree?.rateLimit == 2 << 20)
        _ = try manager.perform(.setRateLimit(Selection(ids: [files[0]]), 100 << 10))
        #expect(row()?.tree?.rateLimit == 2 << 20)
        #expect(manager.snapshot(of: TransferID(files[0]))?.rateLimit == 100 << 10)
        manager.shutdown()
        // Without an engine, then the next engine: the store's.
        let stored = try StoredQueueCommands.perform(.setRateLimit(Selection(batch: batch), 700 << 10), store: SQLiteQueueStore(path: storePath))
        #expect(stored.outcome.changed.count == 2)
        #expect(try SQLiteQueueStore(path: storePath).batches().first { $0.id == batch }?.rateLimit == 700 << 10)
        manager = try engine()
        defer { manager.shutdown() }
        #expect(row()?.tree?.rateLimit == 700 << 10)
        // Every file done: the transport is not given a limit nothing will answer to (it would work out shares at
        // every transfer's start and end for nothing).
        #expect(manager.limits.current.batches[batch] == nil)
        _ = try manager.perform(.setRateLimit(Selection(batch: batch), nil))
        #expect(row()?.tree?.rateLimit == nil && manager.limits.current.batches[batch] == nil)
        // A batch the queue does not have is refused, and nothing is kept for it (a later batch of that number).
        #expect(throws: UsageError.self) { try manager.perform(.setRateLimit(Selection(batch: 999), 1 << 20)) }
        #expect(manager.limits.current.batches[999] == nil)
        // An add sent in parts (ControlClient.add): the first part makes the rate the tree's, the next ones too.
        func limited(_ name: String) -> TransferSpec {
            var spec = TransferSpec(download: server.url("/parts/" + name), directory: dir.path)
            spec.rateLimit = 64 << 10
            return spec
        }
        let first = try manager.perform(.add(.init(specs: [limited("a"), limited("b")], paused: true, tree: server.url("/parts/").absoluteString)))
        let parts = try #require(first.batch)
        let next = try manager.perform(.add(.init(specs: [limited("c"), limited("d")], batch: parts, paused: true)))
        #expect(manager.treeRow(batch: parts)?.rateLimit == 64 << 10)
        let added = (first.added ?? []) + (next.added ?? [])
        #expect(added.count == 4 && added.allSatisfy { manager.snapshot(of: $0.id)?.rateLimit == nil }, "the tree's, in every part")
        // A tree removed takes its limit with it.
        _ = try manager.perform(.setRateLimit(Selection(batch: batch), 1 << 20))
        _ = try manager.perform(.remove(Selection(batch: batch), deletePart: false))
        #expect(manager.limits.current.batches[batch] == nil)
        #expect(try SQLiteQueueStore(path: storePath).batches().first { $0.id == batch }?.rateLimit == nil)
    }
}
