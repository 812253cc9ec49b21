import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// The durable queue through the real binary: a crash and a restart, a second ferry handing work to the
/// running one, `list` while an engine runs, the config file.
@Suite struct DurableQueueTests {
    let server: TestHTTPServer
    let dir: TempDir
    var state: String { dir.path + "/state" }
    var downloads: String { dir.path + "/downloads" }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try FileManager.default.createDirectory(atPath: dir.path + "/downloads", withIntermediateDirectories: true)
    }

    func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = ferryExecutable()
        process.arguments = arguments
        process.environment = isolatedEnvironment(stateDir: state, configHome: dir.path + "/config").merging(extra) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    func size(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }

    @Test func killNineThenRunResumesFromThePartFileWithOneRangedRequest() async throws {
        let body = Resource.randomBytes(count: 6 << 20, seed: 40)
        let resource = Resource(body: body, etag: "\"c1\"")
        // The first answer stops after 3 MiB and stays open: the engine is caught mid-download.
        server.route("/crash.bin", [.serve(resource, ServeOptions(stallAfter: 3 << 20)), .serve(resource)])
        // The stall outlasts any wait of the test: with the default idle timeout (30 s), a test pool that the whole
        // suite's load held for longer found the child done (its retry took the second answer) and the .part gone.
        try FileManager.default.createDirectory(atPath: dir.path + "/config/ferry", withIntermediateDirectories: true)
        try "[network]\nidle_timeout = 600\n".write(toFile: dir.path + "/config/ferry/config.toml", atomically: true, encoding: .utf8)
        let first = try start(["get", "-o", downloads, server.url("/crash.bin").absoluteString])
        let part = downloads + "/crash.bin.part"
        // (What stood when it did not come: the file's size, the requests, whether the child lives.)
        try await eventually("the .part file has the first 3 MiB; it has \(size(part)); requests \(server.requests("/crash.bin").count); "
                             + "child alive: \(kill(first.processIdentifier, 0) == 0); files: \((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? [])") {
            size(part) == 3 << 20
        }
        kill(first.processIdentifier, SIGKILL)
        await exited(first)
        let partSize = size(part)
        #expect(partSize == 3 << 20)

        // The stored row still says running; with no engine, nothing runs: the listing says queued.
        let listed = try await runFerry(["list", "--json"], stateDir: state)
        #expect(listed.stdout.contains("\"state\" : \"queued\""), "\(listed.stdout)")
        #expect(!listed.stdout.contains("\"state\" : \"running\""))
        #expect(try await runFerry(["list", "--state", "running"], stateDir: state).stdout == "no items match --state running\n")

        let result = try await runFerry(["run"], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: downloads + "/crash.bin") == body)
        #expect(!FileManager.default.fileExists(atPath: part))
        let requests = server.requests("/crash.bin")
        try #require(requests.count == 2)
        #expect(requests[1].header("Range") == "bytes=\(partSize)-")
        #expect(requests[1].header("If-Range") == "\"c1\"")
        #expect(result.stdout == downloads + "/crash.bin\n")
    }

    @Test func aSecondGetHandsItsItemToTheRunningEngineAndFollowsItToItsEnd() async throws {
        let slow = Resource(body: Resource.randomBytes(count: 4 << 20, seed: 41), etag: "\"s\"")
        let small = Data("handed over".utf8)
        // The engine is kept busy by a download that stalls until the test cuts it, then resumes (it relied on
        // the engine's 30 s idle timeout, which the whole suite's load outlasted).
        server.route("/slow.bin", [.serve(slow, ServeOptions(stallAfter: 1 << 20)), .serve(slow)])
        server.route("/small.txt", .serve(Resource(body: small)))
        server.route("/missing.txt", .status(404))
        // An idle timeout longer than the test: the stall ends when the test cuts it, not before.
        let config = dir.path + "/idle.toml"
        try "[network]\nidle_timeout = 600.0\n".write(toFile: config, atomically: true, encoding: .utf8)
        let engine = try start(["get", "--config", config, "-o", downloads, server.url("/slow.bin").absoluteString])
        try await eventually("the engine is downloading") { size(downloads + "/slow.bin.part") == 1 << 20 }
        let second = try await runFerry(["get", "-j", "6", "--retries", "0", "-o", downloads, server.url("/small.txt").absoluteString], stateDir: state)
        // It returned when its own item was done, with the result as if it had run it: the path, exit 0.
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("handed 1 item to the running engine: #2"))
        // Its -j is not the running engine's: said, not silently dropped (issue 24, bug 10).
        #expect(second.stderr.contains("-j 6 not applied: the running engine keeps its own number of transfers at once (ferry jobs 6 sets it)"))
        #expect(second.stderr.contains("--retries 0 not applied: the running engine keeps its own retry rules"), "\(second.stderr)")
        #expect(second.stderr.contains("#2 small.txt: done"))
        #expect(second.stdout == downloads + "/small.txt\n")
        #expect(FileManager.default.contents(atPath: downloads + "/small.txt") == small)
        #expect(engine.isRunning, "the follower did not wait for the engine's own item")
        // A failure is reported as a failure: exit 1 naming the item.
        let missing = try await runFerry(["get", "-o", downloads, server.url("/missing.txt").absoluteString], stateDir: state)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("failed: \(server.url("/missing.txt").absoluteString): HTTP 404 Not Found"))
        #expect(missing.stdout.isEmpty)
        // An upload from standard input runs in this process, on a queue of its own: its lines do not number it
        // `#1` beside the engine's own #1 (issue 24, bug 14).
        server.route("/piped", .status(201, body: Data("piped ok".utf8)))
        let piped = try await runFerry(["put", "-", server.url("/piped").absoluteString], stateDir: state) { handle in
            handle.write(Data("from a pipe".utf8))
            try? handle.close()
        }
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stdout == "piped ok")
        #expect(piped.stderr.contains("ferry: stdin: uploading") && !piped.stderr.contains("#1"), "\(piped.stderr)")
        #expect(engine.isRunning, "the engine's own item still stalls")
        #expect(server.cutStalled("/slow.bin") == 1)
        await exited(engine)
        #expect(engine.terminationStatus == 0)
        #expect(FileManager.default.contents(atPath: downloads + "/slow.bin") == slow.body)
        #expect(server.requests("/small.txt").count == 1)
        #expect(server.requests("/missing.txt").count == 1)
    }

    @Test func listShowsAFinishedItemWhileAnotherEngineRuns() async throws {
        server.route("/quick.txt", .serve(Resource(body: Data("quick".utf8))))
        server.route("/long.bin", .serve(Resource(body: Resource.randomBytes(count: 3 << 20, seed: 42)), ServeOptions(stallAfter: 1 << 20)))
        let done = try await runFerry(["get", "-o", downloads, server.url("/quick.txt").absoluteString], stateDir: state)
        #expect(done.status == 0)
        // An idle timeout longer than the test (the stall must outlast a test pool the whole suite holds up).
        let config = dir.path + "/idle.toml"
        try "[network]\nidle_timeout = 600.0\n".write(toFile: config, atomically: true, encoding: .utf8)
        let engine = try start(["get", "--config", config, "-o", downloads, server.url("/long.bin").absoluteString])
        defer { engine.terminate(); engine.waitUntilExit() }
        try await eventually("the engine is downloading") { size(downloads + "/long.bin.part") == 1 << 20 }
        let listed = try await runFerry(["--state-dir", state, "list", "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        try #require(entries.count == 2)
        #expect(entries[0]["state"] as? String == "completed")
        #expect(entries[0]["destination"] as? String == downloads + "/quick.txt")
        #expect(entries[0]["bytes"] as? Int == 5 && entries[0]["total"] as? Int == 5)
        #expect(entries[1]["state"] as? String == "running")
        for key in ["id", "direction", "url", "state", "bytes", "attempts"] { #expect(entries[1][key] != nil, "\(key)") }
        let table = try await runFerry(["list"], stateDir: state)
        #expect(table.stdout.contains("  done  ") && table.stdout.contains("quick.txt"), "\(table.stdout)")
    }

    @Test(arguments: [
        ("[transfers]\nconcurrency = = 2\n", ":2:15: transfers.concurrency: `concurrency = = 2`: expected a value after '='"),
        ("[transfers]\nconcurrency = \"two\"\n", ":2:1: transfers.concurrency: expected a whole number"),
        ("[transfers]\nconcurency = 1\n", ":2:1: transfers.concurency: unknown key; did you mean concurrency?"),
    ])
    func aBadConfigExitsTwoNamingTheProblem(_ text: String, _ expected: String) async throws {
        let file = dir.path + "/bad.toml"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let get = try await runFerry(["get", "--config", file, "http://127.0.0.1:1/x"], stateDir: state)
        #expect(get.status == 2)
        #expect(get.stderr.contains(file + expected), "\(get.stderr)")
        // Reading the queue needs no config: the mistake is said and the queue listed (issue 24, bug 14).
        for arguments in [["--config", file, "list"], ["list", "--config", file]] {
            let result = try await runFerry(arguments, stateDir: state)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains(file + expected) && result.stderr.contains("(the queue is listed anyway)"), "\(result.stderr)")
        }
        let viaEnvironment = try await runFerry(["list"], stateDir: state, environment: ["FERRY_CONFIG": file])
        #expect(viaEnvironment.status == 0 && viaEnvironment.stderr.contains(file + expected))
    }

    @Test func configSettingsApplyAndTheCommandLineWins() async throws {
        server.route("/cfg.txt", .serve(Resource(body: Data("cfg".utf8))))
        let file = dir.path + "/ferry.toml"
        try "[transfers]\ndownload_dir = \"\(downloads)/fromconfig\"\n[network]\nuser_agent = \"ferry-test/9\"\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--config", file, server.url("/cfg.txt").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == downloads + "/fromconfig/cfg.txt\n")
        #expect(server.requests("/cfg.txt").first?.header("User-Agent") == "ferry-test/9")
        let overridden = try await runFerry(["get", "--config", file, "-o", downloads, server.url("/cfg.txt").absoluteString], stateDir: state)
        #expect(overridden.stdout == downloads + "/cfg.txt\n")
    }

    /// A per-host secret reaches its host only: not another host after a redirect, not the output, not `list`.
    @Test func aPerHostHeaderIsSentToItsHostOnly() async throws {
        let other = try TestHTTPServer()
        defer { other.shutdown() }
        // Two host names for two servers on this machine: 127.0.0.1 gets the secret, localhost does not.
        let secret = "Bearer TOP-SECRET-123"
        server.route("/mine.txt", .serve(Resource(body: Data("mine".utf8))))
        server.route("/away", .redirect(302, location: "http://localhost:\(other.port)/theirs.txt"))
        other.route("/theirs.txt", .serve(Resource(body: Data("theirs".utf8))))
        let file = dir.path + "/hosts.toml"
        try "[[hosts]]\nmatch = \"127.0.0.1\"\nheaders = { Authorization = \"\(secret)\" }\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--config", file, "-o", downloads, "-j", "1",
                                         server.url("/mine.txt").absoluteString, server.url("/away").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests("/mine.txt").first?.header("Authorization") == secret)
        #expect(server.requests("/away").first?.header("Authorization") == secret)
        let theirs = try #require(other.requests("/theirs.txt").first)
        #expect(theirs.header("Authorization") == nil)
        #expect(FileManager.default.contents(atPath: downloads + "/theirs.txt") == Data("theirs".utf8))
        let listed = try await runFerry(["list", "--json", "--config", file], stateDir: state)
        for text in [result.stdout, result.stderr, listed.stdout, listed.stderr] { #expect(!text.contains("TOP-SECRET")) }
    }

    /// A netrc login reaches the host it names (or, from `default`, the host the user named), never a host a
    /// redirect leads to; it is never printed; a file others can read gets a warning.
    @Test func aNetrcLoginIsSentToItsHostOnly() async throws {
        let other = try TestHTTPServer()
        defer { other.shutdown() }
        server.route("/mine.txt", .serve(Resource(body: Data("mine".utf8))))
        server.route("/away", .redirect(302, location: "http://localhost:\(other.port)/theirs.txt"))
        other.route("/theirs.txt", .serve(Resource(body: Data("theirs".utf8))))
        other.route("/direct.txt", .serve(Resource(body: Data("direct".utf8))))
        let netrc = dir.path + "/netrc"
        try "# logins\nmachine 127.0.0.1\n  login alice\n  password \"NETRC SECRET\"\ndefault login anon password GUESTPW\n"
            .write(toFile: netrc, atomically: true, encoding: .utf8)
        chmod(netrc, 0o600)
        let result = try await runFerry(["get", "--netrc-file", netrc, "-o", downloads, "-j", "1",
                                         server.url("/mine.txt").absoluteString, server.url("/away").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("warning"))
        let alice = "Basic " + Data("alice:NETRC SECRET".utf8).base64EncodedString()
        #expect(server.requests("/mine.txt").first?.header("Authorization") == alice)
        #expect(server.requests("/away").first?.header("Authorization") == alice)
        // Redirected to another host: neither alice's login nor the default one.
        #expect(try #require(other.requests("/theirs.txt").first).header("Authorization") == nil)
        #expect(FileManager.default.contents(atPath: downloads + "/theirs.txt") == Data("theirs".utf8))

        // Named by the user, the other host gets the default login; $NETRC is read when no file is named,
        // and a file others can read is used with a warning.
        chmod(netrc, 0o644)
        let direct = try await runFerry(["get", "-o", downloads, "http://localhost:\(other.port)/direct.txt"], stateDir: state,
                                        environment: ["NETRC": netrc])
        #expect(direct.status == 0, "\(direct.stderr)")
        #expect(direct.stderr.contains("warning: \(netrc) can be read by other users"))
        #expect(other.requests("/direct.txt").first?.header("Authorization") == "Basic " + Data("anon:GUESTPW".utf8).base64EncodedString())
        // --no-netrc sends nothing.
        let none = try await runFerry(["get", "--no-netrc", "-o", downloads, "-O", "again.txt", server.url("/mine.txt").absoluteString],
                                      stateDir: state, environment: ["NETRC": netrc])
        #expect(none.status == 0, "\(none.stderr)")
        #expect(server.requests("/mine.txt").last?.header("Authorization") == nil)

        let listed = try await runFerry(["list", "--json"], stateDir: state)
        for text in [result.stdout, result.stderr, direct.stdout, direct.stderr, listed.stdout] {
            #expect(!text.contains("NETRC SECRET") && !text.contains("GUESTPW"))
        }
        // A netrc file that cannot be used is named, and nothing is queued.
        let missing = try await runFerry(["get", "--netrc-file", dir.path + "/nope", "-o", downloads, server.url("/mine.txt").absoluteString],
                                         stateDir: state)
        #expect(missing.status == 2 && missing.stderr == "ferry: cannot read netrc file \(dir.path)/nope\n")
    }

    /// Bug (review): a redirect from A to B and back to A carried B's netrc login to A, as the rule compared
    /// each hop with the first one only. Each hop now gets its own host's login.
    @Test func aRedirectBackHomeCarriesNoOtherHostsLogin() async throws {
        let other = try TestHTTPServer()
        defer { other.shutdown() }
        server.route("/start", .redirect(302, location: "http://localhost:\(other.port)/bounce"))
        other.route("/bounce", .redirect(302, location: server.url("/final").absoluteString))
        server.route("/final", .serve(Resource(body: Data("final".utf8))))
        let netrc = dir.path + "/netrc"
        try "machine 127.0.0.1 login alice password ALICEPW\nmachine localhost login bob password BOBPW\n"
            .write(toFile: netrc, atomically: true, encoding: .utf8)
        chmod(netrc, 0o600)
        let result = try await runFerry(["get", "--netrc-file", netrc, "-o", downloads, server.url("/start").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        func basic(_ pair: String) -> String { "Basic " + Data(pair.utf8).base64EncodedString() }
        #expect(server.requests("/start").first?.header("Authorization") == basic("alice:ALICEPW"))
        #expect(other.requests("/bounce").first?.header("Authorization") == basic("bob:BOBPW"))
        #expect(server.requests("/final").first?.header("Authorization") == basic("alice:ALICEPW"))
    }

    @Test func aUserCredentialDoesNotFollowARedirectToAnotherHost() async throws {
        let other = try TestHTTPServer()
        defer { other.shutdown() }
        server.route("/go", .redirect(302, location: "http://localhost:\(other.port)/land.txt"))
        other.route("/land.txt", .serve(Resource(body: Data("x".utf8))))
        let result = try await runFerry(["get", "-o", downloads, "-H", "Authorization: Basic dXNlcjpwdw==", "-H", "X-Other: kept",
                                         server.url("/go").absoluteString], stateDir: state)
        #expect(result.status == 0, "\(result.stderr)")
        let landed = try #require(other.requests("/land.txt").first)
        #expect(landed.header("Authorization") == nil)
        #expect(landed.header("X-Other") == "kept")
    }

    @Test func tenThousandQueuedItemsListQuickly() async throws {
        try StateDirectory(option: state).prepare()
        let queue = try StateDirectory(option: state).openStore()
        let specs = (0..<10_000).map { TransferSpec(download: URL(string: "http://127.0.0.1:1/f\($0).bin")!, directory: downloads) }
        _ = try queue.add(specs)
        let started = Date()
        let listed = try await runFerry(["list", "--json"], stateDir: state)
        let elapsed = Date().timeIntervalSince(started)
        print("ferry list --json with 10,000 items: \(String(format: "%.3f", elapsed)) s")
        #expect(listed.status == 0)
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [Any])
        #expect(entries.count == 10_000)
        let table = try await runFerry(["list"], stateDir: state)
        #expect(table.stdout.split(separator: "\n").count == 10_000)
    }
}
