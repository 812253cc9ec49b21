@_spi(Testing) import FerryEngine
import Foundation
import GRDB
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

/// What ferry does when the disk or the store fails it (issue 16's torture run found each of these).
@Suite struct StorageTroubleTests {
    let dir: String
    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-trouble-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    func spec(_ n: Int) -> TransferSpec {
        TransferSpec(download: URL(string: "http://example.com/\(n)/" + String(repeating: "x", count: 300))!, directory: "/tmp")
    }

    /// The store full: SQLite refuses to grow the file past max_page_count, as on a full disk (SQLITE_FULL).
    func fill(_ store: SQLiteQueueStore) throws {
        try store.pool.write { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 1
            try db.execute(sql: "PRAGMA max_page_count = \(pages)")
        }
    }

    func unfill(_ store: SQLiteQueueStore) throws {
        try store.pool.write { db in try db.execute(sql: "PRAGMA max_page_count = 1073741823") }
    }

    /// Bug: items that could not be saved (a full disk under the state directory) were run anyway, unsaved,
    /// and said nothing; a crash then lost them. Now nothing is queued and the error says why.
    @Test func aQueueThatCannotBeSavedQueuesNothingAndSaysWhy() throws {
        defer { cleanup() }
        let path = dir + "/queue.sqlite"
        let store = try SQLiteQueueStore(path: path)
        _ = try store.add([spec(0)])
        try fill(store)
        let manager = try TransferManager(store: store)
        let before = manager.snapshot().items.count
        #expect(throws: StateError.self) { try manager.addSaved((1...200).map(spec)) }
        do {
            _ = try manager.addSaved((1...200).map(spec))
        } catch {
            #expect(error.description == "cannot add to the queue: the disk holding \(dir) is full; nothing was queued")
        }
        #expect(manager.snapshot().items.count == before)
        manager.shutdown()
        // The queue as last committed is intact.
        #expect(try SQLiteQueueStore(path: path).loadAll().map(\.spec) == [spec(0)])
    }

    /// Bug: a failed store write (a full disk) dropped the changes for good. Now they wait and are written
    /// again once the store takes them, and the failure is reported meanwhile.
    @Test func changesThatCannotBeSavedAreKeptAndSavedLater() async throws {
        defer { cleanup() }
        let store = try SQLiteQueueStore(path: dir + "/queue.sqlite")
        var item = try store.add([spec(1)])[0]
        try fill(store)
        let writer = StoreWriter(store: store, interval: 0)
        item.lastError = String(repeating: "a long reason ", count: 20_000)
        item.state = .failed
        writer.enqueue([item], ranks: [:])
        writer.flush()
        #expect(writer.lastFailure?.contains("is full") == true)
        #expect(try store.loadAll()[0].state == .queued, "the store holds what was last committed")
        try unfill(store)
        let deadline = Date().addingTimeInterval(10)
        while writer.lastFailure != nil, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        writer.flush()
        #expect(writer.lastFailure == nil)
        #expect(try store.loadAll()[0].state == .failed)
    }

    /// The queue keeps URLs with credentials and users' headers: its files are its owner's only.
    @Test func theQueueFilesAreTheOwnersOnly() throws {
        defer { cleanup() }
        let store = try SQLiteQueueStore(path: dir + "/queue.sqlite")
        _ = try store.add([spec(1)])
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            try #require(stat(dir + "/queue.sqlite" + suffix, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600, "queue.sqlite\(suffix)")
        }
    }

    @Test func aDamagedStoreIsNamedWithWhatToDo() throws {
        defer { cleanup() }
        let path = dir + "/queue.sqlite"
        try Data(repeating: 0x41, count: 10_000).write(to: URL(fileURLWithPath: path))
        do {
            _ = try SQLiteQueueStore(path: path)
            Issue.record("a damaged store opened")
        } catch {
            #expect(error.description == "cannot open the queue: \(path) is damaged (not a queue database); move it aside to start a new queue: mv \(path) \(path).damaged")
        }
        #expect(FileManager.default.contents(atPath: path) == Data(repeating: 0x41, count: 10_000), "never changed")
    }

    /// Bug: a full disk said only "disk full"; now it says how much more the file needs and what is free.
    @Test func aFullDiskSaysWhatIsNeededAndWhatIsFree() throws {
        defer { cleanup() }
        let fd = open("/dev/full", O_WRONLY)
        try #require(fd >= 0)
        let file = PartialFile(path: "/dev/full", fd: fd, bufferSize: 64 << 10)
        file.expectedSize = 8 << 20
        do {
            try file.append(Data(count: 128 << 10))
            Issue.record("/dev/full took the bytes")
        } catch {
            #expect(error.message.hasPrefix("cannot write /dev/full: disk full: 8.0 MiB more needed, "), "\(error.message)")
            #expect(error.message.contains(" free there (what was downloaded is kept: free some space, then retry)"))
            #expect(error.cause.kind == .diskFull, "the kind is set where the write failed")
        }
    }

    /// Bug (torture run, kill -9 with 8 ranges): ranges were checkpointed once a second, each record claiming
    /// what was flushed a second before, so one kill cost up to 858 MiB of 1 GiB fetched again. The rule now:
    /// ranges at every 0.2 s sample, single streams (which resume from their file's size) once a second.
    @Test func rangesAreCheckpointedAtEverySample() {
        defer { cleanup() }
        #expect(TransferManager.checkpointDue(segmented: true, sinceLast: 0.2))
        #expect(!TransferManager.checkpointDue(segmented: false, sinceLast: 0.2))
        #expect(TransferManager.checkpointDue(segmented: false, sinceLast: 1.0))
    }
}
