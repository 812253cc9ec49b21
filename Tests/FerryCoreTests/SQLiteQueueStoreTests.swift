@_spi(Testing) import FerryEngine
import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct SQLiteQueueStoreTests {
    let dir: String
    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    func spec(_ n: Int) -> TransferSpec {
        TransferSpec(download: URL(string: "http://example.com/\(n).bin")!, directory: "/tmp",
                     headers: [HTTPHeader(name: "X-N", value: "\(n)")])
    }

    /// A walk's listing is kept with its files in one transaction, each directory once; a held or removed walk
    /// takes no listing (no file joins a batch paused or removed while a listing was under way); the SQLite store
    /// and the in-memory one say the same.
    @Test func aWalksListingsAreKeptWithTheirFilesAndAHeldWalkTakesNone() throws {
        defer { cleanup() }
        let root = URL(string: "http://example.com/pub/")!
        for store in [try SQLiteQueueStore(path: dir + "/walk.sqlite"), InMemoryQueueStore()] as [any QueueStore] {
            let job = TreeJob(root: root, directory: "/tmp/out", template: TransferSpec(download: root, directory: "/tmp/out"))
            let batch = try store.makeBatch(command: "ferry get -r", tree: root.absoluteString).id
            try store.startWalk(job, batch: batch)
            #expect(try store.walkDirectories(batch: batch, state: .pending).map(\.url) == [root])
            var listing = WalkListing(batch: batch, directory: root, state: .listed)
            listing.children = [WalkDirectory(url: root.appendingPathComponent("a/"), path: ["a"], ancestors: ["s1"])]
            listing.specs = [spec(1), spec(2)]
            listing.found = 3
            listing.present = 1
            listing.leftAloneLines = []
            let added = try #require(try store.recordListing(listing, reuse: true))
            #expect(added.count == 2 && added.allSatisfy { $0.item.batch == batch })
            var walk = try #require(try store.walks().first)
            #expect(walk.job == job)
            #expect((walk.progress.listed, walk.progress.pending, walk.progress.found, walk.progress.present) == (1, 1, 3, 1))
            let pending = try store.walkDirectories(batch: batch, state: .pending)
            #expect(pending.map(\.path) == [["a"]] && pending[0].ancestors == ["s1"])
            // A failed listing, retried: pending again.
            var failed = WalkListing(batch: batch, directory: pending[0].url, state: .failed)
            failed.trouble = ["cannot list a/"]
            _ = try store.recordListing(failed, reuse: true)
            walk = try #require(try store.walks().first)
            #expect((walk.progress.failed, walk.progress.pending, walk.progress.trouble) == (1, 0, ["cannot list a/"]))
            #expect(try store.retryWalk(batch: batch) == 1)
            #expect(try store.walkDirectories(batch: batch, state: .pending).count == 1)
            // Held: a listing under way is not kept, nor its files.
            try store.setWalkHeld(batch: batch, true)
            var late = WalkListing(batch: batch, directory: pending[0].url, state: .listed)
            late.specs = [spec(3)]
            #expect(try store.recordListing(late, reuse: true) == nil)
            #expect(try store.loadAll().count == 2)
            #expect(try store.walks().first?.progress.held == true)
            try store.removeWalk(batch: batch)
            #expect(try store.walks().isEmpty)
            try store.setWalkHeld(batch: batch, false)
            #expect(try store.recordListing(late, reuse: true) == nil, "a walk removed takes nothing")
        }
    }

    @Test func itemsSurviveReopening() throws {
        defer { cleanup() }
        let path = dir + "/q.sqlite"
        var ids: [TransferID] = []
        do {
            let store = try SQLiteQueueStore(path: path)
            let added = try store.add([spec(1), spec(2), spec(3)])
            ids = added.map(\.id)
            #expect(added.map(\.position) == [0, 1, 2])
            var second = added[1]
            second.state = .running
            second.fileName = "2.bin"
            second.validators = Validators(etag: "\"e\"", lastModified: "Mon", totalLength: 100)
            second.attempts = [Attempt(number: 1, startedAt: Date(timeIntervalSince1970: 5), fromOffset: 0, error: "lost")]
            second.lastError = "lost"
            second.retries = 1
            try store.save(second)
            try store.checkpoint(ids[1], bytesDone: 42)
            try store.saveRanks([(ids[2], -1)])
            try store.remove(ids[0])
        }
        let reopened = try SQLiteQueueStore(path: path)
        let items = try reopened.loadAll()
        #expect(items.map(\.id) == [ids[2], ids[1]])
        let second = try #require(items.last)
        #expect(second.spec == spec(2))
        #expect(second.state == .running && second.fileName == "2.bin" && second.bytesDone == 42)
        #expect(second.validators == Validators(etag: "\"e\"", lastModified: "Mon", totalLength: 100))
        #expect(second.attempts.first?.error == "lost" && second.retries == 1 && second.lastError == "lost")
        #expect(try reopened.history(ids[1]).map(\.state) == [.queued, .running])
        // New ids never reuse a removed one.
        #expect(try reopened.add([spec(4)]).first!.id.rawValue > ids[2].rawValue)
    }

    /// The attempts column is written by hand (AttemptsJSON): what JSONDecoder reads back is what was saved, every
    /// field and every character a server's words may hold, and JSONEncoder's own text of older rows still reads.
    @Test func attemptsWrittenByHandReadBackAsTheyWere() throws {
        defer { cleanup() }
        var every = Attempt(number: 7, startedAt: Date(timeIntervalSinceReferenceDate: 817_684_961.6071502),
                            endedAt: Date(timeIntervalSinceReferenceDate: 817_684_962.25), fromOffset: 1 << 40, status: 206,
                            error: "say \"no\" \\ then\n\r\t\u{0}\u{1F}\u{7F} é 中 🙂 </end>")
        every.restartedFrom = 5
        every.serverHad = 0
        every.hostKey = "ED25519 key SHA256:abc/+="
        let attempts = [Attempt(number: 1, startedAt: Date(timeIntervalSinceReferenceDate: 0), fromOffset: 0),
                        Attempt(number: 2, startedAt: Date(timeIntervalSinceReferenceDate: -1e-7), fromOffset: 3),
                        Attempt(number: 3, startedAt: Date(timeIntervalSinceReferenceDate: 1e17), fromOffset: 0), every]
        let text = AttemptsJSON.encode(attempts)
        #expect(try JSONDecoder().decode([Attempt].self, from: Data(text.utf8)) == attempts, "\(text)")
        #expect(AttemptsJSON.encode([]) == "[]")

        let path = dir + "/q.sqlite"
        let store = try SQLiteQueueStore(path: path)
        var item = try #require(try store.add([spec(1)]).first)
        item.attempts = attempts
        try store.save(item)
        #expect(try SQLiteQueueStore(path: path).load([item.id]).first?.attempts == attempts)
        // A row JSONEncoder wrote (every store before this one) reads as it did.
        item.attempts = [every]
        try store.save(item)
        let old = String(decoding: try JSONEncoder().encode([every]), as: UTF8.self)
        try store.pool.write { try $0.execute(sql: "UPDATE transfer SET attempts = ? WHERE id = ?", arguments: [old, item.id.rawValue]) }
        #expect(try SQLiteQueueStore(path: path).load([item.id]).first?.attempts == [every])
    }

    @Test func twoProcessesWorthOfStoresShareTheQueue() throws {
        defer { cleanup() }
        let path = dir + "/q.sqlite"
        let engine = try SQLiteQueueStore(path: path)
        let other = try SQLiteQueueStore(path: path)
        _ = try engine.add([spec(1)])
        let handed = try other.add([spec(2), spec(3)])
        #expect(try engine.loadAll().map(\.id) == [TransferID(1)] + handed.map(\.id))
        // WAL: a reader sees committed writes while the other connection is open.
        var item = try #require(try engine.loadAll().first)
        item.state = .completed
        try engine.save(item)
        #expect(try other.loadAll().first?.state == .completed)
    }

    @Test func theHistoryIsShort() throws {
        defer { cleanup() }
        let store = try SQLiteQueueStore(path: dir + "/q.sqlite")
        var item = try #require(try store.add([spec(1)]).first)
        for i in 0..<30 {
            item.state = i % 2 == 0 ? .running : .waiting
            try store.save(item)
        }
        #expect(try store.history(item.id).count == SQLiteQueueStore.eventsKept)
    }

    /// A store that has not written an item yet (a new process) reads its state and its number of events from the
    /// row before its first save: a change then logs one event and keeps the history short.
    @Test func aNewStoreReadsWhatTheRowHoldsBeforeItsFirstSave() throws {
        defer { cleanup() }
        let path = dir + "/q.sqlite"
        var item = try #require(try SQLiteQueueStore(path: path).add([spec(1)]).first)
        do {
            let first = try SQLiteQueueStore(path: path)
            for i in 0..<(SQLiteQueueStore.eventsKept + 5) {
                item.state = i % 2 == 0 ? .running : .waiting
                try first.save(item)
            }
        }
        let written = item.state
        let second = try SQLiteQueueStore(path: path)
        try second.save(item)  // the state the row holds: no event
        #expect(try second.history(item.id).count == SQLiteQueueStore.eventsKept)
        #expect(try second.history(item.id).last?.state == item.state)
        item.state = .completed
        try second.save(item)
        let history = try second.history(item.id)
        #expect(history.count == SQLiteQueueStore.eventsKept)
        #expect(history.last?.state == .completed)
        #expect(history.dropLast().last?.state == written)
    }

    /// An add appends after the largest rank and a move writes the ranks of one or two items: no change
    /// rewrites the whole order (one add rewrote every row's position before), and the store's order is the
    /// engine's.
    @Test func addsAndMovesWriteOnlyTheRanksTheyChange() async throws {
        defer { cleanup() }
        let store = try SQLiteQueueStore(path: dir + "/q.sqlite")
        let manager = try TransferManager(store: store, scope: .ownItems)
        let ids = try manager.addSaved((1...5).map(spec))
        let before = try store.loadAll().map(\.position)
        #expect(before == [0, 1, 2, 3, 4])
        manager.move(ids[4], .top)
        manager.move(ids[1], .down)
        manager.move(ids[0], .bottom)
        manager.move(ids[0], .bottom)  // already there: nothing to write
        let more = try manager.addSaved([spec(6)])
        manager.shutdown()
        let order = [ids[4], ids[2], ids[1], ids[3], ids[0], more[0]]
        #expect(manager.snapshot().items.map(\.id) == order)
        let stored = try store.loadAll()
        #expect(stored.map(\.id) == order)
        // #4 kept the rank it was added with, #2 and #3 swapped theirs; #5 went before the first, #1 after
        // the last (#4's 3, #5's 4 being gone), and #6 after #1.
        #expect(stored.map(\.position) == [-1, 1, 2, 3, 4, 5])
    }

    /// An add binds its values through SQLite's C API (RowWrite): every column reads back as given, text other
    /// than ASCII and absent values included, and the identity it wrote finds the item again.
    @Test func anAddWritesEveryColumnAsGiven() throws {
        defer { cleanup() }
        let path = dir + "/q.sqlite"
        var download = TransferSpec(download: URL(string: "http://h-te.example:8080/%C3%A9t%C3%A9/a.bin?x=1")!, directory: "/tmp/d\u{E9}p\u{F4}t",
                                    fileName: "\u{E9}t\u{E9} \u{1F600}.bin")
        download.rateLimit = 512_000
        let upload = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: "/src/r\u{E9}sum\u{E9} \u{FC}.pdf"), contentType: "x/y")),
                                  to: URL(string: "http://up.example/dav/")!)
        let plain = spec(7)
        let batch: Batch
        let added: [TransferID]
        do {
            let store = try SQLiteQueueStore(path: path)
            batch = try store.makeBatch(command: "ferry get \u{E9}", tree: nil)
            added = try store.add([download, upload, plain], batch: batch.id, reuse: true).map(\.item.id)
        }
        let reopened = try SQLiteQueueStore(path: path)
        let items = try reopened.loadAll()
        #expect(items.map(\.id) == added)
        #expect(items.map(\.spec) == [download, upload, plain])
        #expect(items.map(\.position) == [0, 1, 2])
        #expect(items.map(\.rateLimit) == [512_000, nil, nil])
        #expect(items.allSatisfy { $0.batch == batch.id && $0.state == .queued && $0.attempts.isEmpty })
        var hosts: [String] = []
        try reopened.forEachIndexRow { hosts.append($0.host) }
        #expect(hosts == [download.host, "up.example", "example.com"])
        var texts: [TransferID: (String, String?)] = [:]
        try reopened.forEachText(of: added) { texts[$0] = ($1, $2) }
        #expect(texts[added[0]]?.0 == download.url.absoluteString && texts[added[0]]?.1 == nil)
        #expect(texts[added[1]]?.1 == "r\u{E9}sum\u{E9} \u{FC}.pdf")
        #expect(try reopened.history(added[2]).map(\.message) == ["added"])
        // The identities it wrote: the same three asked for again are the same items.
        let again = try reopened.add([download, upload, plain], batch: nil, reuse: true)
        #expect(again.map(\.existing) == [true, true, true] && again.map(\.item.id) == added)
    }

    @Test func aMoveIsTheRanksOfTheItemsThatMoved() {
        defer { cleanup() }
        struct Item { var id: Int; var rank: Int }
        let queue = [Item(id: 1, rank: -3), Item(id: 2, rank: 0), Item(id: 3, rank: 4), Item(id: 4, rank: 9)]
        func run(_ move: QueueMove, _ ids: Set<Int>) -> (order: [Int], ranks: [Int], ranked: [[Int]], moved: Int) {
            var items = queue
            let (ranked, moved) = move.apply(to: &items, rank: \.rank) { ids.contains($0.id) }
            return (items.map(\.id), items.map(\.rank), ranked.map { [$0.id, $0.rank] }.sorted { $0[0] < $1[0] }, moved)
        }
        // One item: one step swaps two ranks; to an end, one rank past the end's.
        #expect(run(.up, [3]).ranked == [[2, 4], [3, 0]] && run(.up, [3]).order == [1, 3, 2, 4])
        #expect(run(.down, [1]).ranked == [[1, 0], [2, -3]])
        #expect(run(.top, [4]).ranked == [[4, -4]] && run(.top, [4]).order == [4, 1, 2, 3])
        #expect(run(.bottom, [2]).ranked == [[2, 10]])
        #expect(run(.up, [1]).moved == 0 && run(.bottom, [4]).ranked.isEmpty)
        // Marked items move together and keep their order; a block at the end stays.
        #expect(run(.up, [3, 4]).order == [1, 3, 4, 2])
        #expect(run(.down, [1, 2]).order == [3, 1, 2, 4])
        #expect(run(.up, [1, 3]).order == [1, 3, 2, 4] && run(.up, [1, 3]).moved == 1)
        #expect(run(.top, [2, 4]).order == [2, 4, 1, 3] && run(.top, [2, 4]).ranks == [-5, -4, -3, 4])
        #expect(run(.bottom, [1, 3]).order == [2, 4, 1, 3] && run(.bottom, [1, 3]).ranks == [0, 9, 10, 11])
        #expect(run(.top, [1, 2]).moved == 0)
        // The order by rank is the queue's order after every move.
        for move in QueueMove.allCases {
            for ids: Set<Int> in [[1], [2, 3], [1, 4], [2, 4], [1, 2, 3, 4]] {
                let ranks = run(move, ids).ranks
                #expect(ranks == ranks.sorted(), "\(move) \(ids)")
            }
        }
    }
}
