@testable import FerryStorage
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// `ferry get -r`: a tree from listings nginx 1.22 wrote (Tests/Fixtures/listings/nginx-html, served as they
/// were captured), through the real binary.
@Suite struct TreeTests {
    let server: TestHTTPServer
    let dir: TempDir
    var out: String { dir.path + "/out" }
    var state: String { dir.path + "/state" }

    /// The captured tree's files (capture.sh makes it), by the path nginx's links name them with.
    static let files: [(path: String, local: String, body: Data)] = [
        ("/pub/top.txt", "top.txt", Data("top\n".utf8)),
        ("/pub/50%25%20off.txt", "50% off.txt", Data("fifty\n".utf8)),
        ("/pub/x%26y%23z%3F.txt", "x&y#z?.txt", Data("amp\n".utf8)),
        ("/pub/" + String(repeating: "n", count: 0) + "long-" + String(repeating: "n", count: 111) + ".txt",
         "long-" + String(repeating: "n", count: 111) + ".txt", Data("long\n".utf8)),
        ("/pub/a%20b/inner%20file.txt", "a b/inner file.txt", Data("inner\n".utf8)),
        ("/pub/a%20b/caf%C3%A9/na%C3%AFve%20r%C3%A9sum%C3%A9.txt", "a b/café/naïve résumé.txt", Data("naive\n".utf8)),
        ("/pub/deep/l1/l2/l3.txt", "deep/l1/l2/l3.txt", Data("deep\n".utf8)),
        ("/pub/sizes/zero.bin", "sizes/zero.bin", Data()),
        ("/pub/sizes/k.bin", "sizes/k.bin", Resource.randomBytes(count: 1000, seed: 431)),
        ("/pub/sizes/big.bin", "sizes/big.bin", Resource.randomBytes(count: 5_000_000, seed: 432)),
    ]

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        try serveListings(of: "nginx-html")
        for file in Self.files { server.route(file.path, .serve(Resource(body: file.body))) }
    }

    /// The listings one real server wrote of the tree, at the paths they were asked at.
    func serveListings(of name: String) throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/listings/" + name)
        struct Page: Decodable { var path: String; var file: String; var contentType: String; var status: Int }
        let pages = try JSONDecoder().decode([Page].self, from: Data(contentsOf: fixtures.appendingPathComponent("manifest.json")))
        for page in pages {
            let body = try Data(contentsOf: fixtures.appendingPathComponent(page.file))
            server.route(page.path, page.status == 200 ? .serve(Resource(body: body, contentType: page.contentType))
                                                       : .status(page.status, headers: [("Content-Type", page.contentType)], body: body))
        }
    }

    func get(_ path: String, _ more: [String] = []) async throws -> CommandResult {
        try await runFerry(["get", "-r", server.url(path).absoluteString, "-o", out, "--no-tui"] + more, stateDir: state)
    }

    /// Every file under `root` (with `directories`, every directory instead), relative.
    static func tree(_ root: String, directories: Bool = false) -> Set<String> {
        var found: Set<String> = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        while let path = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory)
            if isDirectory.boolValue == directories { found.insert(path) }
        }
        return found
    }

    /// A directory index page linking `names`, as a server's listing.
    static func index(_ names: [String]) -> Behavior {
        let page = "<html><body>" + names.map { "<a href=\"\($0)\">\($0)</a>" }.joined(separator: "<br>") + "</body></html>"
        return .serve(Resource(body: Data(page.utf8), contentType: "text/html"))
    }

    @Test func aTreeArrivesWithItsLayoutAndARerunRequestsNoFile() async throws {
        let first = try await get("/pub/")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("10 files in 9 directories: 10 to download, 0 already here, 0 left alone"), "\(first.stderr)")
        // The server's symlink `a b/back -> ..` lists /pub/ again: seen, and not walked.
        #expect(first.stderr.contains("a b/back/ lists a directory above it again (a symlink loop): not walked"), "\(first.stderr)")
        #expect(Self.tree(out) == Set(Self.files.map(\.local)))
        for file in Self.files {
            #expect(FileManager.default.contents(atPath: out + "/" + file.local) == file.body, "\(file.local)")
        }
        // Nothing was asked that is not in the tree: no parent, no sort link.
        #expect(server.allRequests.allSatisfy { $0.uri.hasPrefix("/pub/") && !$0.uri.contains("?") }, "\(server.allRequests.map(\.uri))")
        // `list --json` gives each file its path in the tree.
        let listed = try await runFerry(["list", "--json"], stateDir: state)
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(Set(entries.compactMap { $0["path"] as? String }) == Set(Self.files.map(\.local)), "\(listed.stdout)")

        server.clearRequests()
        let again = try await get("/pub/")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("10 files in 9 directories: 0 to download, 10 already here, 0 left alone"), "\(again.stderr)")
        // Only listings (and the PROPFIND that asks whether the server is WebDAV): nginx's give every size, so not
        // even a HEAD.
        #expect(server.allRequests.allSatisfy { $0.uri.hasSuffix("/") && ["GET", "PROPFIND"].contains($0.method) },
                "\(server.allRequests.map { "\($0.method) \($0.uri)" })")
        #expect(server.allRequests.filter { $0.method == "PROPFIND" }.map(\.uri) == ["/pub/"])
    }

    /// WsgiDAV's PROPFIND answers (`ns0:` for `DAV:`): the tree is walked by PROPFIND, every file's size known,
    /// so a re-run asks nothing but listings.
    @Test func aWebDAVServersTreeIsWalkedByPROPFIND() async throws {
        try serveListings(of: "webdav-wsgidav")
        let first = try await get("/pub/")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(Self.tree(out) == Set(Self.files.map(\.local)))
        for file in Self.files { #expect(FileManager.default.contents(atPath: out + "/" + file.local) == file.body, "\(file.local)") }
        let listings = server.allRequests.filter { $0.uri.hasSuffix("/") }
        #expect(listings.allSatisfy { $0.method == "PROPFIND" && $0.header("Depth") == "1" }, "\(listings.map { "\($0.method) \($0.uri)" })")
        server.clearRequests()
        let again = try await get("/pub/")
        #expect(again.stderr.contains("10 files in 8 directories: 0 to download, 10 already here, 0 left alone"), "\(again.stderr)")
        #expect(server.allRequests.allSatisfy { $0.method == "PROPFIND" }, "\(server.allRequests.map { "\($0.method) \($0.uri)" })")
        for file in Self.files { #expect(server.headRequests(file.path).isEmpty) }
    }

    /// A listing that arrives in pieces (here in slices every 25 ms, as rclone's chunked PROPFIND answers and a
    /// slow link send them) is read whole: corelibs' URLSession hands a completion handler the last piece alone.
    @Test func aListingSentInPiecesIsReadWhole() async throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/listings/nginx-html")
        let page = try Data(contentsOf: fixtures.appendingPathComponent("_pub_.body"))
        var options = ServeOptions(bytesPerSecond: 8 << 10)
        options.sendContentLength = false
        server.route("/pub/", .serve(Resource(body: page, contentType: "text/html"), options))
        let run = try await get("/pub/", ["--depth", "1"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("4 files in 1 directory: 4 to download"), "\(run.stderr)")
    }

    /// Python's http.server lists no sizes: a file already here is asked its size (HEAD), and no file is fetched again.
    @Test func aListingWithoutSizesAsksTheFilesAlreadyHereByHEAD() async throws {
        try serveListings(of: "python")
        let first = try await get("/pub/")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(Self.tree(out) == Set(Self.files.map(\.local)))
        #expect(server.allRequests.allSatisfy { $0.method == "GET" || ($0.method == "PROPFIND" && $0.uri == "/pub/") })
        server.clearRequests()
        let again = try await get("/pub/")
        #expect(again.stderr.contains("10 files in 9 directories: 0 to download, 10 already here, 0 left alone"), "\(again.stderr)")
        #expect(server.allRequests.allSatisfy { $0.uri.hasSuffix("/") }, "\(server.allRequests.map(\.uri))")
        for file in Self.files { #expect(server.headRequests(file.path).count == 1, "\(file.path)") }
    }

    @Test func aFileFerryDidNotWriteIsNeverReplacedAndASymlinkIsNotFollowed() async throws {
        let outside = try TempDir()
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: out + "/top.txt"))
        try FileManager.default.createSymbolicLink(atPath: out + "/a b", withDestinationPath: outside.path)
        let run = try await get("/pub/")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/top.txt") == Data("mine\n".utf8))
        #expect(run.stderr.contains("top.txt: here with 5 bytes, the server's has 4: ferry does not replace a file it did not write"), "\(run.stderr)")
        #expect(run.stderr.contains("is not a directory (a symlink is not followed)"), "\(run.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
        #expect(run.stderr.contains("10 files in 9 directories: 7 to download, 0 already here, 3 left alone"), "\(run.stderr)")

        // Said so (--replace), the user's file that differs is replaced by the server's; the symlink is still not
        // followed, and nothing lands outside.
        let replaced = try await get("/pub/", ["--replace"])
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(replaced.stderr.contains("10 files in 9 directories: 1 to download (1 replacing a different copy here), 7 already here, 2 left alone"),
                "\(replaced.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/top.txt") == Self.files.first { $0.local == "top.txt" }?.body)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasPrefix("top") } == ["top.txt"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
        // Without -r it is refused, not ignored.
        let single = try await runFerry(["get", "--replace", server.url("/pub/top.txt").absoluteString, "-o", out, "--no-tui"], stateDir: state)
        #expect(single.status == 2 && single.stderr.contains("go with -r"), "\(single.stderr)")
    }

    /// A page of links a hostile server could write: out of the tree every way, and a listing that fails once.
    @Test func aWalkStaysInItsTreeAndRetriesAListingThatFailed() async throws {
        let links = ["../pub/top.txt", "/pub/top.txt", "http://127.0.0.2:\(server.port)/evil/x.txt", "https://127.0.0.1:\(server.port)/evil/x.txt",
                     "%2E%2E/pub/top.txt", "a%2Fb.txt", "?C=N;O=D", "#top", "./", "sub/", "ok.txt", "ok.txt?download=1"]
        let page = "<html><body>" + links.map { "<a href=\"\($0)\">\($0)</a>" }.joined(separator: "<br>") + "</body></html>"
        server.route("/evil/", .serve(Resource(body: Data(page.utf8), contentType: "text/html")))
        let sub = "<html><body><a href=\"/evil/\">up</a><a href=\"/evil/sub/\">self</a><a href=\"../ok.txt\">ok</a><a href=\"deeper.txt\">d</a></body></html>"
        server.route("/evil/sub/", [.status(503), .serve(Resource(body: Data(sub.utf8), contentType: "text/html"))])
        server.route("/evil/ok.txt", .serve(Resource(body: Data("ok\n".utf8))))
        server.route("/evil/sub/deeper.txt", .serve(Resource(body: Data("deeper\n".utf8))))
        let run = try await get("/evil/")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Self.tree(out) == ["ok.txt", "sub/deeper.txt"])
        #expect(server.requests("/evil/sub/").count == 2)
        #expect(server.allRequests.allSatisfy { $0.uri.hasPrefix("/evil/") && !$0.uri.contains("?") }, "\(server.allRequests.map(\.uri))")
        #expect(server.requests("/evil/a%2Fb.txt").isEmpty)
    }

    /// The tree's layout arrives whole, its empty directories too (as cp -r, scp -r and lftp's mirror make it); with
    /// --include, only the directories that hold a file taken.
    @Test func emptyDirectoriesArriveTooUnlessAnIncludePicksFiles() async throws {
        server.route("/bare/", Self.index(["empty/", "full/"]))
        server.route("/bare/empty/", Self.index([]))
        server.route("/bare/full/", Self.index(["nothing/", "f.txt"]))
        server.route("/bare/full/nothing/", Self.index([]))
        server.route("/bare/full/f.txt", .serve(Resource(body: Data("f\n".utf8))))
        let run = try await get("/bare/")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Self.tree(out) == ["full/f.txt"])
        #expect(Self.tree(out, directories: true) == ["empty", "full", "full/nothing"])

        try FileManager.default.removeItem(atPath: out)
        let picked = try await runFerry(["get", "-r", server.url("/bare/").absoluteString, "-o", out, "--no-tui", "--include", "*.txt", "--force"],
                                        stateDir: dir.path + "/state-include")
        #expect(picked.status == 0, "\(picked.stderr)")
        #expect(Self.tree(out) == ["full/f.txt"])
        #expect(Self.tree(out, directories: true) == ["full"])
    }

    @Test func aListingThatKeepsFailingEndsTheCommandAsAFailureAfterTheRest() async throws {
        server.route("/pub/deep/", .status(500))
        let run = try await get("/pub/", ["--depth", "2"])
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("cannot list http://127.0.0.1:\(server.port)/pub/deep/: the listing answered 500"), "\(run.stderr)")
        // Depth 2: the start directory and the one below it; `a b/café` is a third level.
        #expect(Self.tree(out) == ["top.txt", "50% off.txt", "x&y#z?.txt", Self.files[3].local, "a b/inner file.txt",
                                   "sizes/zero.bin", "sizes/k.bin", "sizes/big.bin"])
    }

    /// The walk is durable: a kill -9 of the engine mid-walk, one listing under way, and `ferry run` goes on
    /// where it was: every directory whose listing was kept is not asked again, the one under way is, and every
    /// file arrives.
    @Test func aKillNineMidWalkGoesOnWithoutListingTwiceOrLosingAFile() async throws {
        let directories = (0..<6).map { "d\($0)" }
        server.route("/walk/", Self.index(directories.map { $0 + "/" }))
        var bodies: [String: Data] = [:]
        for directory in directories {
            let names = (0..<3).map { "f\($0).bin" }
            // The last directory's listing is under way when the engine is killed: its first request never ends.
            let listing = Self.index(names)
            server.route("/walk/\(directory)/", directory == "d5" ? [.hang, listing] : [listing])
            for name in names {
                let body = Resource.randomBytes(count: 1000, seed: UInt64(bodies.count + 500))
                bodies["\(directory)/\(name)"] = body
                server.route("/walk/\(directory)/\(name)", .serve(Resource(body: body)))
            }
        }
        // The hung listing outlasts any wait of the test (not retried into the second answer before the kill).
        try FileManager.default.createDirectory(atPath: dir.path + "/config/ferry", withIntermediateDirectories: true)
        try "[network]\nidle_timeout = 600\n".write(toFile: dir.path + "/config/ferry/config.toml", atomically: true, encoding: .utf8)
        let first = ChildProcess()
        first.executableURL = ferryExecutable()
        first.arguments = ["get", "-r", server.url("/walk/").absoluteString, "-o", out, "--no-tui"]
        first.environment = isolatedEnvironment(stateDir: state, configHome: dir.path + "/config")
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        let before = bodies.keys.filter { !$0.hasPrefix("d5/") }
        try await eventually("the files of d0-d4 arrived, d5 asked; here: \(Self.tree(out).sorted()), d5 asked \(server.requests("/walk/d5/").count)") {
            Set(before).isSubset(of: Self.tree(out)) && server.requests("/walk/d5/").count == 1
        }
        kill(first.processIdentifier, SIGKILL)
        await exited(first)
        #expect(!Self.tree(out).contains { $0.hasPrefix("d5/") })
        // `ferry list` says the walk still to finish, from the store.
        let listed = try await runFerry(["list"], stateDir: state)
        #expect(listed.stdout.hasSuffix("batch 1, \(server.url("/walk/").absoluteString): listing 1 dir, 15 files found\n"), "\(listed.stdout)")

        let run = try await runFerry(["run"], stateDir: state)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Self.tree(out) == Set(bodies.keys), "\(Self.tree(out).sorted())")
        for (path, body) in bodies { #expect(FileManager.default.contents(atPath: out + "/" + path) == body, "\(path)") }
        // Listed once each, but the one under way at the kill: asked again.
        func listings(_ path: String) -> Int { server.requests(path).filter { $0.method == "GET" }.count }
        #expect(listings("/walk/") == 1, "\(server.allRequests.map { "\($0.method) \($0.uri)" })")
        for directory in directories.dropLast() { #expect(listings("/walk/\(directory)/") == 1, "\(directory)") }
        #expect(listings("/walk/d5/") == 2)
        #expect(server.allRequests.filter { $0.method == "PROPFIND" }.count == 1, "the listing method is kept: \(server.allRequests.map { "\($0.method) \($0.uri)" })")
    }

    /// With an engine running, `get -r` hands it the walk and follows the tree's batch to its end: each file's
    /// path as it is done, the walk's report, and exit 1 for a listing that failed, after the rest arrived.
    @Test func getRWithAnEngineRunningFollowsTheTreesBatchToItsEnd() async throws {
        // An engine kept running by a download that stalls.
        server.route("/hold.bin", .serve(Resource(body: Resource.randomBytes(count: 1 << 20, seed: 9)), ServeOptions(stallAfter: 1000)))
        let held = try await runFerry(["get", "--detach", "-o", dir.path, server.url("/hold.bin").absoluteString], stateDir: state)
        #expect(held.status == 0, "\(held.stderr)")
        server.route("/pub/deep/", .status(500))
        let run = try await get("/pub/", ["--depth", "2"])
        let stopped = try await runFerry(["stop"], stateDir: state)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("in the running engine, batch 2"), "\(run.stderr)")
        #expect(run.stderr.contains("cannot list http://127.0.0.1:\(server.port)/pub/deep/: the listing answered 500"), "\(run.stderr)")
        #expect(run.stderr.contains("8 files in 4 directories: 8 to download, 0 already here, 0 left alone"), "\(run.stderr)")
        let files: Set<String> = ["top.txt", "50% off.txt", "x&y#z?.txt", Self.files[3].local, "a b/inner file.txt",
                                  "sizes/zero.bin", "sizes/k.bin", "sizes/big.bin"]
        #expect(Self.tree(out) == files)
        #expect(Set(run.stdout.split(separator: "\n").map { String($0.dropFirst(out.count + 1)) }) == files, "\(run.stdout)")
    }

    // MARK: put -r

    /// nginx's JSON listing of files (name, size, time).
    static func jsonListing(_ files: [(name: String, size: Int, modified: String)]) -> Behavior {
        let items = files.map { "{ \"name\":\"\($0.name)\", \"type\":\"file\", \"mtime\":\"\($0.modified)\", \"size\":\($0.size) }" }
        return .serve(Resource(body: Data(("[\n" + items.joined(separator: ",\n") + "\n]").utf8), contentType: "application/json"))
    }

    /// A re-run after the server's files changed: ferry's own copies are fetched again and replaced in place (a
    /// change of size, or of time alone), with the server's time; a file ferry did not write is left alone.
    @Test func aChangedServerFileReplacesFerrysOwnCopyAndNoOtherFile() async throws {
        let (t1, t2) = ("Fri, 27 Nov 2026 10:00:00 GMT", "Sat, 28 Nov 2026 09:30:15 GMT")
        server.route("/m/", Self.jsonListing([("a.txt", 3, t1), ("c.txt", 3, t1)]))
        server.route("/m/a.txt", .serve(Resource(body: Data("v1\n".utf8), lastModified: t1)))
        server.route("/m/c.txt", .serve(Resource(body: Data("c1\n".utf8), lastModified: t1)))
        let first = try await get("/m/")
        #expect(first.status == 0, "\(first.stderr)")
        let a = out + "/a.txt"
        #expect(FileOrigin.url(at: a) == server.url("/m/a.txt").absoluteString)
        #expect((try FileManager.default.attributesOfItem(atPath: a)[.modificationDate] as? Date) == HTTPDate.parse(t1))

        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: out + "/b.txt"))
        server.route("/m/", Self.jsonListing([("a.txt", 5, t2), ("b.txt", 2, t2), ("c.txt", 3, t2)]))
        server.route("/m/a.txt", .serve(Resource(body: Data("v2-a\n".utf8), lastModified: t2)))
        server.route("/m/b.txt", .serve(Resource(body: Data("b\n".utf8), lastModified: t2)))
        server.route("/m/c.txt", .serve(Resource(body: Data("c2\n".utf8), lastModified: t2)))
        let again = try await get("/m/")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files in 1 directory: 2 to download (2 replacing a different copy here), 0 already here, 1 left alone"), "\(again.stderr)")
        #expect(again.stderr.contains("b.txt: here with 5 bytes, the server's has 2: ferry does not replace a file it did not write"), "\(again.stderr)")
        #expect(FileManager.default.contents(atPath: a) == Data("v2-a\n".utf8))
        #expect(FileManager.default.contents(atPath: out + "/c.txt") == Data("c2\n".utf8))
        #expect(FileManager.default.contents(atPath: out + "/b.txt") == Data("mine\n".utf8))
        #expect((try FileManager.default.attributesOfItem(atPath: a)[.modificationDate] as? Date) == HTTPDate.parse(t2))
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: out)) == ["a.txt", "b.txt", "c.txt"], "\(again.stderr)")

        // Ferry's copy changed here (the server's did not): fetched again though its transfer is done in the queue.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: out + "/c.txt"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("edited\n".utf8))
        try handle.close()
        let third = try await get("/m/")
        #expect(third.status == 0, "\(third.stderr)")
        #expect(third.stderr.contains("3 files in 1 directory: 1 to download (1 replacing a different copy here), 1 already here, 1 left alone"), "\(third.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/c.txt") == Data("c2\n".utf8))
    }

    /// A WebDAV answer listing `directory` and its entries (nil size: a collection).
    static func multistatus(_ directory: String, _ entries: [(href: String, size: Int?)]) -> Data {
        func response(_ href: String, _ size: Int?) -> String {
            let type = size == nil ? "<D:resourcetype><D:collection/></D:resourcetype>" : "<D:resourcetype/><D:getcontentlength>\(size!)</D:getcontentlength>"
            return "<D:response><D:href>\(href)</D:href><D:propstat><D:prop>\(type)</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        }
        let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\">" + response(directory, nil)
            + entries.map { response($0.href, $0.size) }.joined() + "</D:multistatus>"
        return Data(body.utf8)
    }

    static func davListing(_ directory: String, _ entries: [(href: String, size: Int?)]) -> Behavior {
        .status(207, headers: [("Content-Type", "application/xml; charset=utf-8")], body: multistatus(directory, entries))
    }

    /// The tree goes up with its layout: each directory made (MKCOL) before a file is put in it, every file
    /// byte for byte, a symlink left out; again, nothing is sent that the server has.
    @Test func aTreeGoesUpToWebDAVAndAgainSendsNothingTheServerHas() async throws {
        let source = dir.path + "/src"
        let files = ["top.txt": Data("top\n".utf8), "a b/inner.txt": Data("inner\n".utf8),
                     "a b/café/x.bin": Resource.randomBytes(count: 300_000, seed: 433)]
        try writeFiles(files, under: source)
        try FileManager.default.createSymbolicLink(atPath: source + "/link", withDestinationPath: "/etc/passwd")
        server.route("/up/", Self.davListing("/up/", []))
        server.route("/up/a%20b/", .status(201))
        server.route("/up/a%20b/caf%C3%A9/", .status(201))
        for path in ["/up/top.txt", "/up/a%20b/inner.txt", "/up/a%20b/caf%C3%A9/x.bin"] { server.route(path, .status(201)) }
        let run = try await runFerry(["put", "-r", source, server.url("/up/").absoluteString, "--no-tui"], stateDir: state)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("3 files: 3 to upload, 0 already there, 2 directories made, 1 left out"), "\(run.stderr)")
        #expect(run.stderr.contains("link: not a plain file or directory (a symlink is not followed)"), "\(run.stderr)")
        let order = server.allRequests.map { "\($0.method) \($0.uri)" }
        for (directory, file) in [("/up/a%20b/", "/up/a%20b/inner.txt"), ("/up/a%20b/caf%C3%A9/", "/up/a%20b/caf%C3%A9/x.bin")] {
            let made = try #require(order.firstIndex(of: "MKCOL \(directory)"), "\(order)")
            let put = try #require(order.firstIndex(of: "PUT \(file)"), "\(order)")
            #expect(made < put, "\(order)")
        }
        for (path, body) in files {
            let uri = "/up/" + path.split(separator: "/").map { DirectoryListing.encodedSegment(String($0)) }.joined(separator: "/")
            let puts = server.requests(uri).filter { $0.method == "PUT" }
            #expect(puts.count == 1 && puts[0].bodySHA256 == sha256Hex(body), "\(uri)")
        }

        server.clearRequests()
        server.route("/up/", Self.davListing("/up/", [("/up/top.txt", 4), ("/up/a%20b/", nil)]))
        server.route("/up/a%20b/", Self.davListing("/up/a%20b/", [("/up/a%20b/inner.txt", 6), ("/up/a%20b/caf%C3%A9/", nil)]))
        server.route("/up/a%20b/caf%C3%A9/", Self.davListing("/up/a%20b/caf%C3%A9/", [("/up/a%20b/caf%C3%A9/x.bin", 300_000)]))
        let again = try await runFerry(["put", "-r", source, server.url("/up").absoluteString, "--no-tui"], stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files: 0 to upload, 3 already there, 0 directories made, 1 left out"), "\(again.stderr)")
        #expect(server.allRequests.allSatisfy { $0.method == "PROPFIND" }, "\(server.allRequests.map { "\($0.method) \($0.uri)" })")

        // Filtered (get -r's rule): only the .txt files outside `a b/` are taken; the server lacking them all. The
        // directories that hold none are not made (as get -r does not make them with --include).
        server.clearRequests()
        server.route("/up/", Self.davListing("/up/", []))
        server.route("/up/a%20b/", .status(201))
        server.route("/up/a%20b/caf%C3%A9/", .status(201))
        let some = try await runFerry(["put", "-r", source, server.url("/up/").absoluteString, "--include", "*.txt", "--exclude", "a b/*",
                                       "--no-tui"], stateDir: state)
        #expect(some.status == 0, "\(some.stderr)")
        #expect(some.stderr.contains("1 file: 1 to upload, 0 already there, 0 directories made, 1 left out"), "\(some.stderr)")
        #expect(server.allRequests.filter { $0.method == "PUT" }.map(\.uri) == ["/up/top.txt"])
        #expect(!server.allRequests.contains { $0.method == "MKCOL" }, "\(server.allRequests.map { "\($0.method) \($0.uri)" })")
        // Picking the file deep down makes its directories, parents first, and no other.
        server.clearRequests()
        let deep = try await runFerry(["put", "-r", source, server.url("/up/").absoluteString, "--include", "*.bin", "--no-tui"], stateDir: state)
        #expect(deep.status == 0, "\(deep.stderr)")
        #expect(deep.stderr.contains("1 file: 1 to upload, 0 already there, 2 directories made, 1 left out"), "\(deep.stderr)")
        #expect(server.allRequests.filter { $0.method != "PROPFIND" }.map { "\($0.method) \($0.uri)" }
                    == ["MKCOL /up/a%20b/", "MKCOL /up/a%20b/caf%C3%A9/", "PUT /up/a%20b/caf%C3%A9/x.bin"])
    }

    @Test func aServerWithoutWebDAVIsRefusedBeforeAnythingIsSent() async throws {
        let source = dir.path + "/src"
        try FileManager.default.createDirectory(atPath: source + "/sub", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: source + "/sub/x.txt"))
        server.route("/plain/", .status(405))
        let run = try await runFerry(["put", "-r", source, server.url("/plain/").absoluteString, "--no-tui"], stateDir: state)
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("does not take directories: a WebDAV PROPFIND answered 405"), "\(run.stderr)")
        #expect(server.allRequests.map(\.method) == ["PROPFIND"])
    }
}
