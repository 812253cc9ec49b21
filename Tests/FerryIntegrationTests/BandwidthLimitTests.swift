@_spi(Testing) import FerryEngine
import FerryCore
import FerryTransport
import Foundation
import Testing
import TestHTTPServer

/// Bandwidth limits at the wire, measured by the server: what it wrote (each write completes at the pace
/// the client reads) and what it read, second by second.
@Suite struct BandwidthLimitTests {
    let server: TestHTTPServer
    let dir: TempDir
    static let mib = Double(1 << 20)

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// Large enough to outlast the measurement after the socket buffers' first fill (several MiB on loopback).
    func routeLarge(_ path: String, seed: UInt64) {
        server.route(path, .serve(Resource(body: Resource.randomBytes(count: 32 << 20, seed: seed))))
    }

    func waitForTraffic(_ path: String, sent: Bool = true) async throws -> Date {
        try await eventually("traffic on \(path)") {
            !(sent ? server.bytesSent(path) : server.bytesReceived(path)).isEmpty
        }
        return (sent ? server.bytesSent(path) : server.bytesReceived(path)).start!
    }

    /// Two downloads under a global limit of 1 MiB/s.
    func twoUnderAGlobalLimit(_ first: String, _ second: String) throws -> (TransferManager, [TransferID]) {
        var configuration = testConfiguration()
        configuration.downloadLimit = 1 << 20
        let manager = try TransferManager(configuration: configuration)
        let ids = manager.add([TransferSpec(download: server.url(first), directory: dir.path),
                               TransferSpec(download: server.url(second), directory: dir.path)])
        return (manager, ids)
    }

    /// Bytes per second each item took in over about the next `seconds` (what the engine received, not the
    /// server's log, which moves in 256 KiB writes and behind its send buffers: too coarse to split 1 MiB/s in
    /// two). Divided by the time that really passed between the two readings: under the whole suite's load the
    /// sleep overran and the bytes of 6 s were counted as 5 s's (1.3 MiB/s under a 1 MiB/s limit).
    ///
    /// It blocks: call it on a thread of its own (`measured`), never on the test pool. The suite's synchronous
    /// tests (raw sockets, a 64 MiB body through the proxy) hold the pool's two threads for seconds, and a
    /// measurement the pool resumed late began after the items had ended (it read 0 MiB/s for both).
    static func intake(_ manager: TransferManager, _ ids: [TransferID], over seconds: Double) -> [Double] {
        let (before, from) = (ids.map { manager.snapshot(of: $0)?.bytesDone ?? 0 }, Date())
        usleep(UInt32(seconds * 1e6))
        let (after, to) = (ids.map { manager.snapshot(of: $0)?.bytesDone ?? 0 }, Date())
        let elapsed = to.timeIntervalSince(from)
        return zip(before, after).map { Double($1 - $0) / elapsed }
    }

    /// `body` on a thread of its own, so that its timing is the wall clock's, whatever holds the test pool.
    func measured<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T { try await offPool(body) }

    @Test func anItemsDownloadLimitHoldsAtTheServer() async throws {
        routeLarge("/limited.bin", seed: 81)
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        var spec = TransferSpec(download: server.url("/limited.bin"), directory: dir.path)
        spec.rateLimit = 1 << 20
        manager.add(spec)
        let start = try await waitForTraffic("/limited.bin")
        try await Task.sleep(for: .seconds(10.2))
        var rate = server.bytesSent("/limited.bin").rate(from: 2, to: 10, after: start)
        if rate <= 0.8 * Self.mib {
            // A window in which the whole suite's load left the engine too little CPU to take its limit in
            // (0.72 MiB/s in one fresh clone's CI) says nothing of the limit: one more.
            try await measured { _ = usleep(8_000_000) }
            rate = max(rate, server.bytesSent("/limited.bin").rate(from: 10, to: 18, after: start))
        }
        print("BandwidthLimitTests: download limited to 1 MiB/s: \(rate / Self.mib) MiB/s over seconds 2-10")
        #expect(rate > 0.8 * Self.mib && rate < 1.25 * Self.mib, "\(rate / Self.mib) MiB/s")
    }

    @Test func anItemsUploadLimitHoldsAtTheServer() async throws {
        let file = dir.path + "/up.bin"
        try Resource.randomBytes(count: 16 << 20, seed: 82).write(to: URL(fileURLWithPath: file))
        server.route("/up", .status(201))
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        var spec = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: file), contentType: "application/octet-stream")),
                                to: server.url("/up"))
        spec.rateLimit = 1 << 20
        manager.add(spec)
        let start = try await waitForTraffic("/up", sent: false)
        try await Task.sleep(for: .seconds(9.2))
        var rate = server.bytesReceived("/up").rate(from: 1, to: 9, after: start)
        if rate <= 0.8 * Self.mib {
            // A window the whole suite's load starved (as for downloads): one more, before the 16 MiB run out.
            try await measured { _ = usleep(6_000_000) }
            rate = max(rate, server.bytesReceived("/up").rate(from: 9, to: 15, after: start))
        }
        print("BandwidthLimitTests: upload limited to 1 MiB/s: \(rate / Self.mib) MiB/s over seconds 1-9")
        #expect(rate > 0.8 * Self.mib && rate < 1.25 * Self.mib, "\(rate / Self.mib) MiB/s")
    }

    @Test func aGlobalLimitIsSharedFairlyBetweenTwoItems() async throws {
        routeLarge("/a.bin", seed: 83)
        routeLarge("/b.bin", seed: 84)
        let (manager, ids) = try twoUnderAGlobalLimit("/a.bin", "/b.bin")
        defer { manager.shutdown() }
        let start = min(try await waitForTraffic("/a.bin"), try await waitForTraffic("/b.bin"))
        let shares = try await measured {
            usleep(UInt32(max(0, 3 - Date().timeIntervalSince(start)) * 1e6))
            // One more window when the first was starved (as below): how the limit is shared, not the machine.
            let first = Self.intake(manager, ids, over: 7.2)
            guard first[0] + first[1] <= 0.8 * Self.mib else { return first }
            let again = Self.intake(manager, ids, over: 7.2)
            return again[0] + again[1] > first[0] + first[1] ? again : first
        }
        let a = shares[0], b = shares[1]
        let total = server.bytesSent("/a.bin").rate(from: 3, to: 10, after: start) + server.bytesSent("/b.bin").rate(from: 3, to: 10, after: start)
        print("BandwidthLimitTests: global 1 MiB/s: server \(total / Self.mib) MiB/s; a \(a / Self.mib), b \(b / Self.mib) MiB/s taken in")
        // The server's writes complete in 256 KiB slices into send buffers it grows as it likes: from it, only
        // that the two together never got more than the limit.
        #expect(total < 1.25 * Self.mib, "\(total / Self.mib) MiB/s in all at the server")
        #expect(a + b > 0.8 * Self.mib && a + b < 1.25 * Self.mib, "\((a + b) / Self.mib) MiB/s in all")
        #expect(a > 0.4 * Self.mib && b > 0.4 * Self.mib && a < 0.6 * Self.mib && b < 0.6 * Self.mib,
                "a \(a / Self.mib), b \(b / Self.mib) MiB/s")
    }

    /// Transfers that come and go share the engine's rate as long ones do: 48 files of 64 KiB (3 MiB) under a
    /// global 1 MiB/s take at least 2.4 s (2.75 s less the shared bucket's first burst, 256 KiB), not the 0.1 s
    /// they took when each new transfer started with a burst of its own that held its whole file.
    @Test func aGlobalLimitHoldsForFilesThatComeAndGo() async throws {
        let body = Resource.randomBytes(count: 64 << 10, seed: 89)
        for i in 0..<48 { server.route("/s\(i).bin", .serve(Resource(body: body))) }
        var configuration = testConfiguration(maxConcurrent: 4)
        configuration.downloadLimit = 1 << 20
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let started = Date()
        let ids = manager.add((0..<48).map { TransferSpec(download: server.url("/s\($0).bin"), directory: dir.path) })
        await expectOneMiBPerSecond(manager, ids, since: started, files: "s", body: body, "48 x 64 KiB under a global 1 MiB/s")
    }

    /// Waits for `ids`, 48 files of 64 KiB (`PREFIX0.bin`...) queued at `started` under a limit of 1 MiB/s: they
    /// took at least 2.4 s (3 MiB, less a first burst of a quarter second's worth), and each is whole.
    func expectOneMiBPerSecond(_ manager: TransferManager, _ ids: [TransferID], since started: Date, files prefix: String, body: Data,
                               _ what: String) async {
        await manager.waitUntilFinished(Set(ids))
        let elapsed = Date().timeIntervalSince(started)
        print("BandwidthLimitTests: \(what): \(elapsed) s")
        #expect(elapsed > 2.4, "\(elapsed) s for 3 MiB at 1 MiB/s")
        for i in 0..<48 { #expect(dir.contents("\(prefix)\(i).bin") == body, "\(prefix)\(i).bin") }
    }

    /// A tree's limit is the tree's, shared by its files as they come and go: 48 files of 64 KiB (3 MiB), 4 at once,
    /// queued as a tree with `put -r`'s and `get -r`'s `--limit-rate 1M` (every file the same limit), take at least
    /// 2.4 s (2.75 s less the tree's first burst, 256 KiB), not the 0.1 s they took when each file had the limit as
    /// its own and a burst of its own that held its whole file (a tree of 128 KiB files under 20M came at 128 MiB/s).
    @Test func aTreesLimitIsSharedByItsFilesAsTheyComeAndGo() async throws {
        let body = Resource.randomBytes(count: 64 << 10, seed: 92)
        for i in 0..<48 { server.route("/t\(i).bin", .serve(Resource(body: body))) }
        let manager = try TransferManager(configuration: testConfiguration(maxConcurrent: 4))
        defer { manager.shutdown() }
        let specs = (0..<48).map {
            var spec = TransferSpec(download: server.url("/t\($0).bin"), directory: dir.path)
            spec.rateLimit = 1 << 20
            return spec
        }
        let started = Date()
        let result = try manager.perform(.add(.init(specs: specs, tree: server.url("/").absoluteString)))
        let batch = try #require(result.batch)
        let ids = try #require(result.added).map(\.id)
        #expect(manager.treeRow(batch: batch)?.rateLimit == 1 << 20, "the tree's limit")
        #expect(ids.allSatisfy { manager.snapshot(of: $0)?.rateLimit == nil }, "not each file's")
        await expectOneMiBPerSecond(manager, ids, since: started, files: "t", body: body, "a tree of 48 x 64 KiB under its own 1 MiB/s")
    }

    /// A running file found again by another tree's add (a re-run of `get -r` with another `--limit-rate`) answers
    /// to its new tree's limit from then on, not to the batch its transfer started in.
    @Test func aRunningFileMovedToAnotherTreeAnswersToItsLimit() async throws {
        server.route("/moving.bin", .serve(Resource(body: Resource.randomBytes(count: 400_000, seed: 93)), ServeOptions(stallAfter: 100_000)))
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let spec = TransferSpec(download: server.url("/moving.bin"), directory: dir.path)
        let first = try manager.perform(.add(.init(specs: [spec], tree: server.url("/").absoluteString)))
        let id = try #require(first.added?.first?.id)
        try await eventually("it runs") { manager.snapshot(of: id)?.state == .running }
        var again = spec
        again.rateLimit = 300 << 10
        let second = try manager.perform(.add(.init(specs: [again], tree: server.url("/").absoluteString)))
        let batch = try #require(second.batch)
        #expect(second.added?.first?.id == id, "the same item, found again")
        #expect(manager.snapshot(of: id)?.batch == batch)
        #expect(manager.limits.current.batches[batch] == 300 << 10)
        #expect(manager.limits.current.movedItems[id.rawValue] == batch, "its running transfer answers to the new tree's limit")
        #expect(LimitMembership(limits: manager.limits, item: id.rawValue, batch: first.batch, direction: .download).limited)
    }

    /// An item's own limit holds across the transfers of one item that follow one another: a resumable upload
    /// of 3 MiB in 256 KiB chunks under 1 MiB/s takes at least 2.4 s (2.75 s less the item's first burst), not
    /// the moment it took when each chunk's transfer started with a burst of its own (its whole chunk).
    @Test func anItemsLimitHoldsAcrossItsChunks() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 3 << 20, seed: 90)
        let file = dir.path + "/chunks.bin"
        try body.write(to: URL(fileURLWithPath: file))
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: 256 << 10, grows: false)
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        var spec = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: file), contentType: "application/octet-stream"),
                                                   resumable: .tus), to: server.url("/files"))
        spec.rateLimit = 1 << 20
        let started = Date()
        let id = manager.add(spec)
        await manager.waitUntilFinished([id])
        let elapsed = Date().timeIntervalSince(started)
        print("BandwidthLimitTests: 3 MiB in 256 KiB chunks under 1 MiB/s: \(elapsed) s")
        #expect(manager.snapshot(of: id)?.state == .completed)
        #expect(server.stored("/files/1")?.data == body)
        #expect(server.requests.filter { $0.method == "PATCH" }.count == 12)
        #expect(elapsed > 2.4, "\(elapsed) s for 3 MiB at 1 MiB/s")
    }

    @Test func whatASlowItemCannotUseGoesToTheOther() async throws {
        // The server sends /slow.bin at 256 KiB/s: an equal split would leave a quarter of the limit unused.
        // Both outlive the measurement however late it begins: in a fresh clone's CI the test pool resumed this
        // test over 30 s late, and an 8 MiB slow item (32 s at 256 KiB/s) had ended before its first window
        // (it read as taking in nothing). 24 MiB lasts 96 s; the fast item's 64 MiB over 60 s at 1 MiB/s.
        server.route("/slow.bin", .serve(Resource(body: Resource.randomBytes(count: 24 << 20, seed: 87)),
                                         ServeOptions(bytesPerSecond: 256 << 10)))
        server.route("/fast.bin", .serve(Resource(body: Resource.randomBytes(count: 64 << 20, seed: 88))))
        let (manager, ids) = try twoUnderAGlobalLimit("/slow.bin", "/fast.bin")
        defer { manager.shutdown() }
        let start = try await waitForTraffic("/fast.bin")
        let shares = try await measured {
            usleep(UInt32(max(0, 4 - Date().timeIntervalSince(start)) * 1e6))
            // The best of up to five windows of 5 s: under the whole suite's load a window where the engine got
            // too little CPU to take in the limit (0.7, once 0.4 MiB/s in all) says nothing about how the limit
            // is shared.
            var shares = Self.intake(manager, ids, over: 5)
            for _ in 0..<4 where shares[0] + shares[1] <= 0.8 * Self.mib {
                let again = Self.intake(manager, ids, over: 5)
                if again[0] + again[1] > shares[0] + shares[1] { shares = again }
            }
            return shares
        }
        let slow = shares[0], fast = shares[1]
        print("BandwidthLimitTests: global 1 MiB/s, one item served at 256 KiB/s: slow \(slow / Self.mib), fast \(fast / Self.mib) MiB/s")
        if slow == 0, let item = manager.snapshot(of: ids[0]) {
            // Once in a fresh clone's CI the slow item took in nothing for three windows: say what it was doing.
            let sent = server.bytesSent("/slow.bin").reduce(0) { $0 + $1.bytes }
            print("BandwidthLimitTests: the slow item stood still: \(item.state), \(item.bytesDone) B, \(item.retries) retries, "
                  + "\(item.attempts.count) attempts, last error \(item.lastError ?? "none"), the server sent \(sent) B")
        }
        // Measured while both ran (an item that ended took in nothing in a window, and says nothing of sharing).
        #expect(ids.allSatisfy { manager.snapshot(of: $0)?.state == .running }, "an item ended before the measurement did")
        #expect(fast > 0.6 * Self.mib, "\(fast / Self.mib) MiB/s for the fast item")
        // In all (the exact split, on a clock of its own, is RatePacingTests'; the rule left 6 % of the limit unused
        // until the slow item's room to grow back was no longer taken from the other).
        #expect(slow + fast > 0.8 * Self.mib && slow + fast < 1.25 * Self.mib, "\((slow + fast) / Self.mib) MiB/s in all")
    }

    @Test func aLimitChangedMidTransferTakesEffectWithinTwoSeconds() async throws {
        routeLarge("/change.bin", seed: 85)
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        var spec = TransferSpec(download: server.url("/change.bin"), directory: dir.path)
        spec.rateLimit = 512 << 10
        let id = manager.add(spec)
        let start = try await waitForTraffic("/change.bin")
        let (changedAt, applied) = try await measured {
            usleep(UInt32(max(0, 5 - Date().timeIntervalSince(start)) * 1e6))
            let changedAt = Date().timeIntervalSince(start)
            let applied = manager.setRateLimit(id, 2 << 20)
            usleep(6_000_000)
            return (changedAt, applied)
        }
        #expect(applied)
        let samples = server.bytesSent("/change.bin")
        // From second 3: the first seconds at the server carry its send buffers filling up, longer when the
        // machine is busy (a full suite on 2 cores measured 0.92-0.94 MiB/s over seconds 2-4 twice in ~15 runs).
        let before = samples.rate(from: 3, to: changedAt, after: start)
        var after = samples.rate(from: changedAt + 2, to: changedAt + 6, after: start)
        // A window in which the whole suite's load left the engine too little CPU to take 2 MiB/s in says nothing
        // of the limit: up to four more (a full suite on two cores held it under 1.1 MiB/s for 8 s once).
        var end = changedAt + 6
        while after <= 1.6 * Self.mib, end < changedAt + 22 {
            try await measured { _ = usleep(4_000_000) }
            after = max(after, server.bytesSent("/change.bin").rate(from: end, to: end + 4, after: start))
            end += 4
        }
        print("BandwidthLimitTests: 512 KiB/s then 2 MiB/s: \(before / Self.mib) then \(after / Self.mib) MiB/s")
        // Still the filling buffers' tail: well under the later rate is enough.
        #expect(before < 0.9 * Self.mib, "\(before / Self.mib) MiB/s before the change")
        // Over twice the old limit, so the change was applied (one not applied stays at 0.5 MiB/s), and never past
        // the new one. How close to 2 MiB/s it comes is RatePacingTests' to say, on a clock of its own: here the
        // whole suite's load on two cores held the engine to 1.56 MiB/s in one of 21 runs (a fresh clone's CI).
        #expect(after > 1.1 * Self.mib && after < 2.5 * Self.mib, "\(after / Self.mib) MiB/s from 2 s after the change")
        #expect(manager.snapshot(of: id)?.rateLimit == 2 << 20)
    }

    /// A limit lifted while its transfer waits out its rate reaches it at once: at 100 B/s a transfer waits
    /// 164 s for its next 16 KiB, and it waited them all after the limit was gone.
    @Test func aLimitLiftedWhileATransferWaitsForItsRateTakesEffectAtOnce() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 90)
        server.route("/lift.bin", .serve(Resource(body: body)))
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        var spec = TransferSpec(download: server.url("/lift.bin"), directory: dir.path)
        spec.rateLimit = 100
        let id = manager.add(spec)
        try await eventually("the first 16 KiB in") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 16 << 10 }
        #expect(manager.setRateLimit(id, nil))
        try await eventually(within: 30, "done once the limit is lifted") { manager.snapshot(of: id)?.state == .completed }
        #expect(dir.contents("lift.bin") == body)
    }

    @Test func anItemsLimitSurvivesARestart() async throws {
        server.route("/kept.bin", .serve(Resource(body: Resource.randomBytes(count: 8 << 20, seed: 86)),
                                         ServeOptions(stallAfter: 1 << 20)))
        let storePath = dir.path + "/queue.sqlite"
        var spec = TransferSpec(download: server.url("/kept.bin"), directory: dir.path + "/out")
        spec.rateLimit = 300 << 10
        try FileManager.default.createDirectory(atPath: dir.path + "/out", withIntermediateDirectories: true)
        let id: TransferID
        do {
            let manager = try TransferManager(configuration: testConfiguration(), store: try SQLiteQueueStore(path: storePath))
            id = manager.add(spec)
            #expect(manager.snapshot(of: id)?.rateLimit == 300 << 10)
            #expect(manager.setRateLimit(id, 700 << 10))
            manager.shutdown()
        }
        let again = try TransferManager(configuration: testConfiguration(), store: try SQLiteQueueStore(path: storePath))
        defer { again.shutdown() }
        #expect(again.snapshot(of: id)?.rateLimit == 700 << 10)
        #expect(again.limits.current.items[id.rawValue] == nil || again.limits.current.items[id.rawValue] == 700 << 10)
        try await eventually("the item running again") { again.snapshot(of: id)?.state == .running }
        try await eventually("its limit handed to the transport") { again.limits.current.items[id.rawValue] == 700 << 10 }
    }

    @Test func ratesAreWrittenAsCurlWritesThem() throws {
        #expect(try RateText.parse("500K") == 500 * 1024)
        #expect(try RateText.parse("2M") == 2 << 20)
        #expect(try RateText.parse("1.5M") == 3 << 19)
        #expect(try RateText.parse("1g") == 1 << 30)
        #expect(try RateText.parse("4096") == 4096)
        #expect(try RateText.parse("0") == nil)
        #expect(try RateText.parse("off") == nil)
        for bad in ["", "fast", "2Mbit", "-1M", "1..5M", "M", "1e9", "2 M B", "MiB"] {
            #expect(throws: UsageError.self, "\(bad)") { try RateText.parse(bad) }
        }
    }

    /// Issue 24, bug 11: the forms ferry itself prints are taken back (`2 MiB/s`), SI units mean what they say,
    /// a plain number under 1024 is refused as a forgotten unit, and a negative rate is said in words.
    @Test func ratesAreAlsoWrittenAsFerryPrintsThem() throws {
        #expect(try RateText.parse("1MiB") == 1 << 20)
        #expect(try RateText.parse("2 MiB/s") == 2 << 20)
        #expect(try RateText.parse(RateText.describe(3 << 19)) == 3 << 19)
        #expect(try RateText.parse("512KiB/s") == 512 << 10)
        #expect(try RateText.parse("500k/s") == 500 << 10)
        #expect(try RateText.parse("2MB") == 2_000_000)
        #expect(try RateText.parse("1.5kb") == 1_500)
        #expect(try RateText.parse("100B") == 100)
        #expect(try RateText.parse("100 B/s") == 100)
        #expect(try RateText.parse("1024") == 1024)
        for plain in ["100", "1.5", "0.5", "1023"] {
            #expect(throws: UsageError.self, "\(plain)") { try RateText.parse(plain) }
            do throws(UsageError) { _ = try RateText.parse(plain) } catch {
                #expect(error.description == "'\(plain)' would be \(plain) bytes per second: write \(plain)B if that is meant, or \(plain)K, \(plain)M")
            }
        }
        do throws(UsageError) { _ = try RateText.parse("-1") } catch {
            #expect(error.description == "a rate cannot be negative: '-1' (0 or off for no limit)")
        }
    }

    @Test func aScheduleGivesTheRateInForceAtEachTime() throws {
        let schedule = try LimitSchedule.parse("08:00,512K 23:00,off")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        func at(_ hour: Int, _ minute: Int) -> Date {
            calendar.date(from: DateComponents(year: 2026, month: 11, day: 23, hour: hour, minute: minute))!
        }
        #expect(schedule.rate(at: at(7, 59), calendar: calendar) == nil)
        #expect(schedule.rate(at: at(8, 0), calendar: calendar) == 512 << 10)
        #expect(schedule.rate(at: at(22, 59), calendar: calendar) == 512 << 10)
        #expect(schedule.rate(at: at(23, 30), calendar: calendar) == nil)
        #expect(schedule.nextChange(after: at(12, 0), calendar: calendar) == at(23, 0))
        #expect(schedule.nextChange(after: at(23, 0), calendar: calendar) == at(8, 0).addingTimeInterval(86_400))
        for bad in ["", "8,512K", "25:00,1M", "08:00", "08:00,fast", "08:0,1M"] {
            #expect(throws: UsageError.self, "\(bad)") { try LimitSchedule.parse(bad) }
        }
    }
}
