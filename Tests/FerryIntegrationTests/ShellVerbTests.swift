import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// `ferry pause|resume|cancel|move|jobs|list|stop` from a shell, against a live headless engine (the real
/// binary), and on the stored queue when no engine runs.
@Suite struct ShellVerbTests {
    let server: TestHTTPServer
    let dir: TempDir
    var state: String { dir.path + "/state" }
    var downloads: String { dir.path + "/dl" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try FileManager.default.createDirectory(atPath: dir.path + "/dl", withIntermediateDirectories: true)
    }

    func verb(_ arguments: [String]) async throws -> CommandResult {
        try await runFerry(arguments, stateDir: state)
    }

    /// The queue as `ferry list --json` shows it: id -> state, in order.
    func listed() async throws -> [(id: Int, state: String)] {
        let result = try await verb(["list", "--json"])
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        return entries.map { ($0["id"] as? Int ?? 0, $0["state"] as? String ?? "") }
    }

    func state(of id: Int) async throws -> String? {
        try await listed().first { $0.id == id }?.state
    }

    /// (90 s at most: a child's start and each `ferry list` are processes of a debug build, and the whole suite
    /// on two cores held `verbsSteerALiveEngine` past 30 s before its engine listened.)
    func until(_ what: String, within seconds: Double = 90, _ condition: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try await !condition() {
            guard Date() < deadline else {
                Issue.record("timed out waiting for: \(what)")
                throw Timeout()
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Runs `verb`, then waits until `condition` holds; prints how long the effect took to show.
    func expectEffect(_ arguments: [String], _ what: String, _ condition: @escaping () async throws -> Bool) async throws {
        let started = Date()
        let result = try await verb(arguments)
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        let deadline = Date().addingTimeInterval(10)
        while try await !condition() {
            guard Date() < deadline else {
                Issue.record("\(arguments): \(what) did not show")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        print("verb \(arguments.joined(separator: " ")): \(what) after \(String(format: "%.3f", Date().timeIntervalSince(started))) s (the command's own start included)")
    }

    /// A headless run says each change of an item once: a pause of a download in 4 ranges printed "paused" 5
    /// times (once per range and once for the item), a cancel twice.
    @Test func aRunSaysEachChangeOnce() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 83)
        // Each request stalls after 256 KiB: the run cannot end before the test steers it, however busy the machine.
        server.route("/r.bin", .serve(Resource(body: body, etag: "\"r\""), ServeOptions(stallAfter: 256 << 10)))
        let log = dir.path + "/run.err"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let engine = ChildProcess()
        engine.executableURL = ferryExecutable()
        engine.arguments = ["get", "--no-tui", "--segments", "4", "-o", downloads, server.url("/r.bin").absoluteString]
        engine.environment = isolatedEnvironment(stateDir: state, configHome: dir.path + "/config")
        engine.standardOutput = FileHandle.nullDevice
        engine.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try engine.run()
        defer { if engine.isRunning { engine.terminate() } }
        try await until("the engine listens", within: 90) { ControlClient.connect(StateDirectory(option: state)) != nil }
        try await until("its ranges run", within: 90) { server.requests("/r.bin").count >= 5 }
        try await expectEffect(["pause", "1"], "#1 paused") { try await state(of: 1) == "paused" }
        try await expectEffect(["cancel", "1"], "#1 cancelled") { try await state(of: 1) == "cancelled" }
        await exited(engine)
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        #expect(lines.filter { $0.hasSuffix("#1 r.bin: paused") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.hasSuffix("#1 r.bin: cancelled") }.count == 1, "\(lines)")
    }

    @Test func verbsSteerALiveEngine() async throws {
        for name in ["a", "b"] {
            // Each answer stalls after 1 MiB and stays open: neither file can end before the test has steered it,
            // however busy the machine (at 256 KiB/s, #1 could end before the whole suite's load let the test see
            // it run).
            let body = Resource.randomBytes(count: 6 << 20, seed: name == "a" ? 81 : 82)
            server.route("/\(name).bin", .serve(Resource(body: body, etag: "\"\(name)\""), ServeOptions(stallAfter: 1 << 20)))
        }
        let engine = ChildProcess()
        engine.executableURL = ferryExecutable()
        engine.arguments = ["get", "--no-tui", "-j", "1", "-o", downloads, server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString]
        engine.environment = isolatedEnvironment(stateDir: state, configHome: dir.path + "/config")
        engine.standardOutput = FileHandle.nullDevice
        engine.standardError = FileHandle.nullDevice
        try engine.run()
        defer { if engine.isRunning { engine.terminate() } }
        try await until("the engine listens") { ControlClient.connect(StateDirectory(option: state)) != nil }
        try await until("#1 runs") { try await state(of: 1) == "running" }

        try await expectEffect(["pause", "1"], "#1 paused") { try await state(of: 1) == "paused" }
        // With #1 paused the one slot goes to #2.
        try await until("#2 runs") { try await state(of: 2) == "running" }
        try await expectEffect(["move", "#2", "top"], "#2 first") { try await listed().map(\.id) == [2, 1] }
        try await expectEffect(["resume", "#1"], "#1 queued behind #2") { try await state(of: 1) == "queued" }
        // Issue 24, bug 10: `jobs` alone prints the value in force (it was a usage error).
        let shown = try await verb(["jobs"])
        #expect(shown.status == 0 && shown.stdout == "1 at once (-j of the engine's start; the default is 4)\n", "\(shown.stderr)")
        try await expectEffect(["jobs", "2"], "both running") { try await listed().allSatisfy { $0.state == "running" } }
        // Bug 10: a change while the engine runs is kept in the state directory for the next engine, and says so.
        let changed = try await verb(["jobs"]).stdout
        #expect(changed.hasPrefix("2 at once (set with +, -, ferry jobs or aria2's RPC on ") && changed.hasSuffix(", kept for the next engine; the default is 4)\n"), "\(changed)")
        let saved = LiveSettings.load(StateDirectory(option: state).liveSettingsPath)
        #expect(saved.problem == nil && saved.settings.concurrency == 2 && saved.settings.limits == nil)
        try await expectEffect(["cancel", "2"], "#2 cancelled") { try await state(of: 2) == "cancelled" }

        let unknown = try await verb(["pause", "1", "99"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no item #99"))
        #expect(try await state(of: 1) == "running", "an unknown id changes nothing")

        let stop = try await verb(["stop"])
        #expect(stop.status == 0, "\(stop.stderr)")
        #expect(stop.stdout.contains("stopped the engine (pid \(engine.processIdentifier))"))
        await exited(engine)
        #expect(FileManager.default.fileExists(atPath: downloads + "/a.bin.part"), "the .part file stays")

        // No engine: the verbs change the stored queue, `jobs` and `stop` say that nothing runs.
        #expect(try await verb(["pause", "1"]).status == 0)
        #expect(try await state(of: 1) == "paused")
        #expect(try await verb(["move", "1", "bottom"]).status == 0)
        #expect(try await listed().map(\.id) == [2, 1])
        #expect(try await verb(["stop"]).stdout.contains("no engine is running"))
        let jobs = try await verb(["jobs", "3"])
        #expect(jobs.status == 1 && jobs.stderr.contains("no engine is running"))
        let next = try await verb(["jobs"])
        #expect(next.status == 0 && next.stdout.contains("no engine is running; the next one runs 2 at once (set with +, -, ferry jobs or aria2's RPC on "), "\(next.stdout)")
        let removed = try await verb(["remove", "2", "--delete-part"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try await listed().map(\.id) == [1])
        #expect(!FileManager.default.fileExists(atPath: downloads + "/b.bin.part"))
    }
}
