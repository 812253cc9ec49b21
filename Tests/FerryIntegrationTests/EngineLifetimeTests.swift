import FerryCore
import Foundation
import Testing
import TestHTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// The background engine's life: it starts when a client needs one, exits by itself when idle with no client
/// after the linger, and a new one resumes every running item after `ferry stop` or `kill -9`.
@Suite struct EngineLifetimeTests {
    let server: TestHTTPServer
    let dir: TempDir
    var state: String { dir.path + "/state" }
    var downloads: String { dir.path + "/dl" }
    var config: String { dir.path + "/ferry.toml" }
    var directory: StateDirectory { StateDirectory(option: state) }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try FileManager.default.createDirectory(atPath: dir.path + "/dl", withIntermediateDirectories: true)
        try "[engine]\nlinger = 1\n".write(toFile: dir.path + "/ferry.toml", atomically: true, encoding: .utf8)
    }

    func ferry(_ arguments: [String]) async throws -> CommandResult {
        try await runFerry(arguments + ["--config", config], stateDir: state)
    }

    /// The pid the last engine wrote into the lock file (it stays there after the engine is gone).
    func enginePID() -> Int32? {
        (try? String(contentsOfFile: state + "/engine.lock", encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    func until(_ what: String, within seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try await !condition() {
            guard Date() < deadline else {
                // What the engine said, and the files, to tell a slow machine from a stuck engine.
                let log = (try? String(contentsOfFile: directory.logPath, encoding: .utf8)) ?? "(no engine.log)"
                let files = ((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []).sorted()
                    .map { "\($0) \(size(downloads + "/" + $0))" }
                Issue.record("\(what): not within \(seconds) s; files: \(files); engine.log: \(log.suffix(3000))")
                throw Timeout()
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func aDetachedEngineExitsByItselfWhenIdleWithNoClient() async throws {
        server.route("/small", .serve(Resource(body: Data("small".utf8))))
        let queued = try await ferry(["get", "--detach", "-o", downloads, server.url("/small").absoluteString])
        #expect(queued.status == 0, "\(queued.stderr)")
        #expect(queued.stdout == "#1\n", "--detach prints the ids and returns")
        let pid = try #require(enginePID())
        try await until("the download ends") { FileManager.default.contents(atPath: downloads + "/small") == Data("small".utf8) }
        // Idle, no client: gone after the linger (1 s here), leaving no socket behind.
        try await until("the engine exits") { kill(pid, 0) != 0 }
        #expect(!FileManager.default.fileExists(atPath: directory.socketPath))
        #expect(ControlClient.connect(directory) == nil)
    }

    /// Issue 40: the background engine is started as hooks are (Spawn): with every signal's handling at its
    /// default. The client ignores SIGCHLD (so the engine it leaves running is never a zombie), and an ignored
    /// signal is inherited across exec: the engine ignored SIGCHLD too, and its hooks were reaped before it could
    /// read how they ended (the hooks undid it for themselves only).
    @Test func theBackgroundEngineDoesNotInheritAnIgnoredSIGCHLD() async throws {
        server.route("/held", .hang)
        // A linger longer than the test (this suite's 1 s can end an engine that a busy client reaches late).
        let lingering = dir.path + "/linger.toml"
        try "[engine]\nlinger = 60\n".write(toFile: lingering, atomically: true, encoding: .utf8)
        let queued = try await runFerry(["get", "--detach", "-o", downloads, server.url("/held").absoluteString, "--config", lingering],
                                        stateDir: state)
        #expect(queued.status == 0, "\(queued.stderr)")
        let pid = try #require(enginePID())
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let ignored = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }
            .flatMap { UInt64($0.dropFirst("SigIgn:".count).trimmingCharacters(in: .whitespaces), radix: 16) })
        #expect(ignored & (1 << (UInt64(SIGCHLD) - 1)) == 0, "SigIgn \(String(ignored, radix: 16))")
        _ = try await runFerry(["stop", "--config", lingering], stateDir: state)
    }

    @Test(arguments: ["stop", "kill -9"])
    func aNewEngineResumesEveryRunningItem(_ ending: String) async throws {
        let bodies = (0..<2).map { Resource.randomBytes(count: 3 << 20, seed: UInt64(90 + $0)) }
        for (index, body) in bodies.enumerated() {
            // The first answer stalls after 1 MiB and stays open: the engine is caught mid-download however
            // long this test takes to get there.
            let resource = Resource(body: body, etag: "\"r\(index)\"")
            server.route("/r\(index)", [.serve(resource, ServeOptions(stallAfter: 1 << 20)), .serve(resource)])
        }
        let urls = (0..<2).map { server.url("/r\($0)").absoluteString }
        // An idle timeout longer than the test: the stalled answers stay open until the engine ends. With the
        // default 30 s, a test the whole suite's load kept from looking for half a minute found both answers
        // timed out, retried and complete, never the 1 MiB .part files it waits for (a fresh clone's CI).
        let stalling = dir.path + "/stalling.toml"
        try "[engine]\nlinger = 1\n[network]\nidle_timeout = 600\n".write(toFile: stalling, atomically: true, encoding: .utf8)
        #expect(try await runFerry(["get", "--detach", "-o", downloads] + urls + ["--config", stalling], stateDir: state).status == 0)
        let pid = try #require(enginePID())
        try await until("both files stall at 1 MiB", within: 90) { (0..<2).allSatisfy { size(downloads + "/r\($0).part") == 1 << 20 } }
        #expect((0..<2).allSatisfy { server.requests("/r\($0)").count == 1 }, "the stalled answers are still the first ones")
        if ending == "stop" {
            let stop = try await ferry(["stop"])
            #expect(stop.status == 0, "\(stop.stderr)")
        } else {
            kill(pid, SIGKILL)
        }
        try await until("the engine is gone") { kill(pid, 0) != 0 }
        #expect((0..<2).allSatisfy { size(downloads + "/r\($0).part") == 1 << 20 }, "the .part files stay")

        // The next client starts a new engine, which resumes both where their .part files end.
        server.route("/nudge", .serve(Resource(body: Data("n".utf8))))
        let nudge = try await ferry(["get", "--detach", "-o", downloads, server.url("/nudge").absoluteString])
        #expect(nudge.status == 0, "\(nudge.stderr)")
        // Its pid stays in the lock file after it exits: with a linger of 1 s it may have done both and gone
        // before a busy test looks (it was asked to be alive still, and under the whole suite's load was not).
        try await until("a new engine ran") { enginePID().map { $0 != pid } ?? false }
        try await until("both complete", within: 60) {
            (0..<2).allSatisfy { FileManager.default.contents(atPath: downloads + "/r\($0)") == bodies[$0] }
        }
        for index in 0..<2 {
            let requests = server.requests("/r\(index)")
            #expect(requests.count == 2, "r\(index): one request before, one after")
            #expect(requests.last?.header("Range") == "bytes=\(1 << 20)-", "r\(index) resumed where its .part file ends")
        }
        _ = try await ferry(["stop"])
    }

    func size(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
}
