import Foundation
import Testing
@testable import FerryModel
@testable import FerryStorage

/// The engine's download claims go to a journal beside the database before each `.part` file exists; a claim
/// must reach the rows after a crash, and the journal must not grow while the engine runs.
@Suite struct ClaimJournalTests {
    let dir: String
    var path: String { dir + "/q.sqlite" }
    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-claims-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    func spec(_ n: Int) -> TransferSpec {
        TransferSpec(download: URL(string: "http://example.com/\(n).bin")!, directory: "/tmp")
    }

    func journalSize(_ store: SQLiteQueueStore) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: store.claimJournalPath)[.size] as? Int) ?? -1
    }

    let validators = Validators(etag: "\"e1\"", lastModified: "Mon, 02 Jan 2006 15:04:05 GMT", totalLength: 65536)

    /// An engine's store that journals its claims, with `count` items queued.
    func journaling(_ count: Int) throws -> (store: SQLiteQueueStore, items: [StoredTransfer]) {
        let store = try SQLiteQueueStore(path: path)
        let items = try store.add((1...count).map(spec))
        try store.journalClaims()
        return (store, items)
    }

    /// An engine's store that journals, an item claimed "1.bin", and then the engine gone (kill -9: the batch
    /// that would have held the claim never came).
    func claimedThenKilled() throws -> TransferID {
        let engine = try SQLiteQueueStore(path: path)
        let id = try engine.add([spec(1)])[0].id
        try engine.journalClaims()
        #expect(engine.claimsAreJournaled)
        try engine.recordClaim(id, fileName: "1.bin", validators: validators)
        #expect(try engine.load([id]).first?.fileName == nil, "not in the rows yet")
        #expect(journalSize(engine) > 0)
        return id
    }

    @Test func aClaimNoBatchHeldReachesTheRowsWhenTheNextEngineStarts() throws {
        defer { cleanup() }
        let id = try claimedThenKilled()
        let next = try SQLiteQueueStore(path: path)
        #expect(!next.claimsAreJournaled)
        try next.journalClaims()
        let row = try #require(try next.load([id]).first)
        #expect(row.fileName == "1.bin")
        #expect(row.validators == validators)
        #expect(journalSize(next) == 0, "replayed, then emptied")
    }

    @Test func aCommittedBatchHoldingTheClaimEmptiesTheJournalAnOlderRecordDoesNot() throws {
        defer { cleanup() }
        var (store, items) = try journaling(1)
        var item = items.removeFirst()
        try store.recordClaim(item.id, fileName: "1.bin", validators: validators)
        // A record taken before the claim (a batch under way when it was made): the claim still waits.
        item.state = .running
        try store.save([item])
        #expect(journalSize(store) > 0)
        #expect(try store.load([item.id]).first?.fileName == nil)
        item.fileName = "1.bin"
        item.validators = validators
        try store.save([item])
        #expect(journalSize(store) == 0)
    }

    /// Review finding: a claim was confirmed only by a row equal to it, so the claim of a file that finished
    /// within one batch with validators the claim did not have (a body of no stated length: the size is known at
    /// the end), or that was published under another name, stayed in the journal for the engine's life.
    @Test(arguments: [("1.bin", Validators(etag: "\"e1\"", totalLength: 65536)), ("1 (1).bin", Validators())])
    func aRowWithTheItemsNameConfirmsItsClaimWhateverCameOfIt(name: String, committed: Validators) throws {
        defer { cleanup() }
        var (store, items) = try journaling(1)
        var item = items.removeFirst()
        try store.recordClaim(item.id, fileName: "1.bin", validators: Validators(etag: "\"e1\""))
        item.state = .completed
        item.fileName = name
        item.validators = committed
        try store.save([item])
        #expect(journalSize(store) == 0)
    }

    /// Review finding: a replay put a claim's validators back into a row written since (with newer ones), so a
    /// resume after the next crash sent a stale If-Range. A replay now only names rows that have no name.
    @Test func aReplayNeverTakesBackWhatARowWrittenSinceHolds() throws {
        defer { cleanup() }
        var (store, items) = try journaling(2)
        try store.recordClaim(items[0].id, fileName: "1.bin", validators: Validators(etag: "\"old\""))
        try store.recordClaim(items[1].id, fileName: "2.bin", validators: validators)
        // The first item's row is written with newer validators; the second's claim still waits, so the journal
        // keeps both lines when the engine is killed.
        items[0].state = .running
        items[0].fileName = "1.bin"
        items[0].validators = Validators(etag: "\"new\"")
        try store.save([items[0]])
        #expect(journalSize(store) > 0)
        let next = try SQLiteQueueStore(path: path)
        try next.journalClaims()
        let rows = try next.load([items[0].id, items[1].id])
        #expect(rows.first { $0.id == items[0].id }?.validators.etag == "\"new\"")
        #expect(rows.first { $0.id == items[1].id }?.fileName == "2.bin")
    }

    @Test func removedItemsLeaveTheJournal() throws {
        defer { cleanup() }
        let (store, items) = try journaling(1)
        let id = items[0].id
        try store.recordClaim(id, fileName: "1.bin", validators: validators)
        try store.remove([id])
        #expect(journalSize(store) == 0)
    }

    @Test func aLongJournalIsRewrittenWithWhatStillWaits() throws {
        defer { cleanup() }
        let (store, items) = try journaling(2)
        // The first item's claim waits for ever (its record never comes); the second's are confirmed one by one.
        try store.recordClaim(items[0].id, fileName: "1.bin", validators: validators)
        var second = items[1]
        for n in 0..<(ClaimJournal.rewriteAfter + 10) {
            second.fileName = "2-\(n).bin"
            try store.recordClaim(second.id, fileName: second.fileName!, validators: Validators())
            try store.save([second])
        }
        let lines = try String(contentsOfFile: store.claimJournalPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count < 20, "rewritten: \(lines.count) lines")
        #expect(lines.contains { $0.contains("1.bin") }, "the waiting claim is kept")
        // And it still reaches the rows after a crash.
        let next = try SQLiteQueueStore(path: path)
        try next.journalClaims()
        #expect(try next.load([items[0].id]).first?.fileName == "1.bin")
    }

    @Test func aLineCutShortByTheCrashIsSkipped() throws {
        defer { cleanup() }
        let id = try claimedThenKilled()
        let handle = try #require(FileHandle(forWritingAtPath: path + "-claims"))
        handle.seekToEndOfFile()
        handle.write(Data("{\"id\":1,\"fileNa".utf8))
        try handle.close()
        let next = try SQLiteQueueStore(path: path)
        try next.journalClaims()
        #expect(try next.load([id]).first?.fileName == "1.bin")
    }

    /// The journal's lines are written by hand, not by JSONEncoder: whatever a server may name a file or send
    /// as validators reads back the same (with JSONDecoder, as `replay` reads it), on one line.
    @Test(arguments: [
        "plain.bin", "quote\"and\\backslash.bin", "new\nline\r\ttab\u{1}\u{1f}.bin", "caf\u{e9} \u{1F600} \u{7f}.bin",
        "{\"id\":9}", "",
    ])
    func aLineReadsBackAsItWasWhateverTheNameHolds(name: String) throws {
        let entries = [
            ClaimJournal.Entry(TransferID(7), fileName: name, validators: Validators(etag: "W/\"\(name)\"",
                               lastModified: name, totalLength: Int64.max)),
            ClaimJournal.Entry(TransferID(-1), fileName: name, validators: Validators()),
        ]
        for entry in entries {
            let decoded = try JSONDecoder().decode(ClaimJournal.Entry.self, from: Data(entry.line.dropLast()))
            #expect(decoded == entry)
            #expect(entry.line.last == UInt8(ascii: "\n") && entry.line.dropLast().allSatisfy { $0 != UInt8(ascii: "\n") })
        }
    }
}
