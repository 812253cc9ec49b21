import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import GRDB
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

/// A queue written by the previous schema (v3) opens in this one without loss; a range's progress can be
/// read while its write to disk is stuck.
@Suite struct StoreMigrationAndLockTests {
    let dir: String
    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-migrate-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    func spec(_ n: Int) -> TransferSpec {
        TransferSpec(download: URL(string: "http://example.com/\(n).bin")!, directory: dir,
                     headers: [HTTPHeader(name: "X-N", value: "\(n)")])
    }

    /// Bug: a verb released the engine lock and the lock's deinit closed its descriptor again. By then the
    /// number could be another's (libdispatch's epoll descriptor): `ferry retry` died with SIGILL after its
    /// answer, under load, about one run in thirty.
    @Test func theEngineLockClosesItsDescriptorOnce() throws {
        defer { cleanup() }
        var lock: EngineLock?
        if case let .acquired(acquired) = try EngineLock.acquire(StateDirectory(option: dir)) { lock = acquired }
        let number = try #require(lock?.descriptor)
        lock?.release()
        #expect(lock?.descriptor == -1, "released: nothing is left for a second release or deinit to close")
        // The number, free again, usually goes to the next file opened. Only then is it looked at: taken by
        // force (dup2) it could be another test's file, opened on another thread in between, and that test
        // then closed our /dev/null under us (one full run in 20 failed so).
        let other = open("/dev/null", O_RDONLY)
        lock?.release()
        lock = nil  // the last reference: deinit
        if other == number {
            #expect(fcntl(number, F_GETFD) != -1, "the other file's descriptor stays open")
        }
        close(other)
    }

    @Test func aVersion3QueueMigratesWithEveryItemItsOrderProgressLimitAndAttempts() throws {
        defer { cleanup() }
        let path = dir + "/queue.sqlite"
        // The database as ferry wrote it before batches: the v3 schema, rows as its store wrote them.
        let old = try DatabaseQueue(path: path)
        try SQLiteQueueStore.migrator.migrate(old, upTo: "v3: rate limits")
        let attempt = Attempt(number: 2, startedAt: Date(timeIntervalSince1970: 1_700_000_000),
                              endedAt: Date(timeIntervalSince1970: 1_700_000_010), fromOffset: 4096, status: 206, error: "reset")
        let segments = [SegmentState(start: 0, end: 500, done: 100), SegmentState(start: 500, end: 1000, done: 500)]
        let encoder = JSONEncoder()
        func json<T: Encodable>(_ value: T) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        var segmented = spec(2)
        segmented.segments = 2
        try old.write { db in
            // Positions out of id order: the user moved #3 to the top.
            let rows: [(Int64, Int, TransferSpec, String, String?, Int64, String?, Int64?, String)] = [
                (1, 1, spec(1), "paused", "1.bin", 4096, nil, 1 << 20, try json([attempt])),
                (2, 2, segmented, "queued", "2.bin", 600, try json(segments), nil, "[]"),
                (3, 0, spec(3), "failed", nil, 0, nil, nil, "[]"),
            ]
            for (id, position, spec, state, fileName, bytesDone, segments, rateLimit, attempts) in rows {
                try db.execute(sql: """
                    INSERT INTO transfer (id, position, direction, url, spec, state, fileName, etag, totalLength, bytesDone,
                        attempts, lastError, segments, rateLimit, createdAt, updatedAt)
                    VALUES (?, ?, 'download', ?, ?, ?, ?, '"e"', 1000, ?, ?, ?, ?, ?, 0, 0)
                    """, arguments: [id, position, spec.url.absoluteString, try json(spec), state, fileName, bytesDone, attempts,
                                     state == "failed" ? "HTTP 404" : nil, segments, rateLimit])
            }
        }
        try old.close()

        let store = try SQLiteQueueStore(path: path)
        let items = try store.loadAll()
        #expect(items.map(\.id.rawValue) == [3, 1, 2])
        #expect(items.map(\.state) == [.failed, .paused, .queued])
        let paused = items[1]
        #expect(paused.spec == spec(1))
        #expect(paused.fileName == "1.bin")
        #expect(paused.bytesDone == 4096)
        #expect(paused.validators == Validators(etag: "\"e\"", totalLength: 1000))
        #expect(paused.rateLimit == 1 << 20)
        #expect(paused.attempts == [attempt])
        #expect(items[2].segments == segments)
        #expect(items[2].unreadable == nil)
        #expect(items[0].lastError == "HTTP 404")
        #expect(items.allSatisfy { $0.batch == nil })
        // Their identities were filled in: asking for them again finds them.
        let again = try store.add([spec(1), segmented, spec(4)], batch: nil, reuse: true)
        #expect(again.map(\.existing) == [true, true, false])
        #expect(again.map(\.item.id.rawValue).prefix(2) == [1, 2])
    }

    /// The engine reads each range's flushed bytes under its own lock for every record it stores; that read
    /// took the range's lock, which is held across write(2). A write stuck on a slow or full disk (here: a
    /// FIFO nobody reads) stalled the engine and every command with it.
    @Test func aRangesProgressIsReadableWhileItsWriteIsStuck() async throws {
        defer { cleanup() }
        let name = "stuck.bin"
        let fifo = PartialFile.path(directory: dir, name: name)
        #expect(mkfifo(fifo, 0o600) == 0)
        let start = RangeRun.Start(spec: spec(9), fileName: name, rangeStart: 0, from: 0, end: nil, knownTotal: nil,
                                   validators: Validators(), bufferSize: 64 << 10)
        let run = RangeRun(start: start, names: NameClaims(), clock: SystemClock()) { _ in }
        let url = URL(string: "http://example.com/stuck.bin")!
        let task = URLSession(configuration: .keepingNothing).dataTask(with: url)
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Content-Length": "2097152"])!
        run.didReceive(response: response, task: task)

        // A MiB in one piece, half the body: written at once (the piece that ends a body waits for its finisher),
        // and stuck after the pipe's 64 KiB with the range's lock held.
        let writer = Thread { run.didReceive(data: Data(count: 1 << 20)) }
        writer.start()
        // Opened without waiting for a writer (a plain open blocks until one opens the FIFO: had the range's
        // descriptor gone, this test hung the suite, CI's whole run with it), then read blocking.
        let readFD = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        try #require(readFD >= 0)
        _ = fcntl(readFD, F_SETFL, fcntl(readFD, F_GETFL) & ~O_NONBLOCK)
        let reader = FileHandle(fileDescriptor: readFD, closeOnDealloc: true)
        // The writer is in write(2) once the pipe holds its first bytes.
        var available = Int32(0)
        let filled = Date().addingTimeInterval(30)
        while ioctl(readFD, UInt(FIONREAD), &available) == 0, available < 65536, Date() < filled { usleep(1000) }
        try #require(available >= 65536, "the range never filled the pipe: its write end is gone (\(available) bytes)")

        let answered = DispatchSemaphore(value: 0)
        let progress = Thread {
            _ = run.flushedBytes
            answered.signal()
        }
        progress.start()
        let readable = answered.wait(timeout: .now() + 10) == .success
        // Drain the pipe whatever happened, so the writer (and a stuck reader) can finish.
        var drained = 0
        while drained < 1 << 20 {
            let chunk = reader.readData(ofLength: 1 << 20 - drained)
            if chunk.isEmpty { break }
            drained += chunk.count
        }
        if !readable { answered.wait() }
        #expect(readable, "reading the range's progress waited for its write to disk")
        #expect(drained == 1 << 20)
    }
}
