@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// `[hooks]`: commands run as items end, with the item in their environment and their output in the log;
/// a hook that hangs is stopped, and the queue never waits for one.
@Suite struct HookTests {
    let server: TestHTTPServer
    let dir: TempDir
    var state: String { dir.path + "/state" }
    var downloads: String { dir.path + "/dl" }
    var config: String { dir.path + "/ferry.toml" }
    var log: String { (try? String(contentsOfFile: state + "/engine.log", encoding: .utf8)) ?? "" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
    }

    /// Reads `KEY=value` lines a hook wrote.
    func environment(_ path: String) -> [String: String] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    @Test func onDoneAndOnFailedHooksGetTheItemInTheirEnvironment() async throws {
        server.route("/report.pdf", .serve(Resource(body: Data("pdf".utf8))))
        server.route("/gone", .status(404))
        // The hooks are programs run without a shell; this one is a shell because the test asks it to be.
        try """
            [hooks]
            on_done = ["/bin/sh", "-c", "env > \\"$0\\"; echo done-hook-said-this", "\(dir.path)/done.env"]
            on_failed = "/bin/sh -c 'env > \\"$0\\"; exit 3' \(dir.path)/failed.env"
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let url = "http://someone:PASSWORD@127.0.0.1:\(server.port)/report.pdf"
        let result = try await runFerry(["get", "--config", config, "-o", downloads, "-j", "1", url, server.url("/gone").absoluteString],
                                        stateDir: state)
        #expect(result.status == 1, "\(result.stderr)")
        // The run waited for its hooks before it exited: both files are there.
        let done = environment(dir.path + "/done.env")
        #expect(done["FERRY_ID"] == "1")
        #expect(done["FERRY_DIRECTION"] == "download")
        #expect(done["FERRY_STATUS"] == "done")
        #expect(done["FERRY_PATH"] == downloads + "/report.pdf")
        #expect(done["FERRY_URL"] == "http://127.0.0.1:\(server.port)/report.pdf", "credentials never reach a hook")
        #expect(done["FERRY_HTTP_STATUS"] == "200")
        #expect(done["FERRY_BYTES"] == "3")
        #expect(done["HOME"] != nil, "the engine's own environment is passed on")
        let failed = environment(dir.path + "/failed.env")
        #expect(failed["FERRY_ID"] == "2")
        #expect(failed["FERRY_STATUS"] == "failed")
        #expect(failed["FERRY_HTTP_STATUS"] == "404")
        #expect(failed["FERRY_ERROR"]?.contains("404") == true)
        // Their output and how they ended are in the log, never on the terminal.
        #expect(log.contains("done-hook-said-this"))
        #expect(log.contains("hook on_done #1: exit 0"))
        #expect(log.contains("hook on_failed #2: exit 3"))
        #expect(!result.stdout.contains("done-hook-said-this") && !result.stderr.contains("done-hook-said-this"))
        #expect(!log.contains("PASSWORD"))
    }

    /// The queue goes on while hooks run: three items end one after another while the first one's hook,
    /// which runs until it is told to stop, still runs.
    @Test func aHookNeverDelaysTheQueue() async throws {
        for name in ["a", "b", "c"] { server.route("/\(name)", .serve(Resource(body: Data(name.utf8)))) }
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        var settings = HookSettings()
        settings.onDone = ["sleep", "120"]
        settings.timeout = 120
        let hooks = HookRunner(settings: settings, logPath: state + "/engine.log")
        let manager = try TransferManager(configuration: testConfiguration(maxConcurrent: 1), monitor: hooks)
        let ids = manager.add(["a", "b", "c"].map { TransferSpec(download: server.url("/\($0)"), directory: downloads) })
        await manager.waitUntilFinished(Set(ids))
        manager.shutdown()
        #expect(manager.snapshot().items.allSatisfy { $0.state == .completed })
        let deadline = Date().addingTimeInterval(10)
        while started.count < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(started.count == 3, "\(log)")
        #expect(!log.contains("exit") && !log.contains("killed"), "no hook has ended: \(log)")
        for pid in started { kill(-pid, SIGKILL) }
        try await offPool { hooks.waitUntilIdle(timeout: 20) }
        #expect(log.components(separatedBy: "ended by signal 9").count - 1 == 3, "\(log)")
    }

    /// A process that runs: it exists and is not a zombie (where nothing reaps orphans, a dead one stays one).
    func alive(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.range(of: ") ", options: .backwards) else { return false }
        return stat[close.upperBound...].first != "Z"
    }

    /// The pids of the hooks the log says were started.
    var started: [Int32] {
        log.split(separator: "\n").compactMap { line in
            line.range(of: "(pid ").flatMap { Int32(line[$0.upperBound...].dropLast()) }
        }
    }

    /// A hook that outlives the timeout is stopped, and its children with it (its whole process group).
    @Test func aHookThatHangsIsKilledWithItsChildren() async throws {
        server.route("/a", .serve(Resource(body: Data("a".utf8))))
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        var settings = HookSettings()
        settings.onDone = ["/bin/sh", "-c", "sleep 60 & echo child $!; wait"]
        settings.timeout = 1
        let hooks = HookRunner(settings: settings, logPath: state + "/engine.log")
        let manager = try TransferManager(configuration: testConfiguration(), monitor: hooks)
        let ids = manager.add([TransferSpec(download: server.url("/a"), directory: downloads)])
        await manager.waitUntilFinished(Set(ids))
        manager.shutdown()
        try await offPool { hooks.waitUntilIdle(timeout: 20) }
        #expect(log.contains("hook on_done #1: killed after"), "\(log)")
        #expect(log.contains("(timeout 1 s)"))
        let children = log.split(separator: "\n").compactMap { line in
            line.range(of: "child ").flatMap { Int32(line[$0.upperBound...]) }
        }
        #expect(children.count == 1, "\(log)")
        // (Signalled with their hook; init reaps them a moment later.)
        let deadline = Date().addingTimeInterval(10)
        while children.contains(where: alive), Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        for pid in children { #expect(!alive(pid), "child \(pid) still runs") }
    }

    /// A background engine is started by a client that ignores SIGCHLD (so it leaves no zombie); the engine
    /// restores it, or the kernel would reap hooks before their exit status could be read.
    @Test func aBackgroundEngineReadsItsHooksExitStatus() async throws {
        server.route("/bg", .serve(Resource(body: Data("bg".utf8))))
        try "[engine]\nlinger = 1\n[hooks]\non_done = \"/bin/sh -c 'exit 7'\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let queued = try await runFerry(["get", "--detach", "--config", config, "-o", downloads, server.url("/bg").absoluteString],
                                        stateDir: state)
        #expect(queued.status == 0, "\(queued.stderr)")
        let deadline = Date().addingTimeInterval(30)
        while !log.contains("hook on_done #1: "), Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(log.contains("hook on_done #1: exit 7"), "\(log)")
        _ = try await runFerry(["stop", "--config", config], stateDir: state)
    }
}
