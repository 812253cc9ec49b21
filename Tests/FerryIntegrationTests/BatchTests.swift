import FerryCore
import Foundation
import GRDB
import Testing
import TestHTTPServer

/// A command minds its own items (its batch), and the same transfer asked for twice is one item: through
/// the real binary, with the queue's store looked at directly.
@Suite struct BatchTests {
    let server: TestHTTPServer
    let dir: TempDir
    var state: String { dir.path + "/state" }
    var downloads: String { dir.path + "/dl" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
    }

    func store() throws -> SQLiteQueueStore {
        let directory = StateDirectory(option: state)
        try directory.prepare()
        return try directory.openStore()
    }

    /// The item's ranges garbled in the database (a bad write, a disk error, another version's format).
    func garble(id: Int64) throws {
        let database = try DatabaseQueue(path: StateDirectory(option: state).databasePath)
        try database.write { db in
            try db.execute(sql: "UPDATE transfer SET segments = '[{\"start\":' WHERE id = ?", arguments: [id])
        }
        try database.close()
    }

    /// A download stored paused with `part` in its `.part` file, as an interrupted run leaves it.
    func storePaused(_ spec: TransferSpec, name: String, etag: String, total: Int64, part: Data) throws {
        let queue = try store()
        var item = try queue.add([spec])[0]
        item.state = .paused
        item.fileName = name
        item.bytesDone = Int64(part.count)
        item.validators = Validators(etag: etag, totalLength: total)
        try queue.save(item)
        #expect(FileManager.default.createFile(atPath: downloads + "/\(name).part", contents: part))
    }

    func size(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1 }

    @Test func aHeadlessGetLeavesTheRestOfTheQueueAsItWas() async throws {
        for name in ["paused.bin", "queued.bin", "mine.bin"] {
            server.route("/" + name, .serve(Resource(body: Resource.randomBytes(count: 300_000, seed: 7), etag: "\"\(name)\"")))
        }
        // A paused item with 100,000 bytes in its .part file, and a queued one, stored earlier.
        let queue = try store()
        let stored = try queue.add([TransferSpec(download: server.url("/paused.bin"), directory: downloads),
                                    TransferSpec(download: server.url("/queued.bin"), directory: downloads)])
        var paused = stored[0]
        paused.state = .paused
        paused.fileName = "paused.bin"
        paused.bytesDone = 100_000
        paused.validators = Validators(etag: "\"paused.bin\"", totalLength: 300_000)
        try queue.save(paused)
        #expect(FileManager.default.createFile(atPath: downloads + "/paused.bin.part", contents: Data(count: 100_000)))

        let result = try await runFerry(["get", "--no-tui", "-o", downloads, server.url("/mine.bin").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == downloads + "/mine.bin\n")
        #expect(size(downloads + "/mine.bin") == 300_000)
        // Nothing said of the others, nothing asked of the server for them, their states and .part as they were.
        #expect(!result.stderr.contains("#1"), "\(result.stderr)")
        #expect(!result.stderr.contains("#2"), "\(result.stderr)")
        #expect(server.requests("/paused.bin").isEmpty)
        #expect(server.requests("/queued.bin").isEmpty)
        let after = Dictionary(uniqueKeysWithValues: try queue.loadAll().map { ($0.id, $0) })
        #expect(after[stored[0].id]?.state == .paused)
        #expect(after[stored[0].id]?.bytesDone == 100_000)
        #expect(after[stored[1].id]?.state == .queued)
        #expect(size(downloads + "/paused.bin.part") == 100_000)
        #expect(!FileManager.default.fileExists(atPath: downloads + "/queued.bin.part"))
        // The command's own item is in a batch of its own, with what was typed.
        let mine = try #require(after.values.first { $0.spec.url.path == "/mine.bin" })
        let batches = try queue.batches()
        #expect(batches.map(\.id) == [try #require(mine.batch)])
        #expect(batches.first?.command.hasPrefix("ferry get --no-tui -o ") == true)
        #expect(after[stored[0].id]?.batch == nil)
    }

    @Test func theSameGetAfterAnInterruptResumesTheSameItem() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 11)
        let resource = Resource(body: body, etag: "\"same\"")
        // The first answer stalls after 1 MiB: the command is interrupted there.
        server.route("/same.bin", [.serve(resource, ServeOptions(stallAfter: 1 << 20)), .serve(resource)])
        // The stall outlasts the test's waits (the default idle timeout, 30 s, did not under the whole suite's load).
        let config = dir.path + "/idle.toml"
        try "[network]\nidle_timeout = 600.0\n".write(toFile: config, atomically: true, encoding: .utf8)
        let arguments = ["get", "--no-tui", "--config", config, "-o", downloads, server.url("/same.bin").absoluteString]
        let first = ChildProcess()
        first.executableURL = ferryExecutable()
        first.arguments = arguments
        first.environment = isolatedEnvironment(stateDir: state, configHome: dir.path + "/config")
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        let part = downloads + "/same.bin.part"
        try await eventually("the .part file has the first MiB") { size(part) == 1 << 20 }
        kill(first.processIdentifier, SIGINT)
        await exited(first)
        #expect(first.terminationStatus == 130)

        let again = try await runFerry(arguments, stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("#1 same.bin: already in the queue (queued); not added again"), "\(again.stderr)")
        #expect(again.stdout == downloads + "/same.bin\n")
        #expect(FileManager.default.contents(atPath: downloads + "/same.bin") == body)
        #expect(try FileManager.default.contentsOfDirectory(atPath: downloads) == ["same.bin"])
        let requests = server.requests("/same.bin")
        try #require(requests.count == 2)
        #expect(requests[1].header("Range") == "bytes=\(1 << 20)-")
        #expect(try store().loadAll().count == 1)
    }

    @Test func aPausedItemAskedForAgainResumesIt() async throws {
        let body = Resource.randomBytes(count: 200_000, seed: 12)
        server.route("/p.bin", .serve(Resource(body: body, etag: "\"p\"")))
        try storePaused(TransferSpec(download: server.url("/p.bin"), directory: downloads), name: "p.bin", etag: "\"p\"",
                        total: 200_000, part: body.prefix(50_000))

        let result = try await runFerry(["get", "--no-tui", "-o", downloads, server.url("/p.bin").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("#1 p.bin: already in the queue (paused); resuming it"), "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: downloads + "/p.bin") == body)
        #expect(server.requests("/p.bin").map { $0.header("Range") } == ["bytes=50000-"])
    }

    /// A long list asked again says the first items found in the queue one by one, then counts the rest (a list
    /// of 100,000 URLs added again printed 100,000 lines).
    @Test func aLongListAskedAgainCountsWhatItFoundPastTheFirstLines() async throws {
        server.route("/many.bin", .serve(Resource(body: Data("m".utf8))))
        let list = dir.path + "/list.txt"
        try (1...25).map { server.url("/many.bin?\($0)").absoluteString + "\n" }.joined().write(toFile: list, atomically: true, encoding: .utf8)
        let arguments = ["get", "--no-tui", "-o", downloads, "-i", list]
        let first = try await runFerry(arguments, stateDir: state)
        #expect(first.status == 0, "\(first.stderr)")
        let again = try await runFerry(arguments, stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        let lines = again.stderr.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("ferry: already done: ") }.count == 20, "\(again.stderr)")
        #expect(lines.contains("ferry: and 5 more found in the queue: 5 already done (ferry list shows them)"), "\(again.stderr)")
    }

    @Test func aCompletedDownloadAskedAgainIsAlreadyDoneUnlessForced() async throws {
        let body = Resource.randomBytes(count: 100_000, seed: 13)
        server.route("/done.bin", .serve(Resource(body: body)))
        let arguments = ["get", "--no-tui", "-o", downloads, server.url("/done.bin").absoluteString]
        let first = try await runFerry(arguments, stateDir: state)
        #expect(first.status == 0, "\(first.stderr)")

        let again = try await runFerry(arguments, stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("already done: \(downloads)/done.bin"), "\(again.stderr)")
        #expect(again.stdout == downloads + "/done.bin\n")
        #expect(server.requests("/done.bin").count == 1)

        // A file the user deleted is fetched again (a new item; the old one stays in the list as done).
        try FileManager.default.removeItem(atPath: downloads + "/done.bin")
        let gone = try await runFerry(arguments, stateDir: state)
        #expect(gone.status == 0, "\(gone.stderr)")
        #expect(gone.stdout == downloads + "/done.bin\n")
        #expect(server.requests("/done.bin").count == 2)

        let forced = try await runFerry(arguments + ["--force"], stateDir: state)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stdout == downloads + "/done (1).bin\n")
        #expect(server.requests("/done.bin").count == 3)
    }

    /// Issue 41: the same `get` asked again with another checksum takes it (it failed again on the old one),
    /// and says which options it took.
    @Test func aGetAskedAgainWithTheRightChecksumTakesIt() async throws {
        let body = Resource.randomBytes(count: 100_000, seed: 15)
        server.route("/sum.bin", .serve(Resource(body: body, etag: "\"sum\"")))
        let url = server.url("/sum.bin").absoluteString
        let wrong = String(repeating: "0", count: 64)
        let failed = try await runFerry(["get", "--no-tui", "-o", downloads, "--sha256", wrong, url], stateDir: state)
        #expect(failed.status != 0, "\(failed.stderr)")
        #expect(failed.stderr.contains("SHA-256 mismatch"), "\(failed.stderr)")

        let right = sha256Hex(body)
        let again = try await runFerry(["get", "--no-tui", "-o", downloads, "--sha256", right, url], stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("#1 sum.bin: already in the queue (failed); resuming it; it takes the options given now: "
                                      + "--sha256 \(right.prefix(12))… (was 000000000000…)"), "\(again.stderr)")
        #expect(FileManager.default.contents(atPath: downloads + "/sum.bin") == body)
        #expect(try store().loadAll().map(\.spec.sha256) == [right])
    }

    /// Issue 41: `--limit-rate 5M` after an interrupted `--limit-rate 100K` run is the item's limit (it kept 100K),
    /// said; a limit the user changed live stays when the command asks the same as before.
    @Test func aLimitAskedAnewIsTheItemsLimit() async throws {
        let body = Resource.randomBytes(count: 200_000, seed: 16)
        server.route("/lim.bin", .serve(Resource(body: body, etag: "\"lim\"")))
        var spec = TransferSpec(download: server.url("/lim.bin"), directory: downloads)
        spec.rateLimit = 100 << 10
        try storePaused(spec, name: "lim.bin", etag: "\"lim\"", total: 200_000, part: body.prefix(50_000))

        let result = try await runFerry(["get", "--no-tui", "-o", downloads, "--limit-rate", "5M", server.url("/lim.bin").absoluteString],
                                        stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("it takes the options given now: --limit-rate 5.0 MiB/s (was 100.0 KiB/s)"), "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: downloads + "/lim.bin") == body)
        let after = try #require(try store().loadAll().first)
        #expect(after.rateLimit == 5 << 20)
        #expect(after.spec.rateLimit == 5 << 20)
        #expect(server.requests("/lim.bin").map { $0.header("Range") } == ["bytes=50000-"])
    }

    /// Issue 41: `--force` replaces an unfinished item of the same transfer with a new one under the same name,
    /// its `.part` file deleted (it left `f.bin.part` behind and made `f (1).bin`).
    @Test func aForcedGetReplacesAnUnfinishedItemAndItsPartialFile() async throws {
        let body = Resource.randomBytes(count: 150_000, seed: 17)
        server.route("/f.bin", .serve(Resource(body: body, etag: "\"f\"")))
        try storePaused(TransferSpec(download: server.url("/f.bin"), directory: downloads), name: "f.bin", etag: "\"f\"",
                        total: 150_000, part: Data(count: 40_000))

        let result = try await runFerry(["get", "--no-tui", "--force", "-o", downloads, server.url("/f.bin").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == downloads + "/f.bin\n")
        #expect(result.stderr.contains("#2: a new copy in place of #1 (--force: its partial file deleted)"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: downloads) == ["f.bin"])
        #expect(FileManager.default.contents(atPath: downloads + "/f.bin") == body)
        #expect(server.requests("/f.bin").map { $0.header("Range") } == [nil])
        #expect(try store().loadAll().map(\.id.rawValue) == [2])
    }

    @Test func theSameUrlTwiceInOneListIsOneItem() async throws {
        server.route("/twice.bin", .serve(Resource(body: Resource.randomBytes(count: 10_000, seed: 14))))
        let list = dir.path + "/urls.txt"
        let url = server.url("/twice.bin").absoluteString
        try "\(url)\n\(url)\n".write(toFile: list, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--no-tui", "-o", downloads, "-i", list], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == downloads + "/twice.bin\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: downloads) == ["twice.bin"])
        #expect(server.requests("/twice.bin").count == 1)
    }

    /// The old socket took one frame of at most 4 MiB per add: 6,000 long URLs (about 7 MiB of specs) failed
    /// with 'the engine closed the connection' and queued nothing. (Few items, long URLs: the test is about the
    /// bytes, and an engine with many items would weigh on the tests that run beside it.)
    @Test func anAddLargerThanTheOldFrameCapQueues() async throws {
        server.route("/hang", .hang)
        let padding = String(repeating: "x", count: 1_000)
        let urls = (1...6_000).map { server.url("/hang").absoluteString + "?n=\($0)&pad=\(padding)" }
        let list = dir.path + "/urls.txt"
        try urls.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let specs = urls.map { TransferSpec(download: URL(string: $0)!, directory: downloads) }
        #expect(try JSONEncoder().encode(specs).count > ControlProtocol.maxRequest)

        let result = try await runFerry(["get", "--detach", "-j", "1", "-o", downloads, "-i", list], timeout: 120, stateDir: state)
        let stopped = try await runFerry(["stop"], stateDir: state)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: " ").count == 6_000)
        let stored = try store().loadAll()
        #expect(stored.count == 6_000)
        #expect(Set(stored.compactMap(\.batch)).count == 1)
    }

    /// A segmented download whose saved ranges cannot be read: before, they became nil and the item resumed as
    /// one stream at the preallocated file's full size; the server answered 416, which the resume rule took for
    /// a complete file, and a file with holes of zeros was published as done.
    /// Both ways in: a verb on the stored queue (`ferry resume`, no engine) and an engine loading the queue.
    @Test(arguments: [true, false])
    func unreadableRangesStartTheDownloadOverAndNeverPublishHoles(resumeFirst: Bool) async throws {
        let total = 4 << 20
        let body = Resource.randomBytes(count: total, seed: 15)
        server.route("/holes.bin", .serve(Resource(body: body, etag: "\"h\"")))
        let queue = try store()
        var spec = TransferSpec(download: server.url("/holes.bin"), directory: downloads)
        spec.segments = 4
        var item = try queue.add([spec])[0]
        item.state = resumeFirst ? .paused : .queued
        item.fileName = "holes.bin"
        item.validators = Validators(etag: "\"h\"", totalLength: Int64(total))
        item.segments = SegmentState.plan(total: Int64(total), count: 4, minimum: 1 << 20).map {
            SegmentState(start: $0.start, end: $0.end, done: 1000)
        }
        item.bytesDone = 4000
        try queue.save(item)
        // The preallocated file: each range's first 1000 bytes written, the rest holes.
        var part = Data(count: total)
        for segment in item.segments! {
            let start = Int(segment.start)
            part.replaceSubrange(start..<start + 1000, with: body[start..<start + 1000])
        }
        #expect(FileManager.default.createFile(atPath: downloads + "/holes.bin.part", contents: part))
        try garble(id: item.id.rawValue)

        if resumeFirst {
            let resumed = try await runFerry(["resume", "1"], stateDir: state)
            #expect(resumed.status == 0, "\(resumed.stderr)")
        }
        let result = try await runFerry(["run"], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: downloads + "/holes.bin") == body)
        #expect(try queue.loadAll().first?.state == .completed)
    }

    /// `list`, `retry`, `remove` by state and batch on the stored queue, each saying what it changed and left.
    @Test func verbsByStateAndBatchSayWhatTheyChangedAndLeft() async throws {
        let queue = try store()
        let batch = try queue.makeBatch(command: "ferry get ...").id
        let specs = (1...5).map { TransferSpec(download: server.url("/v\($0).bin"), directory: downloads) }
        var items = try queue.add(specs, batch: nil, reuse: false).map(\.item)
        let states: [TransferState] = [.failed, .completed, .failed, .cancelled, .paused]
        for index in items.indices {
            items[index].state = states[index]
            if states[index] == .completed { items[index].savedPath = downloads + "/v2.bin" }
        }
        try queue.save(items)
        _ = try queue.add([specs[4]], batch: batch, reuse: true)  // #5 joins the batch
        #expect(FileManager.default.createFile(atPath: downloads + "/v2.bin", contents: Data("kept".utf8)))

        func ids(_ result: CommandResult) throws -> [Int] {
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
            return entries.compactMap { $0["id"] as? Int }
        }
        #expect(try ids(try await runFerry(["list", "--json", "--state", "failed"], stateDir: state)) == [1, 3])
        #expect(try ids(try await runFerry(["list", "--json", "--batch", "\(batch)"], stateDir: state)) == [5])
        let table = try await runFerry(["list", "--state", "paused"], stateDir: state)
        // Aligned columns, the UI's words (issue 24, bug 13); no header line for a pipe.
        #expect(table.stdout.hasPrefix("#5   down  paused     \(String(repeating: " ", count: 5 - "\(batch)".count))\(batch)  "), "\(table.stdout)")
        let done = try await runFerry(["list", "--state", "done"], stateDir: state)
        #expect(done.stdout.split(separator: "\n").allSatisfy { $0.dropFirst(11).hasPrefix("done      ") }, "\(done.stdout)")
        // Nothing under a filter says what was asked for, not that the queue is empty.
        let noBatch = try await runFerry(["list", "--batch", "999", "--state", "failed"], stateDir: state)
        #expect(noBatch.stdout == "no items match --state failed --batch 999\n", "\(noBatch.stdout)")

        let retried = try await runFerry(["retry", "--state", "failed,cancelled"], stateDir: state)
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.stdout == "retried 3 (#1 #3 #4)\n")
        let again = try await runFerry(["retry", "#1", "2"], stateDir: state)
        #expect(again.stdout == "nothing retried; #1 is queued, left as it is; #2 is done, left as it is\n")
        let none = try await runFerry(["retry", "--state", "failed"], stateDir: state)
        #expect(none.stdout == "no item is failed; nothing retried\n")
        let paused = try await runFerry(["pause", "--batch", "\(batch)"], stateDir: state)
        #expect(paused.stdout == "nothing paused; #5 is paused, left as it is\n")

        let removed = try await runFerry(["remove", "--state", "done"], stateDir: state)
        #expect(removed.stdout == "removed 1 (#2)\n")
        #expect(FileManager.default.contents(atPath: downloads + "/v2.bin") == Data("kept".utf8))
        #expect(try queue.loadAll().map(\.id.rawValue) == [1, 3, 4, 5])

        let unknown = try await runFerry(["retry", "7"], stateDir: state)
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no item #7"))
        let both = try await runFerry(["retry", "1", "--state", "failed"], stateDir: state)
        #expect(both.status == 2)
        let badState = try await runFerry(["list", "--state", "finished"], stateDir: state)
        #expect(badState.status == 2)
        #expect(badState.stderr.contains("not a state: 'finished'"))
    }

    /// The same through a running engine: two downloads fail (404), one completes; `retry --state failed`
    /// retries those two only and says so.
    @Test func aRunningEngineRetriesByState() async throws {
        server.route("/ok.bin", .serve(Resource(body: Data("ok".utf8))))
        server.route("/gone1.bin", .status(404))
        server.route("/gone2.bin", .status(404))
        let urls = ["/gone1.bin", "/ok.bin", "/gone2.bin"].map { server.url($0).absoluteString }
        let added = try await runFerry(["get", "--detach", "-o", downloads] + urls, stateDir: state)
        #expect(added.status == 0, "\(added.stderr)")
        try await eventually("two failed, one done") {
            let items = (try? store().loadAll()) ?? []
            return items.filter { $0.state == .failed }.count == 2 && items.contains { $0.state == .completed }
        }
        let retried = try await runFerry(["retry", "--state", "failed"], stateDir: state)
        // The completed one asked again of the running engine: said, its path printed, nothing handed over.
        let again = try await runFerry(["get", "--no-tui", "-o", downloads, urls[1]], stateDir: state)
        let stopped = try await runFerry(["stop"], stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == downloads + "/ok.bin\n")
        #expect(again.stderr.contains("already done: \(downloads)/ok.bin"), "\(again.stderr)")
        #expect(!again.stderr.contains("handed"), "\(again.stderr)")
        #expect(stopped.status == 0)
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.stdout == "retried 2 (#1 #3)\n")
        #expect(server.requests("/ok.bin").count == 1)
    }
}
