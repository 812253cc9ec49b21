@_spi(Testing) import FerryEngine
import FerryCore
@testable import FerryRPC
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestHTTPServer

/// aria2's JSON-RPC against a real engine over HTTP: the methods clients call, aria2's wire habits, and
/// bad input (a bad token, garbage, an oversized body) answered with JSON-RPC errors.
@Suite struct Aria2RPCTests {
    let server: TestHTTPServer
    let dir: TempDir
    let manager: TransferManager
    let rpcServer: RPCServer
    let notifier = Aria2Notifier()
    let secret = "s3cret-token"
    let endpoint: URL

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
        let notifier = self.notifier
        var configuration = testConfiguration()
        configuration.liveSettingsPath = dir.path + "/settings.json"
        manager = try TransferManager(configuration: configuration, monitor: notifier)
        let rpc = Aria2RPC(manager: manager, secret: secret, defaultDirectory: dir.path)
        rpcServer = try RPCServer(rpc: rpc, notifier: notifier, host: "127.0.0.1", port: 0, allowOrigin: nil)
        endpoint = URL(string: "http://127.0.0.1:\(rpcServer.port)/jsonrpc")!
    }

    func tearDown() {
        rpcServer.close()
        manager.shutdown()
        server.shutdown()
    }

    /// POSTs `body`; the status, the parsed JSON answer (nil when not JSON) and the response's headers.
    func post(_ body: Data, to url: URL? = nil, method: String = "POST") async throws -> (status: Int, json: Any?, headers: [AnyHashable: Any]) {
        var request = URLRequest(url: url ?? endpoint)
        request.httpMethod = method
        if method == "POST" { request.httpBody = body }
        let (data, response) = try await rpcSession.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]), http.allHeaderFields)
    }

    /// One call with the token; its `result` (or its `error` as a thrown description).
    func call(_ method: String, _ params: [Any] = [], token: Bool = true) async throws -> Any {
        let request: [String: Any] = ["jsonrpc": "2.0", "id": "t", "method": method,
                                      "params": (token ? ["token:\(secret)"] : []) + params]
        let reply = try await post(try JSONSerialization.data(withJSONObject: request))
        let object = try #require(reply.json as? [String: Any])
        #expect(object["id"] as? String == "t")
        if let error = object["error"] as? [String: Any] { throw RPCCallError(code: error["code"] as? Int ?? 0, message: error["message"] as? String ?? "") }
        return object["result"] as Any
    }

    struct RPCCallError: Error, Equatable {
        let code: Int
        let message: String
    }

    func status(_ gid: String, _ keys: [String] = []) async throws -> [String: Any] {
        try #require(try await call("aria2.tellStatus", [gid] + (keys.isEmpty ? [] : [keys])) as? [String: Any])
    }

    @Test func addUriDownloadsAndTellStatusSaysItInAria2sWords() async throws {
        defer { tearDown() }
        let body = Resource.randomBytes(count: 300 << 10, seed: 300)
        server.route("/a.bin", .serve(Resource(body: body)))
        let gid = try #require(try await call("aria2.addUri", [[server.url("/a.bin").absoluteString], ["dir": dir.path + "/sub", "out": "named.bin"]]) as? String)
        #expect(gid == "0000000000000001", "an item's id in 16 hex digits")
        try await finish(manager, [TransferID(1)])
        let done = try await status(gid)
        #expect(done["status"] as? String == "complete")
        #expect(done["totalLength"] as? String == "\(body.count)", "numbers as strings")
        #expect(done["completedLength"] as? String == "\(body.count)")
        #expect(done["dir"] as? String == dir.path + "/sub")
        let files = try #require(done["files"] as? [[String: Any]])
        #expect(files.first?["path"] as? String == dir.path + "/sub/named.bin")
        #expect(dir.contents("sub/named.bin") == body, "dir was made as -o makes it")
        let only = try await status(gid, ["gid", "status"])
        #expect(Set(only.keys) == ["gid", "status"], "keys narrow the answer")
        let uris = try #require(try await call("aria2.getUris", [gid]) as? [[String: Any]])
        #expect(uris.first?["uri"] as? String == server.url("/a.bin").absoluteString)
        let stat = try #require(try await call("aria2.getGlobalStat") as? [String: Any])
        #expect(stat["numStopped"] as? String == "1" && stat["numActive"] as? String == "0")
    }

    /// Issue 41: a web UI's More Info showed "1 piece" and no bar. A download's pieces are aria2's (1 MiB), and
    /// its `bitfield` says which are done: for a download in ranges, where each range stands.
    @Test func aSegmentedDownloadsPiecesSayWhereEachRangeStands() async throws {
        defer { tearDown() }
        let body = Resource.randomBytes(count: 8 << 20, seed: 301)
        // Each range's answer stalls past its first MiB (then the rest comes whole), so the pause finds them there.
        let stall = Behavior.serve(Resource(body: body, etag: "\"p\""), ServeOptions(stallAfter: (1 << 20) + 4096))
        server.route("/r.bin", [stall, stall, stall, stall, .serve(Resource(body: body, etag: "\"p\""))])
        let gid = try #require(try await call("aria2.addUri", [[server.url("/r.bin").absoluteString], ["split": "4"]]) as? String)
        let id = TransferID(1)
        // Each of the four 2 MiB ranges has its first MiB.
        try await eventually("each range has a piece") {
            let segments = manager.snapshot(of: id)?.segments ?? []
            return segments.count == 4 && segments.allSatisfy { $0.done >= 1 << 20 }
        }
        _ = try await call("aria2.forcePause", [gid])
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        let paused = try await status(gid, ["numPieces", "pieceLength", "bitfield"])
        #expect(paused["numPieces"] as? String == "8" && paused["pieceLength"] as? String == "\(1 << 20)")
        let bits = try #require((paused["bitfield"] as? String).flatMap { UInt8($0, radix: 16) })
        #expect(bits & 0xaa == 0xaa, "each range's first piece: \(String(bits, radix: 2))")
        #expect(bits != 0xff, "not all done yet")
        let segments = try #require(manager.snapshot(of: id)?.segments)
        #expect(paused["bitfield"] as? String == Aria2Pieces(total: 8 << 20, done: segments.map { ($0.start, $0.start + $0.done) }).bitfield)
        _ = try await call("aria2.unpause", [gid])
        try await finish(manager, [id])
        let done = try await status(gid, ["numPieces", "bitfield"])
        #expect(done["numPieces"] as? String == "8" && done["bitfield"] as? String == "ff")
    }

    /// aria2's pieces from ranges done: whole pieces only, piece 0 the highest bit, the bits past the last zero.
    @Test func piecesAreWholePiecesOfRangesDone() {
        let mib: Int64 = 1 << 20
        let pieces = Aria2Pieces(total: 5 * mib + 1, done: [(0, 2 * mib + 5), (3 * mib, 5 * mib + 1)])
        #expect(pieces.count == 6 && pieces.length == mib)
        #expect(pieces.bitfield == "dc", "11011100: pieces 0, 1, 3, 4 and the last byte's piece 5")
        #expect(Aria2Pieces(total: 3 * mib, done: [(mib / 2, 3 * mib - 1)]).bitfield == "40", "only piece 1 is whole")
        #expect(Aria2Pieces(total: nil, done: [(0, 10)]).bitfield == nil)
        #expect(Aria2Pieces(total: 0, done: []).count == 0)
        let huge = Aria2Pieces(total: 1 << 40, done: [(0, 1 << 39)])
        #expect(huge.count == 1 << 16 && huge.length == 16 * mib, "a terabyte in 65,536 pieces")
        #expect(huge.bitfield?.count == (1 << 16) / 4)
        #expect(huge.bitfield?.hasPrefix(String(repeating: "f", count: (1 << 15) / 4)) == true)
        #expect(huge.bitfield?.hasSuffix("00") == true)
    }

    /// An upload is an item like any other to a client: its progress is the bytes sent, its file the one sent.
    @Test func anUploadShowsItsBytesSentAndItsFile() async throws {
        defer { tearDown() }
        server.route("/put", .status(201))
        let body = Resource.randomBytes(count: 100 << 10, seed: 301)
        let path = dir.path + "/sent.bin"
        _ = FileManager.default.createFile(atPath: path, contents: body)
        let id = manager.add(TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: path), contentType: "application/octet-stream")),
                                          to: server.url("/put")))
        try await finish(manager, [id])
        let done = try await status(Aria2RPC.gid(id))
        #expect(done["status"] as? String == "complete")
        #expect(done["completedLength"] as? String == "\(body.count)" && done["totalLength"] as? String == "\(body.count)", "\(done)")
        #expect(done["uploadLength"] as? String == "\(body.count)")
        #expect(done["dir"] as? String == dir.path)
        #expect((done["files"] as? [[String: Any]])?.first?["path"] as? String == path)
        #expect((done["ferryUpload"] as? [String: Any])?["method"] as? String == "PUT")
    }

    /// addUri's options as browser extensions send them: `referer` and `user-agent` as headers, `out` with
    /// folders under `dir` (never above it), and `position` in the waiting list.
    @Test func addUriTakesRefererUserAgentFoldersAndPosition() async throws {
        defer { tearDown() }
        server.route("/r.bin", .serve(Resource(body: Data("r".utf8))))
        let gid = try #require(try await call("aria2.addUri", [[server.url("/r.bin").absoluteString],
            ["referer": "http://ref.example/page", "user-agent": "MyUA/1", "out": "sub/../deeper/o.bin"]]) as? String)
        try await finish(manager, [TransferID(1)])
        let request = try #require(server.requests("/r.bin").first)
        #expect(request.header("Referer") == "http://ref.example/page")
        #expect(request.header("User-Agent") == "MyUA/1")
        #expect(dir.contents("sub/deeper/o.bin") == Data("r".utf8), "folders made under dir, '..' dropped")
        #expect(try await status(gid)["errorCode"] as? String == "0")
        // aria2's referer=*: the download's own URI.
        server.route("/star.bin", .serve(Resource(body: Data("s".utf8))))
        _ = try await call("aria2.addUri", [[server.url("/star.bin").absoluteString], ["referer": "*"]])
        try await finish(manager, [TransferID(2)])
        #expect(server.requests("/star.bin").first?.header("Referer") == server.url("/star.bin").absoluteString)
        var waiting: [String] = []
        for n in 1...3 {
            waiting.append(try #require(try await call("aria2.addUri", [[server.url("/w\(n).bin").absoluteString], ["pause": "true"]]) as? String))
        }
        let first = try #require(try await call("aria2.addUri", [[server.url("/w0.bin").absoluteString], ["pause": "true"], 0]) as? String)
        let second = try #require(try await call("aria2.addUri", [[server.url("/w9.bin").absoluteString], ["pause": "true"], 2]) as? String)
        let order = try #require(try await call("aria2.tellWaiting", [0, 10, ["gid"]]) as? [[String: Any]]).compactMap { $0["gid"] as? String }
        #expect(order == [first, waiting[0], second, waiting[1], waiting[2]])
        await #expect(throws: RPCCallError(code: 1, message: "position: a number from 0")) {
            _ = try await call("aria2.addUri", [[server.url("/w8.bin").absoluteString], [:], -1])
        }
        #expect(manager.snapshot(QueueView()).items.count == 7, "a refused add adds nothing")
    }

    /// Issue 40: addUri with a position is one command (added, then placed, with the scheduler held between):
    /// the item added at the head of the waiting list is the next to start, before the items it was placed in
    /// front of, and none of them started meanwhile.
    /// Issue 41: addUri's login fields (`http-user`, `http-passwd`) are HTTP basic authentication (they were
    /// dropped), and an addUri of a transfer already in the queue adds a new item beside it, leaving the old
    /// one and its `.part` file as they are (never replaced, as `get --force` replaces).
    @Test func addUriTakesLoginFieldsAndLeavesTheSameTransferAlone() async throws {
        defer { tearDown() }
        server.route("/login.bin", .serve(Resource(body: Data("secret".utf8))))
        let gid = try #require(try await call("aria2.addUri", [[server.url("/login.bin").absoluteString],
                                                               ["http-user": "user", "http-passwd": "pa ss"]]) as? String)
        try await finish(manager, [TransferID(1)])
        #expect(try await status(gid)["status"] as? String == "complete")
        #expect(server.requests("/login.bin").first?.header("Authorization") == "Basic " + Data("user:pa ss".utf8).base64EncodedString())
        await #expect(throws: RPCCallError(code: 1, message: "http-user: a user name without ':' or line breaks")) {
            _ = try await call("aria2.addUri", [[server.url("/login.bin").absoluteString], ["http-user": "a:b"]])
        }

        server.route("/big.bin", .serve(Resource(body: Resource.randomBytes(count: 1 << 20, seed: 302)), ServeOptions(stallAfter: 64 << 10)))
        let first = try #require(try await call("aria2.addUri", [[server.url("/big.bin").absoluteString]]) as? String)
        try await eventually("the first has its .part") { FileManager.default.fileExists(atPath: dir.path + "/big.bin.part") }
        _ = try await call("aria2.pause", [first])
        let second = try #require(try await call("aria2.addUri", [[server.url("/big.bin").absoluteString], ["pause": "true"]]) as? String)
        #expect(second != first)
        #expect(try await status(first)["status"] as? String == "paused")
        #expect(FileManager.default.fileExists(atPath: dir.path + "/big.bin.part"), "the first one's partial file stays")
    }

    /// Issue 41: changeOption `out` renames a download (a web UI's "renamed-d.bin"; the file kept its old name):
    /// its `.part` file with it, and it goes on from there under the new name; a name that is taken and a path
    /// are refused, nothing changed.
    @Test func changeOptionOutRenamesADownloadAndItsPartFile() async throws {
        defer { tearDown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 303)
        let resource = Resource(body: body, etag: "\"d\"")
        server.route("/d.bin", [.serve(resource, ServeOptions(stallAfter: 128 << 10)), .serve(resource)])
        let gid = try #require(try await call("aria2.addUri", [[server.url("/d.bin").absoluteString]]) as? String)
        try await eventually("128 KiB in its .part") { (try? FileManager.default.attributesOfItem(atPath: dir.path + "/d.bin.part")[.size] as? Int) == 128 << 10 }
        _ = try await call("aria2.pause", [gid])
        try await eventually("paused") { manager.snapshot(of: TransferID(1))?.state == .paused }
        _ = FileManager.default.createFile(atPath: dir.path + "/taken.bin", contents: Data("mine".utf8))
        await #expect(throws: RPCCallError(code: 1, message: "out: taken.bin is taken in \(dir.path)")) {
            _ = try await call("aria2.changeOption", [gid, ["out": "taken.bin"]])
        }
        await #expect(throws: (any Error).self) { _ = try await call("aria2.changeOption", [gid, ["out": "../up.bin"]]) }
        // A web UI's dialog sends every option it shows, an unset name as "" (and typed values): the limit beside
        // it is applied, nothing renamed (the whole call was refused: "out: a file name").
        #expect(try await call("aria2.changeOption", [gid, ["out": "", "max-download-limit": "100K", "bt-max-peers": 55,
                                                           "async-dns": true, "header": ""]]) as? String == "OK")
        #expect((try await call("aria2.getOption", [gid]) as? [String: Any])?["max-download-limit"] as? String == "\(100 << 10)")
        #expect(FileManager.default.fileExists(atPath: dir.path + "/d.bin.part"))
        #expect(try await call("aria2.changeOption", [gid, ["out": "renamed-d.bin"]]) as? String == "OK")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/d.bin.part"))
        #expect(FileManager.default.fileExists(atPath: dir.path + "/renamed-d.bin.part"))
        #expect((try await call("aria2.getOption", [gid]) as? [String: Any])?["out"] as? String == "renamed-d.bin")
        _ = try await call("aria2.unpause", [gid])
        try await finish(manager, [TransferID(1)])
        #expect(dir.contents("renamed-d.bin") == body)
        #expect(dir.contents("taken.bin") == Data("mine".utf8))
        #expect(server.requests("/d.bin").last?.header("Range") == "bytes=\(128 << 10)-", "it went on from its .part")
    }

    /// Issue 41: a running download renamed (aria2 restarts an active one to rename it; ferry refused): its
    /// attempt stops, its `.part` file moves once nothing is in flight, and it goes on from there under the new
    /// name, each time.
    @Test func aRunningDownloadRenamedGoesOnUnderTheNewName() async throws {
        defer { tearDown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 304)
        let resource = Resource(body: body, etag: "\"m\"")
        let stall = Behavior.serve(resource, ServeOptions(stallAfter: 256 << 10))
        server.route("/m.bin", [stall, stall, .serve(resource)])
        let gid = try #require(try await call("aria2.addUri", [[server.url("/m.bin").absoluteString]]) as? String)
        let id = TransferID(1)
        try await eventually("256 KiB, running") {
            manager.snapshot(of: id)?.state == .running && manager.snapshot(of: id)?.bytesDone == 256 << 10
        }
        #expect(try await call("aria2.changeOption", [gid, ["out": "first-name.bin"]]) as? String == "OK")
        try await eventually("512 KiB under the first new name, running") {
            manager.snapshot(of: id)?.state == .running && manager.snapshot(of: id)?.bytesDone == 512 << 10
        }
        #expect(dir.files() == ["first-name.bin.part"])
        #expect(try await call("aria2.changeOption", [gid, ["out": "moved.bin"]]) as? String == "OK")
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("moved.bin") == body)
        #expect(dir.files() == ["moved.bin"], "no file under the old names, no .part left")
        #expect(server.requests("/m.bin").map { $0.header("Range") } == [nil, "bytes=\(256 << 10)-", "bytes=\(512 << 10)-"],
                "each time it went on from its .part")
        #expect((try await call("aria2.getOption", [gid]) as? [String: Any])?["out"] as? String == "moved.bin")
    }

    @Test func anAddWithAPositionStartsInItsPlace() async throws {
        defer { tearDown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 41)
        server.route("/run.bin", .serve(Resource(body: body, etag: "\"run\""), ServeOptions(stallAfter: 64 << 10)))
        for name in ["b", "c", "n"] { server.route("/\(name).bin", .serve(Resource(body: body, etag: "\"\(name)\""), ServeOptions(stallAfter: 64 << 10))) }
        _ = try await call("aria2.changeGlobalOption", [["max-concurrent-downloads": "1"]])
        let running = try #require(try await call("aria2.addUri", [[server.url("/run.bin").absoluteString]]) as? String)
        try await eventually("the first download runs") { server.requests("/run.bin").count == 1 }
        for name in ["b", "c"] { _ = try await call("aria2.addUri", [[server.url("/\(name).bin").absoluteString]]) }
        let placed = try #require(try await call("aria2.addUri", [[server.url("/n.bin").absoluteString], [:], 0]) as? String)
        let order = try #require(try await call("aria2.tellWaiting", [0, 10, ["gid"]]) as? [[String: Any]]).compactMap { $0["gid"] as? String }
        #expect(order.first == placed, "\(order)")
        #expect(server.requests("/b.bin").isEmpty && server.requests("/n.bin").isEmpty, "nothing started while the slot was taken")
        // The slot frees: the placed item is next.
        _ = try await call("aria2.pause", [running])
        try await eventually("the next download starts") { server.allRequests.count == 2 }
        #expect(server.requests("/n.bin").count == 1 && server.requests("/b.bin").isEmpty,
                "\(server.allRequests.map(\.path))")
    }

    /// A GID shorter than 16 digits is a prefix of one item's GID, as in aria2 (it was read as a number: "1"
    /// named item 1, whose GID does not begin with 1).
    @Test func aShortGIDIsAPrefix() async throws {
        defer { tearDown() }
        var gids: [String] = []
        for n in 1...16 {
            gids.append(try #require(try await call("aria2.addUri", [[server.url("/p.bin?\(n)").absoluteString], ["pause": "true"]]) as? String))
        }
        // 0000000000000010 alone begins so; 0000000000000001 to 000000000000000f all begin 000000000000000.
        #expect(try await status("000000000000001")["gid"] as? String == gids[15])
        #expect(try await call("aria2.unpause", ["000000000000001"]) as? String == gids[15])
        await #expect(throws: RPCCallError(code: 1, message: "GID 000000000000000 is ambiguous: it begins more than one GID")) {
            _ = try await status("000000000000000")
        }
        await #expect(throws: RPCCallError(code: 1, message: "GID 1 is not found")) { _ = try await status("1") }
        await #expect(throws: RPCCallError(code: 1, message: "a GID is up to 16 hex digits")) { _ = try await status("00000000000000011") }
        await #expect(throws: RPCCallError(code: 1, message: "GID ffffffffffffffff is not found")) { _ = try await status("ffffffffffffffff") }
    }

    @Test func aBadTokenIsUnauthorizedAndTheListsNeedNone() async throws {
        defer { tearDown() }
        await #expect(throws: RPCCallError(code: 1, message: "Unauthorized")) {
            _ = try await call("aria2.getGlobalStat", ["token:wrong"], token: false)
        }
        await #expect(throws: RPCCallError(code: 1, message: "Unauthorized")) {
            _ = try await call("aria2.getGlobalStat", [], token: false)
        }
        let methods = try #require(try await call("system.listMethods", token: false) as? [String])
        #expect(methods.contains("aria2.addUri") && methods.contains("system.multicall"))
        let notifications = try #require(try await call("system.listNotifications", token: false) as? [String])
        #expect(notifications.contains("aria2.onDownloadComplete"))
    }

    @Test func batchesMulticallsAnyIdAndMissingParams() async throws {
        defer { tearDown() }
        let batch: [[String: Any]] = [
            ["jsonrpc": "2.0", "id": ["any": "json"], "method": "system.listMethods"],
            ["jsonrpc": "2.0", "id": 7, "method": "system.multicall", "params": [[
                ["methodName": "aria2.getGlobalStat", "params": ["token:\(secret)"]],
                ["methodName": "aria2.getGlobalStat", "params": ["token:nope"]],
                ["methodName": "aria2.noSuchThing", "params": ["token:\(secret)"]],
            ]]],
        ]
        let reply = try await post(try JSONSerialization.data(withJSONObject: batch))
        let answers = try #require(reply.json as? [[String: Any]])
        #expect(answers.count == 2)
        #expect((answers[0]["id"] as? [String: Any])?["any"] as? String == "json", "an id may be any JSON value")
        let results = try #require(answers[1]["result"] as? [Any])
        #expect(((results[0] as? [Any])?.first as? [String: Any])?["numActive"] as? String == "0", "each result in a one-element array")
        #expect((results[1] as? [String: Any])?["message"] as? String == "Unauthorized", "inner calls carry their own token")
        #expect((results[2] as? [String: Any])?["code"] as? Int == 1)
        #expect(reply.headers["Access-Control-Allow-Origin"] == nil, "no CORS headers unless configured")
    }

    @Test func pauseUnpauseRemoveAndDownloadResults() async throws {
        defer { tearDown() }
        // Stalls after its first MiB, so it is still running whenever the test pauses it (at 256 KiB/s it ended
        // after 16 s, and a busy test process once got to the pause later than that).
        server.route("/slow.bin", .serve(Resource(body: Data(repeating: 1, count: 4 << 20)), ServeOptions(stallAfter: 1 << 20)))
        server.route("/b.bin", .serve(Resource(body: Data("b".utf8))))
        let slow = try #require(try await call("aria2.addUri", [[server.url("/slow.bin").absoluteString]]) as? String)
        let paused = try #require(try await call("aria2.addUri", [[server.url("/b.bin").absoluteString], ["pause": "true"]]) as? String)
        #expect(try await status(paused)["status"] as? String == "paused")
        try await eventually("the slow one runs") { manager.snapshot(of: TransferID(1))?.state == .running }
        let active = try #require(try await call("aria2.tellActive", [["gid"]]) as? [[String: Any]])
        #expect(active.map { $0["gid"] as? String } == [slow])
        #expect(try await call("aria2.pause", [slow]) as? String == slow)
        #expect(try await status(slow)["status"] as? String == "paused")
        let waiting = try #require(try await call("aria2.tellWaiting", [0, 10, ["gid", "status"]]) as? [[String: Any]])
        #expect(waiting.count == 2)
        // Places in the waiting list: the paused one to the top, then one down; the answer is the place it has.
        #expect(try await call("aria2.changePosition", [paused, 0, "POS_SET"]) as? Int == 0)
        #expect((try await call("aria2.tellWaiting", [0, 10, ["gid"]]) as? [[String: Any]])?.first?["gid"] as? String == paused)
        #expect(try await call("aria2.changePosition", [paused, 1, "POS_CUR"]) as? Int == 1)
        #expect(try await call("aria2.unpause", [paused]) as? String == paused)
        try await finish(manager, [TransferID(2)])
        // remove keeps the result, as aria2's does; removeDownloadResult takes it away.
        #expect(try await call("aria2.remove", [slow]) as? String == slow)
        #expect(try await status(slow)["status"] as? String == "removed")
        #expect(try await status(slow)["errorCode"] as? String == "31", "aria2's code for removed")
        let stopped = try #require(try await call("aria2.tellStopped", [-1, 1000, ["gid", "status"]]) as? [[String: Any]])
        // In the queue's order (aria2 uses the order they stopped); a negative offset counts from the end, last first.
        #expect(stopped.map { $0["gid"] as? String } == [paused, slow])
        #expect(try await call("aria2.removeDownloadResult", [slow]) as? String == "OK")
        await #expect(throws: RPCCallError(code: 1, message: "GID \(slow) is not found")) { _ = try await status(slow) }
        #expect(try await call("aria2.purgeDownloadResult") as? String == "OK")
        #expect((try await call("aria2.tellStopped", [0, 10]) as? [Any])?.isEmpty == true)
        // Issue 41: numStoppedTotal counts the results taken away too, as aria2's does (it fell to 0 after a purge).
        let stat = try #require(try await call("aria2.getGlobalStat") as? [String: Any])
        #expect(stat["numStopped"] as? String == "0" && stat["numStoppedTotal"] as? String == "2", "\(stat)")
        #expect(dir.contents("b.bin") == Data("b".utf8), "results go, files stay")
    }

    /// changePosition places an item in the waiting list (what tellWaiting lists), whatever runs or has ended
    /// between its items, and answers the place it has then; a position past either end is that end, and no
    /// number a client sends can overflow (Int.min once trapped the engine).
    @Test func changePositionPlacesAnItemInTheWaitingList() async throws {
        defer { tearDown() }
        server.route("/done.bin", .serve(Resource(body: Data("d".utf8))))
        server.route("/stall.bin", .serve(Resource(body: Data(repeating: 1, count: 1 << 20)), ServeOptions(stallAfter: 64 << 10)))
        let done = try #require(try await call("aria2.addUri", [[server.url("/done.bin").absoluteString]]) as? String)
        try await finish(manager, [TransferID(1)])
        var waiting: [String] = []
        for n in 1...2 {
            waiting.append(try #require(try await call("aria2.addUri", [[server.url("/w\(n).bin").absoluteString], ["pause": "true"]]) as? String))
        }
        let active = try #require(try await call("aria2.addUri", [[server.url("/stall.bin").absoluteString]]) as? String)
        try await eventually("the stalled one runs") { manager.snapshot(of: TransferID(4))?.state == .running }
        for n in 3...4 {
            waiting.append(try #require(try await call("aria2.addUri", [[server.url("/w\(n).bin").absoluteString], ["pause": "true"]]) as? String))
        }
        func order() async throws -> [String] {
            try #require(try await call("aria2.tellWaiting", [0, 10, ["gid"]]) as? [[String: Any]]).compactMap { $0["gid"] as? String }
        }
        let (w1, w2, w3, w4) = (waiting[0], waiting[1], waiting[2], waiting[3])
        #expect(try await order() == [w1, w2, w3, w4])
        #expect(try await call("aria2.changePosition", [w4, 0, "POS_SET"]) as? Int == 0)
        #expect(try await order() == [w4, w1, w2, w3])
        // One step down passes w1, not the running or the completed item next to it in the whole queue.
        #expect(try await call("aria2.changePosition", [w4, 1, "POS_CUR"]) as? Int == 1)
        #expect(try await order() == [w1, w4, w2, w3])
        #expect(try await call("aria2.changePosition", [w2, -1, "POS_CUR"]) as? Int == 1)
        #expect(try await order() == [w1, w2, w4, w3])
        #expect(try await call("aria2.changePosition", [w2, 0, "POS_END"]) as? Int == 3)
        #expect(try await call("aria2.changePosition", [w1, -1, "POS_END"]) as? Int == 2)
        #expect(try await order() == [w4, w3, w1, w2])
        #expect(try await call("aria2.changePosition", [w3, Int.min, "POS_CUR"]) as? Int == 0)
        #expect(try await call("aria2.changePosition", [w3, "-9223372036854775808", "POS_SET"]) as? Int == 0)
        #expect(try await call("aria2.changePosition", [w3, Int.max, "POS_CUR"]) as? Int == 3)
        #expect(try await call("aria2.changePosition", [w3, Int.max, "POS_END"]) as? Int == 3)
        #expect(try await order() == [w4, w1, w2, w3])
        await #expect(throws: RPCCallError(code: 1, message: "GID \(active) is not in the waiting list: it is active")) {
            _ = try await call("aria2.changePosition", [active, 0, "POS_SET"])
        }
        await #expect(throws: RPCCallError(code: 1, message: "GID \(done) is not in the waiting list: it is complete")) {
            _ = try await call("aria2.changePosition", [done, 0, "POS_SET"])
        }
        // The order is the queue's: the store has it, as the next engine and `ferry list` read it.
        let ranks = manager.snapshot(QueueView()).items.map { Aria2RPC.gid($0.id) }
        #expect(ranks.filter { waiting.contains($0) } == [w4, w1, w2, w3])
    }

    /// getGlobalOption's dir is where files go, as an absolute path, whatever the engine was given ("." said
    /// nothing to a client on another machine).
    @Test func theDefaultDirIsAbsolute() throws {
        let rpc = Aria2RPC(manager: manager, secret: secret, defaultDirectory: ".")
        defer { tearDown() }
        var shutdown = false
        let options = try #require(try rpc.invoke("aria2.getGlobalOption", ["token:\(secret)"], shutdown: &shutdown) as? [String: Any])
        #expect(options["dir"] as? String == URL(fileURLWithPath: FileManager.default.currentDirectoryPath).standardizedFileURL.path)
    }

    @Test func globalOptionsAndWhatFerryDoesNotDo() async throws {
        defer { tearDown() }
        #expect(try await call("aria2.changeGlobalOption", [["max-concurrent-downloads": "7", "max-overall-download-limit": "1M",
                                                             "max-download-limit": "512K", "dir": dir.path + "/new"]]) as? String == "OK")
        let options = try #require(try await call("aria2.getGlobalOption") as? [String: Any])
        #expect(options["max-concurrent-downloads"] as? String == "7")
        #expect(options["max-overall-download-limit"] as? String == "\(1 << 20)")
        #expect(options["dir"] as? String == dir.path + "/new")
        // Kept for the next engine, as the UI's + and - and `ferry jobs` keep theirs (ferry jobs said "-j of the
        // engine's start" after an RPC change).
        let kept = LiveSettings.load(dir.path + "/settings.json").settings
        #expect(kept.concurrency == 7 && kept.limits?.download == 1 << 20)
        // The adds that follow take the new dir and limit, as in aria2.
        server.route("/g.bin", .serve(Resource(body: Data("g".utf8))))
        let gid = try #require(try await call("aria2.addUri", [[server.url("/g.bin").absoluteString]]) as? String)
        let itemOptions = try #require(try await call("aria2.getOption", [gid]) as? [String: Any])
        #expect(itemOptions["dir"] as? String == dir.path + "/new")
        #expect(itemOptions["max-download-limit"] as? String == "\(512 << 10)")
        // Issue 41: every option with a meaning in ferry, with ferry's value, as aria2's strings (it answered 5 and
        // 3 keys, and a settings dialog showed its own defaults).
        let global = try #require(try await call("aria2.getGlobalOption") as? [String: Any])
        #expect(global["max-tries"] as? String == "\(manager.configuration.retry.maxRetries + 1)")
        #expect(global["timeout"] as? String == "\(Int(manager.configuration.idleTimeout))")
        #expect(global["user-agent"] as? String == manager.configuration.userAgent)
        #expect(global["continue"] as? String == "true" && global["allow-overwrite"] as? String == "false")
        #expect(global.count >= 25 && global.values.allSatisfy { $0 is String }, "\(global)")
        #expect(itemOptions["max-tries"] as? String == global["max-tries"] as? String, "an item's options include the global ones")
        #expect(itemOptions["out"] == nil, "no name was asked for")
        // Issue 41: what ferry does not change is left as it is, with OK (a web UI's dialog sends every option it
        // shows in one call); what it changes beside it is applied. A bad value of its own refuses the call whole.
        #expect(try await call("aria2.changeGlobalOption", [["max-connection-per-server": "16", "bt-max-peers": "3",
                                                             "max-concurrent-downloads": "5"]]) as? String == "OK")
        #expect(try #require(try await call("aria2.getGlobalOption") as? [String: Any])["max-concurrent-downloads"] as? String == "5")
        await #expect(throws: (any Error).self) {
            _ = try await call("aria2.changeGlobalOption", [["max-concurrent-downloads": "2", "max-overall-download-limit": "fast"]])
        }
        #expect(try #require(try await call("aria2.getGlobalOption") as? [String: Any])["max-concurrent-downloads"] as? String == "5",
                "nothing of a refused call is applied")
        await #expect(throws: RPCCallError(code: 1, message: "aria2.addTorrent: ferry does not do BitTorrent or Metalink")) {
            _ = try await call("aria2.addTorrent", ["AAAA"])
        }
        await #expect(throws: (any Error).self) { _ = try await call("aria2.addUri", [["gopher://example.com/x"]]) }
        await #expect(throws: (any Error).self) { _ = try await call("aria2.tellStatus", ["not-a-gid"]) }
    }

    @Test func garbageAnOversizedBodyAndOtherPathsAreAnsweredNotCrashedOn() async throws {
        defer { tearDown() }
        let garbage = try await post(Data("{not json".utf8))
        #expect(garbage.status == 500, "as aria2 answers a body that is not JSON")
        #expect(((garbage.json as? [String: Any])?["error"] as? [String: Any])?["code"] as? Int == -32700)
        let empty = try await post(Data("[]".utf8))
        #expect(((empty.json as? [String: Any])?["error"] as? [String: Any])?["code"] as? Int == -32600)
        let huge = try await post(Data(repeating: 0x20, count: RPCServer.maxBody + 1))
        #expect(huge.status == 413)
        #expect(((huge.json as? [String: Any])?["error"] as? [String: Any])?["code"] as? Int == -32600)
        #expect(try await post(Data(), method: "GET").status == 405)
        #expect(try await post(Data("{}".utf8), to: URL(string: "http://127.0.0.1:\(rpcServer.port)/other")!).status == 404)
        // Still answering.
        #expect((try await call("system.listMethods", token: false) as? [String])?.isEmpty == false)
    }

    @Test func theSecretIsMadeOnceAndKeptForTheUserAlone() throws {
        let settings = RPCSettings()
        let first = try settings.secret(stateDirectory: dir.path)
        #expect(first.count == 32 && first.allSatisfy(\.isHexDigit))
        #expect(try settings.secret(stateDirectory: dir.path) == first)
        let attributes = try FileManager.default.attributesOfItem(atPath: dir.path + "/rpc-secret")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        var configured = RPCSettings()
        configured.secret = "mine"
        #expect(try configured.secret(stateDirectory: dir.path) == "mine")
        #expect(throws: ConfigError.self) { try Config.parse("[rpc]\nenable = true\nlisten = \"0.0.0.0\"\n", file: "c.toml") }
        let parsed = try Config.parse("[rpc]\nenable = true\nlisten = \"0.0.0.0\"\nsecret = \"x\"\nport = 6801\n", file: "c.toml")
        #expect(parsed.rpc.enable && parsed.rpc.port == 6801 && parsed.rpc.listen == "0.0.0.0")
        tearDown()
    }

    // MARK: WebSocket

    func json(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    /// Issue 41: a page of another origin gets no WebSocket and no answer (aria2 takes calls from any page; a
    /// browser sends them to any address without asking): clients that send no Origin, the RPC's own origin and
    /// the one `allow_origin` names are answered.
    @Test func aPageOfAnotherOriginIsRefused() async throws {
        defer { tearDown() }
        let evil = try WebSocketTestClient(port: rpcServer.port, origin: "https://evil.example")
        defer { evil.close() }
        #expect(!evil.upgraded)
        let own = try WebSocketTestClient(port: rpcServer.port, origin: "http://127.0.0.1:\(rpcServer.port)")
        defer { own.close() }
        #expect(own.upgraded)
        let plain = try WebSocketTestClient(port: rpcServer.port)
        defer { plain.close() }
        #expect(plain.upgraded)
        // A plain POST from the page is refused before it is carried out (its answer could not be read, but the
        // call would have been made).
        server.route("/x.bin", .serve(Resource(body: Data("x".utf8))))
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("https://evil.example", forHTTPHeaderField: "Origin")
        request.httpBody = try JSONSerialization.data(withJSONObject: [
            "jsonrpc": "2.0", "id": "e", "method": "aria2.addUri", "params": ["token:\(secret)", [server.url("/x.bin").absoluteString]]])
        let (data, response) = try await rpcSession.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 403)
        let refusal = (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["error"] as? [String: Any]
        #expect((refusal?["message"] as? String)?.hasPrefix("a page of https://evil.example may not use this RPC") == true, "\(String(decoding: data, as: UTF8.self))")
        #expect(manager.snapshot().items.isEmpty, "nothing was added")
        // The origin allow_origin names is answered.
        let allowing = try RPCServer(rpc: Aria2RPC(manager: manager, secret: secret, defaultDirectory: dir.path), host: "127.0.0.1", port: 0,
                                     allowOrigin: "https://ui.example")
        defer { allowing.close() }
        let named = try WebSocketTestClient(port: allowing.port, origin: "https://ui.example")
        defer { named.close() }
        #expect(named.upgraded)
        let other = try WebSocketTestClient(port: allowing.port, origin: "https://evil.example")
        defer { other.close() }
        #expect(!other.upgraded)
    }

    @Test func overWebSocketCallsAreAnsweredAndNotificationsPushed() async throws {
        defer { tearDown() }
        let client = try WebSocketTestClient(port: rpcServer.port)
        defer { client.close() }
        #expect(client.upgraded)
        server.route("/ok.bin", .serve(Resource(body: Data("ok".utf8)), ServeOptions(delayBeforeHead: 0.3)))
        server.route("/missing.bin", .status(404))
        client.send(#"{"jsonrpc":"2.0","id":"w1","method":"aria2.addUri","params":["token:\#(secret)",["\#(server.url("/ok.bin").absoluteString)"]]}"#)
        let added = try #require(await client.waitFor { json($0)?["id"] as? String == "w1" })
        let gid = try #require(json(added)?["result"] as? String)
        func notified(_ method: String, _ gid: String) async -> Bool {
            await client.waitFor { text in
                guard let message = json(text), message["method"] as? String == method, message["id"] == nil else { return false }
                return ((message["params"] as? [[String: Any]])?.first?["gid"] as? String) == gid
            } != nil
        }
        #expect(await notified("aria2.onDownloadStart", gid))
        #expect(await notified("aria2.onDownloadComplete", gid))
        client.send(#"{"jsonrpc":"2.0","id":"w2","method":"aria2.addUri","params":["token:\#(secret)",["\#(server.url("/missing.bin").absoluteString)"]]}"#)
        let second = try #require(await client.waitFor { json($0)?["id"] as? String == "w2" })
        let failing = try #require(json(second)?["result"] as? String)
        #expect(await notified("aria2.onDownloadError", failing))
        #expect(try await status(failing)["errorCode"] as? String == "3", "aria2's code for a resource not found")
        // Pause and stop (aria2's remove) of a slow one.
        server.route("/slow.bin", .serve(Resource(body: Data(repeating: 2, count: 4 << 20)), ServeOptions(bytesPerSecond: 128 << 10)))
        let slow = try #require(try await call("aria2.addUri", [[server.url("/slow.bin").absoluteString]]) as? String)
        #expect(await notified("aria2.onDownloadStart", slow))
        _ = try await call("aria2.pause", [slow])
        #expect(await notified("aria2.onDownloadPause", slow))
        _ = try await call("aria2.unpause", [slow])
        try await eventually("running again") { manager.snapshot(of: TransferID(3))?.state == .running }
        _ = try await call("aria2.remove", [slow])
        #expect(await notified("aria2.onDownloadStop", slow))
        // A batch over WebSocket, and a bad token.
        client.send(#"[{"jsonrpc":"2.0","id":"b1","method":"system.listMethods"},{"jsonrpc":"2.0","id":"b2","method":"aria2.getGlobalStat","params":["token:bad"]}]"#)
        let batch = try #require(await client.waitFor { $0.contains("\"b2\"") })
        #expect(batch.contains("Unauthorized"))
    }

    /// Notifications as aria2 sends them: one start for a download that waits out retries, one stop for a
    /// download in ranges (each range's cancel once told it), a start again after an unpause, and nothing for a
    /// waiting item paused or removed. Notifications go out in the engine's order: a later item's start marks
    /// the point by which every earlier one has come.
    @Test func notificationsAreToldOnceAsAria2TellsThem() async throws {
        defer { tearDown() }
        let client = try WebSocketTestClient(port: rpcServer.port)
        defer { client.close() }
        // Each wait a second long (Retry-After), so that the test sees it; the other holds the slot past it.
        let busy = Behavior.status(503, headers: [("Retry-After", "1")])
        server.route("/flaky.bin", [busy, busy, .serve(Resource(body: Data("f".utf8)))])
        server.route("/ranges.bin", .serve(Resource(body: Data(repeating: 3, count: 8 << 20), etag: "\"r\""), ServeOptions(bytesPerSecond: 256 << 10)))
        server.route("/marker.bin", .serve(Resource(body: Data("m".utf8))))
        func said(_ method: String, _ gid: String) -> Int {
            client.messages.filter { text in
                guard let message = json(text), message["method"] as? String == method else { return false }
                return ((message["params"] as? [[String: Any]])?.first?["gid"] as? String) == gid
            }.count
        }
        func add(_ path: String, _ options: [String: Any] = [:]) async throws -> String {
            try #require(try await call("aria2.addUri", [[server.url(path).absoluteString], options]) as? String)
        }
        /// Every notification the engine made before this returns has reached the client.
        func mark(_ n: Int) async throws {
            let marker = try await add("/marker.bin?\(n)")
            #expect(await client.waitFor { json($0)?["method"] as? String == "aria2.onDownloadComplete" && $0.contains(marker) } != nil)
        }
        // One at a time: while the flaky one waits out its retries, the other takes the slot, so the flaky one
        // is queued again before it runs again; still one start.
        manager.setConcurrency(maxConcurrent: 1)
        server.route("/other.bin", .serve(Resource(body: Data("o".utf8)), ServeOptions(delayBeforeHead: 2)))
        let flaky = try await add("/flaky.bin")
        // Its retry count stays once it failed (a state that lasts a second can be missed by a busy test).
        try await eventually("the flaky one failed once") { (manager.snapshot(of: TransferID(1))?.retries ?? 0) >= 1 }
        let other = try await add("/other.bin")
        try await finish(manager, [TransferID(1), TransferID(2)])
        manager.setConcurrency(maxConcurrent: 4)
        try await mark(1)
        #expect(said("aria2.onDownloadStart", flaky) == 1, "retries are within one start")
        #expect(said("aria2.onDownloadComplete", flaky) == 1)
        #expect(said("aria2.onDownloadStart", other) == 1)

        let ranges = try await add("/ranges.bin", ["split": "4"])
        let id = TransferID(4)
        try await eventually("its ranges run") { (manager.snapshot(of: id)?.segments?.count ?? 0) == 4 && manager.snapshot(of: id)?.state == .running }
        _ = try await call("aria2.pause", [ranges])
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        _ = try await call("aria2.unpause", [ranges])
        try await eventually("running again") { manager.snapshot(of: id)?.state == .running }
        _ = try await call("aria2.remove", [ranges])
        try await eventually("removed") { manager.snapshot(of: id)?.state == .cancelled }
        try await mark(2)
        #expect(said("aria2.onDownloadStart", ranges) == 2, "started, and started again after the unpause")
        #expect(said("aria2.onDownloadPause", ranges) == 1)
        #expect(said("aria2.onDownloadStop", ranges) == 1, "one stop, whatever its ranges")

        let idle = try await add("/marker.bin?idle", ["pause": "true"])
        _ = try await call("aria2.remove", [idle])
        try await mark(3)
        #expect(said("aria2.onDownloadPause", idle) == 0 && said("aria2.onDownloadStop", idle) == 0, "it never ran")
    }

    /// Over HTTP the status says what the body does, as aria2's: a call that failed is 400 (a body that is not
    /// JSON 500), so that a client that looks only at the status (AriaNg) sees the error; a batch is 200.
    @Test func anErrorIsAnHTTPErrorAsAria2SendsIt() async throws {
        defer { tearDown() }
        func status(_ body: String) async throws -> Int { try await post(Data(body.utf8)).status }
        #expect(try await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat","params":["token:\#(secret)"]}"#) == 200)
        #expect(try await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat","params":["token:bad"]}"#) == 400)
        #expect(try await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:\#(secret)","00000000000000ff"]}"#) == 400)
        #expect(try await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:\#(secret)"]}"#) == 400)
        #expect(try await status("garbage") == 500)
        #expect(try await status("[]") == 400)
        #expect(try await status(#"[{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:\#(secret)"]}]"#) == 200)
    }

    @Test func aWebSocketClientThatSendsBinaryOrTooMuchIsDropped() async throws {
        defer { tearDown() }
        let binary = try WebSocketTestClient(port: rpcServer.port)
        defer { binary.close() }
        binary.sendBinary([1, 2, 3])
        try await eventually("the binary client is dropped") { binary.closed }
        let big = try WebSocketTestClient(port: rpcServer.port)
        defer { big.close() }
        big.send(String(repeating: " ", count: RPCServer.maxBody + 10))
        try await eventually("the oversized message's client is dropped") { big.closed }
        // The server goes on.
        let fine = try WebSocketTestClient(port: rpcServer.port)
        defer { fine.close() }
        fine.send(#"{"jsonrpc":"2.0","id":"f","method":"system.listMethods"}"#)
        #expect(await fine.waitFor { $0.contains("aria2.addUri") } != nil)
    }

    /// Every method `system.listMethods` names is answered, over HTTP and over WebSocket: by its result, or by
    /// an error of its own (never "No such method", never a crash).
    @Test func everyListedMethodIsAnsweredOverBothTransports() async throws {
        defer { tearDown() }
        server.route("/e.bin", .serve(Resource(body: Data(repeating: 3, count: 1 << 20)), ServeOptions(bytesPerSecond: 256 << 10)))
        let url = server.url("/e.bin").absoluteString
        let gid = try #require(try await call("aria2.addUri", [[url], ["pause": "true"]]) as? String)
        func params(_ method: String) -> [Any] {
            switch method {
            case "aria2.addUri": [[url], ["pause": "true"]]
            case "aria2.tellStatus", "aria2.getUris", "aria2.getFiles", "aria2.getOption", "aria2.pause", "aria2.forcePause",
                 "aria2.unpause", "aria2.remove", "aria2.forceRemove", "aria2.removeDownloadResult": [gid]
            case "aria2.tellWaiting", "aria2.tellStopped": [0, 10]
            case "aria2.changePosition": [gid, 0, "POS_SET"]
            case "aria2.changeOption": [gid, ["max-download-limit": "1M"]]
            case "aria2.changeGlobalOption": [["max-concurrent-downloads": "3"]]
            default: []
            }
        }
        let methods = try #require(try await call("system.listMethods", token: false) as? [String])
        #expect(methods.count >= 30)
        let socket = try WebSocketTestClient(port: rpcServer.port)
        defer { socket.close() }
        for (index, method) in methods.enumerated() where method != "system.multicall" && !method.hasSuffix("hutdown") {
            do {
                _ = try await call(method, params(method), token: !method.hasPrefix("system."))
            } catch let error as RPCCallError {
                #expect(!error.message.hasPrefix("No such method") && error.message != "Unauthorized", "\(method): \(error.message)")
            }
            let request: [String: Any] = ["jsonrpc": "2.0", "id": index, "method": method,
                                          "params": (method.hasPrefix("system.") ? [] : ["token:\(secret)"]) + params(method)]
            socket.send(String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self))
            let answer = try #require(await socket.waitFor { json($0)?["id"] as? Int == index }, "\(method) over WebSocket")
            #expect(!answer.contains("No such method"), "\(method) over WebSocket: \(answer)")
        }
        // Shutdown is answered, then the engine is told (once).
        #expect(try await call("aria2.shutdown") as? String == "OK")
    }

    @Test func aWebSocketClientThatStopsReadingIsDroppedAndTheOthersGoOn() async throws {
        defer { tearDown() }
        let stuck = try WebSocketTestClient(port: rpcServer.port)
        defer { stuck.close() }
        let reader = try WebSocketTestClient(port: rpcServer.port)
        defer { reader.close() }
        try await eventually("both connected") { notifier.clients == 2 }
        stuck.stopReading()
        // 40 MB: far more than the socket buffers and the 4 MiB allowed unread hold (a long gid makes each
        // notification 1 KB).
        let long = String(repeating: "f", count: 1000)
        let start = Date()
        for _ in 0..<40_000 { notifier.notify("aria2.onDownloadStart", gid: long) }
        print("Aria2RPCTests: 40,000 notifications of 1 KB sent in \(Date().timeIntervalSince(start)) s")
        try await eventually("the client that stopped reading is dropped") { notifier.clients == 1 }
        try await eventually("the reading client got them") { reader.messages.count == 40_000 }
    }

    /// A tree (`get -r`, walked by the engine) is one download to aria2's clients, as a multi-file torrent is: one
    /// GID (its batch with the top bit set) in the list of its state, its files' sums and files, and pause,
    /// unpause, a limit (the tree's own, its files share it) and remove act on the whole batch.
    @Test func aTreeIsOneDownloadOfManyFilesAndItsGIDActsOnTheWholeBatch() async throws {
        defer { tearDown() }
        let names = ["a.bin", "b.bin", "c.bin"]
        let page = "<html><body>" + (names + ["sub/"]).map { "<a href=\"\($0)\">\($0)</a>" }.joined() + "</body></html>"
        server.route("/pub/", .serve(Resource(body: Data(page.utf8), contentType: "text/html")))
        server.route("/pub/sub/", .serve(Resource(body: Data("<a href=\"d.bin\">d</a>".utf8), contentType: "text/html")))
        // Each answer stalls half-way and stays open: no file ends before the test has steered the tree, however
        // busy the machine.
        for name in names + ["sub/d.bin"] {
            server.route("/pub/" + name, .serve(Resource(body: Resource.randomBytes(count: 200_000, seed: 7)), ServeOptions(stallAfter: 100_000)))
        }
        let out = dir.path + "/tree"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let job = TreeJob(root: server.url("/pub/"), directory: out, template: TransferSpec(download: server.url("/pub/"), directory: out))
        let batch = try #require(try manager.perform(.walk(job)).batch)
        let gid = String(format: "%016llx", UInt64(batch) | (1 << 63))
        try await eventually("the walk ended") { manager.walks.first?.ended == true }
        try await eventually("a file runs") { manager.treeRow(batch: batch)?.state == .running }
        // An index page says no sizes: each file's comes with its answer (a busy CI machine asked before any came).
        try await eventually("every file's size known") { manager.treeRow(batch: batch)?.bytesExpected == 800_000 }

        let active = try #require(try await call("aria2.tellActive", [["gid", "status", "files", "dir", "totalLength"]]) as? [[String: Any]])
        #expect(active.map { $0["gid"] as? String } == [gid], "the tree, once, not its files")
        #expect(active[0]["dir"] as? String == out)
        #expect(active[0]["totalLength"] as? String == "800000", "its files' sizes summed")
        let files = try #require(active[0]["files"] as? [[String: Any]])
        #expect(files.count == 4 && files.map { $0["index"] as? String } == ["1", "2", "3", "4"])
        #expect(Set(files.compactMap { $0["path"] as? String }.map { ($0 as NSString).lastPathComponent }) == ["a.bin", "b.bin", "c.bin", "d.bin"])
        let waiting = try #require(try await call("aria2.tellWaiting", [0, 100, ["gid"]]) as? [[String: Any]])
        #expect(!waiting.contains { $0["gid"] as? String == gid }, "a tree with a file running is active, not waiting too")

        #expect(try await call("aria2.pause", [gid]) as? String == gid)
        #expect(manager.snapshot(QueueView(batch: batch)).items.allSatisfy { $0.state == .paused })
        #expect(try await status(gid, ["status"])["status"] as? String == "paused")
        #expect(try await call("aria2.changeOption", [gid, ["max-download-limit": "50K"]]) as? String == "OK")
        let treeLimit = manager.treeRow(batch: batch)?.rateLimit
        #expect(treeLimit == Int64(50 << 10), "\(String(describing: treeLimit))")
        #expect((try await call("aria2.getOption", [gid]) as? [String: Any])?["max-download-limit"] as? String == "\(50 * 1024)")
        #expect(manager.snapshot(QueueView(batch: batch)).items.allSatisfy { $0.rateLimit == nil }, "the tree's, not each file's")
        #expect(try await call("aria2.unpause", [gid]) as? String == gid)
        #expect(manager.snapshot(QueueView(batch: batch)).items.allSatisfy { $0.state != .paused })
        #expect(try await call("aria2.forceRemove", [gid]) as? String == gid)
        #expect(try await status(gid, ["status"])["status"] as? String == "removed")
        #expect(try await call("aria2.removeDownloadResult", [gid]) as? String == "OK")
        await #expect(throws: RPCCallError.self) { try await call("aria2.tellStatus", [gid]) }
        #expect(manager.snapshot(QueueView(batch: batch)).items.isEmpty)
    }

}

/// The tests' client of the RPC endpoint (not `URLSession.shared`, whose configuration makes a cache directory).
private let rpcSession = URLSession(configuration: .keepingNothing)
