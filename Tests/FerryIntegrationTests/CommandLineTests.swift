import FerryCore
import FerryStorage
import Foundation
import Testing
import TestHTTPServer

/// The real `ferry` binary, run as a subprocess against the in-process server.
@Suite struct CommandLineTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    @Test func getPrintsTheSavedPathAndExitsZero() async throws {
        let body = Resource.randomBytes(count: 2 << 20, seed: 20)
        server.route("/files/data.bin", .serve(Resource(body: body)))
        let result = try await runFerry(["get", "--no-tui", "-o", dir.path, server.url("/files/data.bin").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == dir.path + "/data.bin\n")
        #expect(dir.contents("data.bin") == body)
        #expect(result.stderr.contains("#1 data.bin: done"))
        #expect(!result.stderr.contains("\u{1B}"))
    }

    /// Issue 41: Ctrl-C on a headless `get` handed to a running engine pauses what it started there and says so
    /// (it exited 130 and left the download running in the engine, without a word); the same command resumes it.
    @Test func ctrlCOnAGetHandedToAnEnginePausesWhatItStarted() async throws {
        let body = Resource.randomBytes(count: 2 << 20, seed: 22)
        server.route("/held.bin", [.serve(Resource(body: body, etag: "\"h\""), ServeOptions(stallAfter: 256 << 10)),
                                   .serve(Resource(body: body, etag: "\"h\""))])
        let state = dir.path + "/state", config = dir.path + "/ferry.toml"
        try "[engine]\nlinger = 60\n[network]\nidle_timeout = 600\n".write(toFile: config, atomically: true, encoding: .utf8)
        let url = server.url("/held.bin").absoluteString
        // An engine that runs already (an item of its own keeps it busy).
        server.route("/other.bin", .hang)
        #expect(try await runFerry(["get", "--detach", "-o", dir.path, server.url("/other.bin").absoluteString, "--config", config],
                                   stateDir: state).status == 0)
        let follower = ChildProcess()
        follower.executableURL = builtExecutable("ferry")
        follower.arguments = ["--no-tui", "get", "-o", dir.path, url, "--config", config]
        follower.environment = isolatedEnvironment(stateDir: state, configHome: dir.path)
        let err = Pipe()
        _ = fcntl(err.fileHandleForReading.fileDescriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(err.fileHandleForWriting.fileDescriptor, F_SETFD, FD_CLOEXEC)
        follower.standardError = err
        follower.standardOutput = FileHandle.nullDevice
        follower.standardInput = FileHandle.nullDevice
        let exited = AsyncStream<Void>.makeStream()
        follower.terminationHandler = { _ in exited.continuation.finish() }
        try follower.run()
        let said = DataReader(err.fileHandleForReading)
        try err.fileHandleForWriting.close()
        // Handed over (the line comes once Ctrl-C is taken care of) and stalled mid-file in the engine.
        try await eventually("handed over and running") {
            String(decoding: said.received, as: UTF8.self).contains("handed 1 item to the running engine")
                && server.requests("/held.bin").count == 1
        }
        follower.interrupt()
        for await _ in exited.stream {}
        let stderr = String(decoding: await said.finish(), as: UTF8.self)
        #expect(follower.terminationStatus == 130, "\(stderr)")
        #expect(stderr.contains("interrupted: paused #2 in the engine; the partial files stay, and the same command resumes them"), "\(stderr)")
        let listed = try await runFerry(["list", "--json", "--config", config], stateDir: state)
        let items = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(items.first { $0["id"] as? Int == 2 }?["state"] as? String == "paused", "\(listed.stdout)")
        // The same command resumes it, from where it stood, and follows it to the end.
        let again = try await runFerry(["--no-tui", "get", "-o", dir.path, url, "--config", config], stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(dir.contents("held.bin") == body)
        #expect(server.requests("/held.bin").last?.header("Range") != nil, "resumed, not fetched again from zero")
        _ = try await runFerry(["stop", "--config", config], stateDir: state)
    }

    /// Issue 41: a `get` handed to a running engine says every attempt and retry of its item, as it does alone
    /// (it said `retry 1/5`, then nothing until `failed`: it sees the engine's queue a few times a second, and a
    /// retry that came and went between two looks, waiting again, was not said).
    @Test func aGetHandedToAnEngineSaysEveryAttemptAndRetry() async throws {
        let state = dir.path + "/state", config = dir.path + "/ferry.toml"
        try "[engine]\nlinger = 60\n[retry]\nattempts = 3\nbase_delay = 0.05\nmax_delay = 0.05\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        server.route("/other.bin", .hang)
        #expect(try await runFerry(["get", "--detach", "-o", dir.path, server.url("/other.bin").absoluteString, "--config", config],
                                   stateDir: state).status == 0)
        server.route("/broken.bin", .status(500))
        let result = try await runFerry(["--no-tui", "get", "-o", dir.path, server.url("/broken.bin").absoluteString, "--config", config],
                                        stateDir: state)
        _ = try await runFerry(["stop", "--config", config], stateDir: state)
        #expect(result.status == 1)
        #expect(result.stderr.contains("handed 1 item to the running engine"), "\(result.stderr)")
        #expect(server.requests("/broken.bin").count == 4)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        for attempt in 1...4 {
            #expect(lines.filter { $0.hasSuffix("#2 broken.bin: downloading (attempt \(attempt))") }.count == 1, "\(result.stderr)")
        }
        for retry in 1...3 {
            #expect(lines.filter { $0.contains("#2 broken.bin: retry \(retry)/3") }.count == 1, "\(result.stderr)")
        }
        #expect(lines.filter { $0.contains("#2 broken.bin: failed (") }.count == 1, "\(result.stderr)")
    }

    /// Issue 41: `ferry rpc` says whether anything of this queue answers the RPC: not when no engine runs, not
    /// when the running engine started with it off, not when it could not listen (the port was taken: aria2p got
    /// `Unauthorized` from another state directory's engine there); it said "the background engine answers it".
    @Test func ferryRPCSaysWhetherItsEngineAnswers() async throws {
        let state = dir.path + "/state"
        server.route("/hang.bin", .hang)
        func config(_ name: String, _ text: String) throws -> String {
            let path = dir.path + "/" + name
            try ("[engine]\nlinger = 60\n" + text).write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let taken = try config("taken.toml", "[rpc]\nenable = true\nport = \(server.port)\n")
        let none = try await runFerry(["rpc", "--config", taken], stateDir: state)
        #expect(none.stdout.contains("none runs now"), "\(none.stdout)")
        // An engine whose port another program holds (the test's HTTP server).
        #expect(try await runFerry(["get", "--detach", "-o", dir.path, server.url("/hang.bin").absoluteString, "--config", taken],
                                   stateDir: state).status == 0)
        let refused = try await runFerry(["rpc", "--config", taken], stateDir: state)
        #expect(refused.stdout.contains("is not answered by this queue's engine (pid "), "\(refused.stdout)")
        #expect(refused.stdout.contains("cannot listen on 127.0.0.1:\(server.port)"), "\(refused.stdout)")
        _ = try await runFerry(["stop", "--config", taken], stateDir: state)
        // An engine started with the RPC off, asked about with a config that turns it on.
        let off = try config("off.toml", "")
        let port = try freePort()
        let on = try config("on.toml", "[rpc]\nenable = true\nport = \(port)\n")
        #expect(try await runFerry(["get", "--detach", "-o", dir.path, server.url("/hang.bin").absoluteString, "--config", off],
                                   stateDir: state).status == 0)
        let startedOff = try await runFerry(["rpc", "--config", on], stateDir: state)
        #expect(startedOff.stdout.contains("is not answered: the running engine (pid "), "\(startedOff.stdout)")
        #expect(startedOff.stdout.contains("started with it off"), "\(startedOff.stdout)")
        _ = try await runFerry(["stop", "--config", off], stateDir: state)
        // And one that answers.
        #expect(try await runFerry(["get", "--detach", "-o", dir.path, server.url("/hang.bin").absoluteString, "--config", on],
                                   stateDir: state).status == 0)
        let answering = try await runFerry(["rpc", "--config", on], stateDir: state)
        #expect(answering.stdout.contains("aria2 JSON-RPC: http://127.0.0.1:\(port)/jsonrpc (the background engine, pid "), "\(answering.stdout)")
        _ = try await runFerry(["stop", "--config", on], stateDir: state)
    }

    /// Issue 41: a server that ignores Range answers a resume with the whole file: the progress goes back to zero,
    /// and the headless lines say so, once, after "resuming at" (they said nothing, and the count went backwards).
    @Test func aStartOverFromZeroIsSaidOnce() async throws {
        let resource = Resource(body: Resource.randomBytes(count: 6 << 20, seed: 21), etag: "\"same\"")
        server.route("/norange.bin", [.serve(resource, ServeOptions(cutAfter: 2 << 20)),
                                      .serve(resource, ServeOptions(honorRange: false))])
        let result = try await runFerry(["get", "--no-tui", "-o", dir.path, server.url("/norange.bin").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("norange.bin") == resource.body)
        let asked = try #require(server.requests("/norange.bin").last?.header("Range"))
        let offset = try #require(Int64(asked.dropFirst("bytes=".count).dropLast()))
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let resuming = lines.firstIndex { $0.contains("resuming at \(ByteFormat.bytes(offset)) (attempt 2)") }
        let restarts = lines.indices.filter { lines[$0].contains("starting over from zero") }
        #expect(restarts.count == 1, "\(result.stderr)")
        #expect(lines[restarts.first ?? 0].hasSuffix(
            "#1 norange.bin: the server sent the whole file, not from \(ByteFormat.bytes(offset)): starting over from zero (attempt 2)"),
            "\(result.stderr)")
        #expect(resuming.map { $0 < restarts.first ?? 0 } == true, "said after the attempt's own line: \(result.stderr)")
    }

    /// corelibs makes a cache directory named after the program under the user's cache directory the first time
    /// a session configuration is made, whatever the session's own cache, and a cookie directory named after the
    /// binary's directory under the user's data directory; ferry caches nothing, keeps no cookies and makes
    /// neither. The user's data directory is still theirs afterwards: a hook sees `XDG_DATA_HOME` as it was.
    @Test func aRunLeavesNoCacheOrCookieDirectoryBehind() async throws {
        server.route("/files/c.bin", .serve(Resource(body: Data(repeating: 1, count: 1000))))
        let home = dir.path + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let config = dir.path + "/config.toml"
        try """
            [hooks]
            on_done = ["/bin/sh", "-c", "printf %s \\"$XDG_DATA_HOME\\" > \\"$0\\"", "\(dir.path)/seen"]
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--no-tui", "--config", config, "-o", dir.path, server.url("/files/c.bin").absoluteString],
                                        environment: ["HOME": home, "XDG_CACHE_HOME": home + "/.cache",
                                                      "XDG_DATA_HOME": home + "/.local/share"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("c.bin") == Data(repeating: 1, count: 1000))
        #expect(!FileManager.default.fileExists(atPath: home + "/.cache/org.swift.foundation.URLCache"))
        #expect(!FileManager.default.fileExists(atPath: home + "/.local/share"),
                "\((try? FileManager.default.subpathsOfDirectory(atPath: home)) ?? [])")
        #expect(String(decoding: dir.contents("seen") ?? Data(), as: UTF8.self) == home + "/.local/share")
    }

    /// Foundation's `FileHandle.write(_: Data)` traps on EPIPE: ferry died (SIGILL) at its first line when its
    /// stderr's reader had gone (`ferry get ... 2>&1 | head`, a parent that died). The lines are dropped now
    /// and the download finishes.
    @Test func aReaderThatWentAwayCostsTheLinesNotTheDownload() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 21)
        server.route("/files/piped.bin", .serve(Resource(body: body)))
        let scratch = try TempDir()
        let script = "\"$1\" get --no-tui --state-dir \"$2/state\" -o \"$2\" \"$3\" 2>&1 >/dev/null | true; echo \"${PIPESTATUS[0]}\""
        let status = try await runProgram("/bin/bash", ["-c", script, "bash", ferryExecutable().path, scratch.path,
                                                       server.url("/files/piped.bin").absoluteString])
        #expect(status.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(scratch.contents("piped.bin") == body)
    }

    @Test(arguments: [["--version"], ["version"], ["get", "--version"]])
    func versionSaysTheVersionTheSwiftAndTheTransport(_ arguments: [String]) async throws {
        let result = try await runFerry(arguments)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(result.stdout)")
        #expect(lines.first == "ferry \(FerryVersion.number)")
        #expect(lines.last?.hasPrefix("Swift 6.") == true)
        #expect(lines.last?.contains("transport: libcurl/") == true)
    }

    /// The completion scripts argument-parser writes from ferry's definitions: each shell gets one, and bash's
    /// completes subcommands and options (the hidden `engine` subcommand is not offered).
    @Test func completionScriptsCompleteSubcommandsAndOptions() async throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try await runFerry(["--generate-completion-script", shell])
            #expect(script.status == 0 && script.stdout.count > 1000, "\(shell): \(script.stderr)")
            #expect(script.stdout.contains("netrc-file"), "\(shell)")
        }
        let bash = try await runFerry(["--generate-completion-script", "bash"])
        let path = dir.path + "/ferry.bash"
        try bash.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        func complete(_ words: [String]) async throws -> [String] {
            let line = words.joined(separator: " ")
            let program = """
                source "$1"
                COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " "))); COMP_CWORD=\(words.count - 1)
                COMP_LINE='\(line)'; COMP_POINT=\(line.count)
                _ferry ferry '\(words.last!)' '\(words[words.count - 2])'
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try await runProgram("/bin/bash", ["-c", program, "bash", path])
            return result.split(separator: "\n").map(String.init)
        }
        #expect(try await complete(["ferry", "g"]) == ["get"])
        #expect(try await complete(["ferry", "st"]) == ["stop"])
        #expect(try await complete(["ferry", "en"]).isEmpty)
        #expect(try await complete(["ferry", "get", "--netrc-f"]) == ["--netrc-file"])
    }

    /// Issue 24, bug 14: the verbs' ids complete from the queue (the unfinished items; bash's script calls
    /// `ferry ---completion <verb> -- positional@0 ...` for them), from the state directory on the line typed.
    @Test func verbIDsCompleteFromTheQueue() async throws {
        let state = dir.path + "/queue"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let store = try SQLiteQueueStore(path: StateDirectory(option: state).databasePath)
        let added = try store.add((1...4).map { TransferSpec(download: server.url("/c/\($0).bin"), directory: dir.path) })
        var done = try #require(try store.load([added[1].id]).first)
        done.state = .completed
        try store.save(done)
        let call = ["---completion", "pause", "--", "positional@0", "2", "0", "ferry", "pause", ""]
        let offered = try await runFerry(call, stateDir: state)
        #expect(offered.status == 0 && offered.stdout == "1\n3\n4\n", "\(offered.stdout) \(offered.stderr)")
        // --state-dir on the line wins; no queue there: nothing offered, nothing made.
        let elsewhere = try await runFerry(["---completion", "move", "--", "positional@0", "4", "0", "ferry", "move", "--state-dir", dir.path + "/none", ""],
                                           stateDir: state)
        #expect(elsewhere.status == 0 && elsewhere.stdout.isEmpty && !FileManager.default.fileExists(atPath: dir.path + "/none"))
        let there = try await runFerry(["---completion", "move", "--", "positional@0", "4", "0", "ferry", "move", "--state-dir", state, ""])
        #expect(there.stdout == "1\n3\n4\n")
    }

    /// What a verb changed is said in one line however many items: ids in a row as one run (`#1-#25`), at
    /// most ten parts and how many more.
    @Test func manyIDsAreSaidAsRuns() async throws {
        let state = dir.path + "/runs"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let store = try SQLiteQueueStore(path: StateDirectory(option: state).databasePath)
        _ = try store.add((1...25).map { TransferSpec(download: server.url("/r/\($0).bin"), directory: dir.path) })
        let paused = try await runFerry(["pause", "--all"], stateDir: state)
        #expect(paused.status == 0 && paused.stdout == "paused 25 (#1-#25)\n", "\(paused.stdout) \(paused.stderr)")
        let some = try await runFerry(["resume", "1", "2", "4", "6", "7", "8"], stateDir: state)
        #expect(some.stdout == "resumed 6 (#1 #2 #4 #6-#8)\n", "\(some.stdout)")
        let scattered = try await runFerry(["cancel"] + stride(from: 9, through: 25, by: 2).map(String.init) + ["10", "12", "14"], stateDir: state)
        #expect(scattered.stdout == "cancelled 12 (#9 #11 #13 #15 #17 #19 #21 #23 #25 #10 and 2 more)\n", "\(scattered.stdout)")
    }

    /// `ferry limit RATE --batch N` sets the batch's own limit (a tree's: its files share it), with no engine as with
    /// one; with ids it sets theirs; a bad rate exits 2 naming it, nothing changed.
    @Test func limitSetsABatchsOwnLimitOrItemsLimits() async throws {
        let state = dir.path + "/limits"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let path = StateDirectory(option: state).databasePath
        let store = try SQLiteQueueStore(path: path)
        let batch = try store.makeBatch(command: "ferry get -r", tree: server.url("/t/").absoluteString)
        _ = try store.add((1...3).map { TransferSpec(download: server.url("/t/\($0).bin"), directory: dir.path) }, batch: batch.id, reuse: false)
        let whole = try await runFerry(["limit", "2M", "--batch", "\(batch.id)"], stateDir: state)
        #expect(whole.status == 0 && whole.stdout == "batch \(batch.id): limited to 2.0 MiB/s, shared by its 3 items\n", "\(whole.stdout) \(whole.stderr)")
        #expect(try SQLiteQueueStore(path: path).batches().first?.rateLimit == 2 << 20)
        #expect(try SQLiteQueueStore(path: path).loadAll().allSatisfy { $0.rateLimit == nil }, "the batch's, not each item's")
        let one = try await runFerry(["limit", "500K", "#2"], stateDir: state)
        #expect(one.status == 0 && one.stdout == "limited 1 (#2)\n", "\(one.stdout) \(one.stderr)")
        #expect(try SQLiteQueueStore(path: path).loadAll().map(\.rateLimit) == [nil, 500 << 10, nil])
        let bad = try await runFerry(["limit", "fast", "--batch", "\(batch.id)"], stateDir: state)
        #expect(bad.status == 2 && bad.stderr.contains("limit: not a rate: 'fast'"), "\(bad.stderr)")
        let off = try await runFerry(["limit", "off", "--batch", "\(batch.id)"], stateDir: state)
        #expect(off.stdout == "batch \(batch.id): no longer limited\n", "\(off.stdout)")
        #expect(try SQLiteQueueStore(path: path).batches().first?.rateLimit == nil)
        // A batch the queue does not have: refused, exit 2.
        let unknown = try await runFerry(["limit", "1M", "--batch", "99"], stateDir: state)
        #expect(unknown.status == 2 && unknown.stderr.contains("no batch 99"), "\(unknown.stderr)")
        // Removed as a whole, with no engine: its limit goes with it.
        _ = try await runFerry(["limit", "1M", "--batch", "\(batch.id)"], stateDir: state)
        let removed = try await runFerry(["remove", "--batch", "\(batch.id)"], stateDir: state)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try SQLiteQueueStore(path: path).batches().first?.rateLimit == nil)
    }

    /// docs/man/ferry.1 is made by scripts/manpage from the same definitions; a stale page (an option added
    /// since) fails here.
    @Test func theManPageNamesEverySubcommandAndOption() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/man/ferry.1"), encoding: .utf8)
        let dump = try await runFerry(["--experimental-dump-help"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let command = try #require(json["command"] as? [String: Any])
        var missing: [String] = []
        func check(_ command: [String: Any]) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] where argument["shouldDisplay"] as? Bool != false {
                for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                    let option = name["name"] as? String ?? ""
                    if !page.contains("Fl -\(option)"), !page.contains(", -\(option)") { missing.append("--\(option) of \(command["commandName"] ?? "")") }
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] where sub["shouldDisplay"] as? Bool != false {
                let name = sub["commandName"] as? String ?? ""
                if !page.contains(".It Em \(name)") { missing.append("subcommand \(name)") }
                check(sub)
            }
        }
        check(command)
        #expect(missing.isEmpty, "docs/man/ferry.1 is stale (run scripts/manpage): \(missing)")
    }

    @Test func notFoundExitsOneWithTheStatusLineAfterOneRequest() async throws {
        server.route("/nope", .status(404))
        let result = try await runFerry(["get", "-o", dir.path, server.url("/nope").absoluteString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("HTTP 404 Not Found"))
        #expect(result.stderr.contains(server.url("/nope").absoluteString))
        #expect(result.stdout.isEmpty)
        #expect(server.requests("/nope").count == 1)
    }

    @Test func oneFailureAmongSuccessesExitsOne() async throws {
        server.route("/ok", .serve(Resource(body: Data("ok".utf8))))
        server.route("/gone", .status(410))
        let result = try await runFerry(["get", "-o", dir.path, server.url("/ok").absoluteString, server.url("/gone").absoluteString])
        #expect(result.status == 1)
        #expect(result.stdout == dir.path + "/ok\n")
        #expect(result.stderr.contains("HTTP 410 Gone"))
    }

    @Test(arguments: [
        (["get", "not a url"], "not a valid URL"),
        (["get", "gopher://127.0.0.1/x"], "unsupported scheme 'gopher'"),
        (["get", "http:///nohost"], "no host"),
        (["get"], "no URL given"),
        (["get", "-j", "0", "http://127.0.0.1:1/x"], "-j"),
        (["get", "--sha256", "xyz", "http://127.0.0.1:1/x"], "--sha256 needs 64 hex digits"),
        (["get", "-H", "Broken", "http://127.0.0.1:1/x"], "bad header"),
        (["get", "-O", "one", "http://127.0.0.1:1/a", "http://127.0.0.1:1/b"], "-O names one file"),
        (["get", "-O", String(repeating: "n", count: 252), "http://127.0.0.1:1/a"], "-O names a file of 252 bytes; at most 250 fit"),
        (["get", "http://127.0.0.1:99999/x"], "port 99999 in 'http://127.0.0.1:99999/x' is not a port"),
        (["get", "--bogus", "http://127.0.0.1:1/x"], "Unknown option"),
        (["get", "--limit-rate", "fast", "http://127.0.0.1:1/x"], "--limit-rate: not a rate: 'fast'"),
        (["put", "--limit-rate", "2Mbit", "/etc/hostname", "http://127.0.0.1:1/x"], "--limit-rate: not a rate: '2Mbit'"),
        (["get", "--limit-rate", "-1", "http://127.0.0.1:1/x"], "--limit-rate: a rate cannot be negative: '-1'"),
        (["get", "--limit-rate", "100", "http://127.0.0.1:1/x"], "--limit-rate: '100' would be 100 bytes per second"),
    ])
    func badUsageExitsTwo(_ arguments: [String], _ message: String) async throws {
        let result = try await runFerry(arguments, cwd: dir.path)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(dir.files().isEmpty)
    }

    @Test func anUnwritableDirectoryExitsTwoAndSendsNothing() async throws {
        server.route("/x", .serve(Resource(body: Data("x".utf8))))
        _ = FileManager.default.createFile(atPath: dir.path + "/plainfile", contents: Data())
        let result = try await runFerry(["get", "-o", dir.path + "/plainfile/sub", server.url("/x").absoluteString])
        #expect(result.status == 2)
        #expect(result.stderr.contains("cannot create directory \(dir.path)/plainfile/sub: \(dir.path)/plainfile is a file"), "\(result.stderr)")
        #expect(server.allRequests.isEmpty)
    }

    /// Issue 24, bug 12: every message names the path and the cause in words (Foundation's "The operation
    /// could not be completed" and a bare "cannot read URL list" said neither).
    @Test func messagesNameThePathAndTheCause() async throws {
        let proc = try await runFerry(["get", "-o", "/proc/ferry-nope", "http://127.0.0.1:1/x"], cwd: dir.path)
        #expect(proc.status == 2)
        #expect(proc.stderr.contains("cannot create directory /proc/ferry-nope: No such file or directory"), "\(proc.stderr)")
        let missing = try await runFerry(["get", "-i", dir.path + "/no-list.txt"], cwd: dir.path)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("cannot read URL list \(dir.path)/no-list.txt: No such file or directory"), "\(missing.stderr)")
        let directory = try await runFerry(["get", "-i", dir.path], cwd: dir.path)
        #expect(directory.status == 2)
        #expect(directory.stderr.contains("cannot read URL list \(dir.path): Is a directory"), "\(directory.stderr)")
    }

    @Test func aBadLineInTheListIsNamedAndNothingIsDownloaded() async throws {
        server.route("/a", .serve(Resource(body: Data("a".utf8))))
        let list = dir.path + "/urls.txt"
        try "# my list\n\(server.url("/a"))\n\nhttp://[broken\n".write(toFile: list, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "-o", dir.path + "/out", "-i", list])
        #expect(result.status == 2)
        #expect(result.stderr.contains("urls.txt:4:"), "\(result.stderr)")
        #expect(server.allRequests.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/out"))
    }

    /// The paths are said in the order the URLs were given, every one of them when there are more than the results
    /// read at a time (a thousand: a whole run's snapshot at once held every item at its end).
    @Test func aLongListSaysEveryPathInItsOrder() async throws {
        let names = (0..<1_100).map { "f\($0).txt" }
        for name in names { server.route("/long/" + name, .serve(Resource(body: Data(name.utf8)))) }
        let list = dir.path + "/long.txt"
        try names.map { server.url("/long/" + $0).absoluteString }.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--no-tui", "-j", "8", "-o", dir.path + "/out", "-i", list], timeout: 120)
        #expect(result.status == 0, "\(result.stderr.suffix(500))")
        #expect(result.stdout.split(separator: "\n").map(String.init) == names.map { dir.path + "/out/" + $0 })
    }

    @Test func aListDownloadsEveryURL() async throws {
        var lines = ["# comment"]
        for i in 0..<5 {
            server.route("/l\(i).txt", .serve(Resource(body: Data("line \(i)".utf8))))
            lines.append(server.url("/l\(i).txt").absoluteString)
        }
        let list = dir.path + "/urls.txt"
        try lines.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "-j", "2", "-o", dir.path + "/out", "-i", list])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 5)
        #expect(FileManager.default.contents(atPath: dir.path + "/out/l3.txt") == Data("line 3".utf8))
    }

    @Test func aSHA256MismatchExitsOneAndLeavesNoFinalFile() async throws {
        server.route("/sum.bin", .serve(Resource(body: Data("payload".utf8))))
        let result = try await runFerry(["get", "-o", dir.path, "--sha256", String(repeating: "a", count: 64), server.url("/sum.bin").absoluteString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("SHA-256 mismatch"))
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/sum.bin"))
    }

    @Test func outputNameAndHeadersAreUsed() async throws {
        server.route("/h", .serve(Resource(body: Data("h".utf8))))
        let result = try await runFerry(["get", "-o", dir.path, "-O", "named.txt", "-H", "X-Ferry-Test: yes please", server.url("/h").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.files() == ["named.txt"])
        #expect(server.requests("/h").first?.header("X-Ferry-Test") == "yes please")
    }

    @Test func aHostileNameNeverReachesTheTerminalRaw() async throws {
        server.route("/evil", .serve(Resource(body: Data("x".utf8), contentDisposition: "attachment; filename=\"a\u{1B}]0;pwned\u{07}b.txt\"")))
        let result = try await runFerry(["get", "-o", dir.path, server.url("/evil").absoluteString])
        #expect(result.status == 0)
        #expect(!result.stderr.contains("\u{1B}"))
        #expect(!result.stdout.contains("\u{1B}"))
        #expect(!result.stderr.contains("\u{07}"))
    }

    /// `ferry get` of the server's `path` into the test's directory (its output dropped), once its `.part` file
    /// holds `bytes`.
    private func getUnderWay(_ path: String, _ bytes: Int) async throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = ferryExecutable()
        process.arguments = ["get", "-o", dir.path, server.url(path).absoluteString]
        process.environment = isolatedEnvironment(stateDir: dir.path + "/.state", configHome: dir.path + "/.config")
        // The stall must outlast the wait: under the whole suite's load the wait once did not look for 30 s, the
        // idle timeout's retry fetched the next 3 MiB meanwhile, and the size asked for was never seen.
        try FileManager.default.createDirectory(atPath: dir.path + "/.config/ferry", withIntermediateDirectories: true)
        try Data("[network]\nidle_timeout = 600\n".utf8).write(to: URL(fileURLWithPath: dir.path + "/.config/ferry/config.toml"))
        process.standardOutput = FileHandle.nullDevice
        // What it said, for a run that does not get there (seen twice in a loaded full suite, never alone).
        let said = dir.path + "/.stderr"
        _ = FileManager.default.createFile(atPath: said, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: said)
        try process.run()
        let partPath = dir.path + path + ".part"
        func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: partPath)[.size] as? Int) ?? -1 }
        try await eventually("the .part file holds \(bytes) bytes (it holds \(size()); running: \(process.isRunning); "
                             + "requests: \(server.requests(path).map { $0.header("Range") ?? "-" }); ferry said: "
                             + "\(String(decoding: FileManager.default.contents(atPath: said) ?? Data(), as: UTF8.self)))") {
            size() == bytes
        }
        return process
    }

    /// Only `--version` asks libcurl for its version line: `curl_version` starts OpenLDAP, which reads its config
    /// and loads every SASL plugin (3-4 ms of each start, and their pages). A download that is under way has
    /// none of them mapped (where libcurl is built without LDAP there is nothing to see either way).
    @Test func aStartDoesNotLoadLDAPsPlugins() async throws {
        server.route("/stalls.bin", .serve(Resource(body: Resource.randomBytes(count: 2 << 20, seed: 22), etag: "\"l\""),
                                             ServeOptions(stallAfter: 1 << 20)))
        let process = try await getUnderWay("/stalls.bin", 1 << 20)
        // Read to its end (String(contentsOfFile:) stops at the first page of a /proc file).
        let handle = FileHandle(forReadingAtPath: "/proc/\(process.processIdentifier)/maps")
        let maps = String(decoding: (try? handle?.readToEnd()) ?? Data(), as: UTF8.self)
        try? handle?.close()
        process.terminate()
        await exited(process)
        #expect(maps.contains("libcurl"), "the maps of the running download were read")
        #expect(!maps.contains("/sasl2/"), "SASL plugins were loaded: \(maps.split(separator: "\n").filter { $0.contains("sasl") })")
    }

    @Test func sigtermStopsCleanlyAndKeepsThePartFile() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 21)
        server.route("/slow.bin", .serve(Resource(body: body, etag: "\"s\""), ServeOptions(stallAfter: 3 << 20)))
        let process = try await getUnderWay("/slow.bin", 3 << 20)
        let partPath = dir.path + "/slow.bin.part"
        process.terminate()
        await exited(process)
        #expect(process.terminationStatus == 143)
        let size = try #require(FileManager.default.attributesOfItem(atPath: partPath)[.size] as? Int)
        #expect(size == 3 << 20)
        #expect(dir.files().filter { !$0.hasPrefix(".") } == ["slow.bin.part"])
        // What was kept is exactly the start of the file.
        #expect(dir.contents("slow.bin.part") == body.prefix(size))
    }
}
