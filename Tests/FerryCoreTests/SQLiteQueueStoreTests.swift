import Foundation
import Testing
@testable import FerryCore

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
            try store.saveOrder([ids[2], ids[0], ids[1]])
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
}
