@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// Uploads that resume: the IETF protocol against swift-nio-extras' server (NIOResumableUpload), tus 1.0
/// against the tests' tus server, and the same upload against a server that knows neither. The servers count
/// every body byte they receive: what was sent twice shows.
@Suite struct ResumableUploadTests {
    let dir: TempDir

    init() throws {
        dir = try TempDir()
    }

    func file(_ name: String, _ data: Data) -> String {
        let path = dir.path + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: data)
        return path
    }

    func spec(_ path: String, _ url: URL, _ kind: ResumableProtocol?, method: String = "PUT") -> TransferSpec {
        TransferSpec(upload: UploadSpec(method: method, body: .raw(.file(path: path), contentType: "application/octet-stream"),
                                        resumable: kind), to: url)
    }

    /// The server's URL an upload of `kind` goes to (tus: its creation endpoint).
    func target(_ server: TestUploadServer) -> URL {
        server.kind == .tus ? server.url("/files") : server.url("/up/data.bin")
    }

    /// Where the finished upload is stored on the server.
    func storedPath(_ server: TestUploadServer) -> String {
        server.kind == .tus ? "/files/1" : "/up/data.bin"
    }

    func methods(_ server: TestUploadServer) -> [String] { server.requests.map(\.method) }

    /// An upload the server holds part-way (it stopped reading after 1 MiB), its location known to the item.
    struct Held {
        let server: TestUploadServer
        let manager: TransferManager
        let id: TransferID
        let path: String
        let body: Data
        func shutdown() {
            manager.shutdown()
            server.shutdown()
        }
    }

    func held(_ kind: TestUploadServer.Kind, seed: UInt64) async throws -> Held {
        let server = try TestUploadServer(kind)
        let body = Resource.randomBytes(count: 3 << 20, seed: seed)
        let path = file("data.bin", body)
        server.holdOnce(after: 1 << 20)
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        let id = manager.add(spec(path, target(server), kind == .tus ? .tus : .ietf))
        try await eventually("the server holds the upload") { server.held == 1 }
        try await eventually("the location is kept") { manager.snapshot(of: id)?.resumable?.location != nil }
        return Held(server: server, manager: manager, id: id, path: path, body: body)
    }

    /// Cuts the connection the server holds once the item knows the upload's location (a cut before the
    /// client read the 104 would make it a plain upload's cut: sent again whole, as it should be).
    func cutOnceTheLocationIsKnown(_ server: TestUploadServer, _ manager: TransferManager, _ id: TransferID) async throws {
        try await eventually("the server holds the upload") { server.held == 1 }
        try await eventually("the location is kept") { manager.snapshot(of: id)?.resumable?.location != nil }
        server.cutHeld()
    }

    /// Pauses the held upload and waits until its attempt has stopped.
    func pause(_ held: Held) async throws {
        held.manager.pause(held.id)
        try await eventually("paused") { held.manager.snapshot(of: held.id)?.state == .paused }
    }

    // MARK: A cut part-way

    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func anUploadCutPartWayGoesOnFromTheServersOffset(_ kind: TestUploadServer.Kind) async throws {
        let server = try TestUploadServer(kind)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 6 << 20, seed: 250)
        let path = file("data.bin", body)
        // A server that keeps what arrived of a cut request (tusd on a disk); one that keeps nothing is
        // aCutToAServerThatKeepsNothingCostsAtMostOneChunk's.
        server.keepsCutPatches = true
        server.holdOnce(after: 2 << 20)
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), kind == .tus ? .tus : .ietf))
        try await cutOnceTheLocationIsKnown(server, manager, id)
        try await finish(manager, [id])

        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        let stored = try #require(server.stored(storedPath(server)))
        #expect(stored.data == body)
        // Every byte the server received was kept: nothing was sent twice.
        #expect(server.bodyBytes == Int64(body.count))
        let resumable = try #require(item.resumable)
        #expect(resumable.kind == (kind == .tus ? .tus : .ietf))
        #expect(resumable.location?.hasPrefix("http://127.0.0.1:\(server.port)/") == true)
        let resumption = try #require(resumable.resumptions.first)
        #expect(resumption.offset > 1 << 20 && resumption.offset < 2 << 20)
        // The PATCH went on from the offset the server gave.
        let patch = try #require(server.requests.last { $0.method == "PATCH" })
        #expect(patch.header("Upload-Offset") == String(resumption.offset))
        #expect(patch.header("Content-Length") == String(Int64(body.count) - resumption.offset))
        if kind == .ietf {
            #expect(methods(server) == ["PUT", "HEAD", "PATCH"])
            #expect(server.requests[0].header("Upload-Draft-Interop-Version") == "6")
            #expect(server.requests[0].header("Upload-Complete") == "?1")
            #expect(patch.header("Content-Type") == "application/partial-upload")
            // The application's answer at the end, as the item's response.
            #expect(item.response?.status == 201)
            #expect(String(decoding: item.response?.body ?? Data(), as: UTF8.self) == "stored \(body.count) bytes\n")
        } else {
            #expect(methods(server) == ["POST", "PATCH", "HEAD", "PATCH"])
            #expect(server.requests[0].header("Upload-Length") == String(body.count))
            #expect(server.requests[0].header("Tus-Resumable") == "1.0.0")
            #expect(patch.header("Content-Type") == "application/offset+octet-stream")
        }
        // The attempt after the cut shows where it went on from.
        #expect(item.attempts.last?.fromOffset == resumption.offset)
    }

    // MARK: Chunks

    /// Issue 41: an upload's bytes go in PATCHes of at most a chunk, so a cut costs at most one chunk whatever
    /// the server keeps: here a tus server that keeps nothing of a cut PATCH (PyPI's resumable-upload, the
    /// official Node server) sent the whole PATCH again, 1.5 x the file for a cut at half; and IETF appends.
    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aCutToAServerThatKeepsNothingCostsAtMostOneChunk(_ kind: TestUploadServer.Kind) async throws {
        let server = try TestUploadServer(kind)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 12 << 20, seed: 252)
        let path = file("data.bin", body)
        let chunk: Int64 = 1 << 20
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: chunk, grows: false)
        // IETF: the upload itself goes whole (a server without the protocol takes it as a plain upload); the
        // cut there, then its appends are chunks. tus: a cut half-way through its PATCHes.
        server.holdOnce(after: 6 << 20)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), kind == .tus ? .tus : .ietf))
        try await cutOnceTheLocationIsKnown(server, manager, id)
        try await finish(manager, [id])

        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
        let patches = server.requests.filter { $0.method == "PATCH" }
        let lengths = patches.compactMap { $0.header("Content-Length").flatMap(Int64.init) }
        #expect(lengths.count == patches.count && lengths.allSatisfy { $0 <= chunk }, "\(lengths)")
        if kind == .tus {
            // At most the chunk cut (and less than a chunk more: what was in flight) sent twice.
            #expect(server.bodyBytes <= Int64(body.count) + chunk, "\(server.bodyBytes) bytes for a \(body.count)-byte file")
            #expect(patches.count >= 12)
        } else {
            // Every append but the last says more follows.
            #expect(patches.dropLast().allSatisfy { $0.header("Upload-Complete") == "?0" })
            #expect(patches.last?.header("Upload-Complete") == "?1")
        }
    }

    /// Issue 41: an IETF server that keeps nothing of a cut request (as many tus servers do). The creation carries
    /// the whole file (a server without the protocol takes it as a plain upload), so what it had sent when cut is
    /// lost; the appends after it are chunks, and a cut append costs at most one chunk.
    @Test func anIETFServerThatKeepsNothingOfACutRequestCostsAtMostOneChunkPerCutAppend() async throws {
        let server = try TestUploadServer(.ietfKeepsNothing)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 8 << 20, seed: 256)
        let path = file("data.bin", body)
        let chunk: Int64 = 1 << 20
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: chunk, grows: false)
        server.holdOnce(after: 512 << 10)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), .ietf))
        try await eventually("the server holds the creation") { server.held == 1 }
        try await eventually("the location is kept") { manager.snapshot(of: id)?.resumable?.location != nil }
        let lost = server.bodyBytes
        // The next connection (the resumption's) is held in its third append, and cut there.
        server.holdOnce(after: 2 * chunk + chunk / 2)
        server.cutHeld()
        try await eventually("the server holds an append") { server.held == 2 }
        server.cutHeld()
        try await finish(manager, [id])

        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
        let patches = server.requests.filter { $0.method == "PATCH" }
        // Nothing of the cut creation was kept: the appends begin at 0; nothing of the cut append either: they go
        // on from the two appends taken whole.
        #expect(patches.first?.header("Upload-Offset") == "0")
        #expect(item.resumable?.resumptions.map(\.offset) == [0, 2 * chunk], "\(item.resumable?.resumptions.map(\.offset) ?? [])")
        #expect(patches.compactMap { $0.header("Content-Length").flatMap(Int64.init) }.allSatisfy { $0 <= chunk })
        #expect(lost > 0 && lost <= chunk)
        let again = server.bodyBytes - lost - Int64(body.count)
        #expect(again > 0 && again <= chunk, "\(again) bytes of appends sent twice")
        #expect(methods(server).prefix(2) == ["PUT", "HEAD"])
    }

    /// Issue 41: once a host has answered a creation with a 104, this engine's next upload to it carries only the
    /// first chunk in its creation (`Upload-Complete: ?0`): a cut anywhere then costs at most one chunk, even on a
    /// server that keeps nothing of a cut request. (Before, the creation carried the whole file: cut at 1.25 MiB,
    /// all of that was sent again.)
    @Test func toAHostSeenToSpeakTheDraftTheCreationCarriesOneChunk() async throws {
        let server = try TestUploadServer(.ietfKeepsNothing)
        defer { server.shutdown() }
        let chunk: Int64 = 1 << 20
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: chunk, grows: false)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        // The connection that has taken 1.5 MiB is cut: past the first upload, in the second.
        server.cutOnce(after: 3 * chunk / 2)
        let small = Resource.randomBytes(count: 256 << 10, seed: 257)
        let first = manager.add(spec(file("small.bin", small), server.url("/up/small.bin"), .ietf))
        try await finish(manager, [first])
        #expect(manager.snapshot(of: first)?.state == .completed)
        let creations = { server.requests.filter { $0.method == "PUT" } }
        #expect(creations().first?.header("Upload-Complete") == "?1", "the first creation carries the whole file")

        let body = Resource.randomBytes(count: 4 << 20, seed: 258)
        let id = manager.add(spec(file("data.bin", body), target(server), .ietf))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
        let creation = try #require(creations().dropFirst().first)
        #expect(creation.header("Upload-Complete") == "?0")
        #expect(creation.header("Content-Length") == String(chunk) && creation.header("Upload-Length") == String(body.count))
        let again = server.bodyBytes - Int64(small.count) - Int64(body.count)
        #expect(again > 0 && again <= chunk, "\(again) bytes sent twice")
    }

    /// `body` as a file, put to a tus `server` through `manager`: completed, the server's copy the file.
    func uploadsWhole(_ body: Data, to server: TestUploadServer, _ manager: TransferManager) async throws {
        let id = manager.add(spec(file("data.bin", body), target(server), .tus))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
    }

    /// Issue 41: a server that refuses PATCHes over 6 MiB (Supabase's tus endpoint) takes the default chunks. Through a
    /// link whose answers come 20 ms after the last byte they would grow, but a grown chunk is at most 4 % of the
    /// upload (a cut to a server that keeps nothing costs under 5 %): a 20 MiB file's stay at the start size.
    @Test func aServerThatRefusesLargePatchesTakesTheDefaultChunks() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        server.largestPatch = 6 << 20
        server.patchAnswerDelay = .milliseconds(20)
        let body = Resource.randomBytes(count: 20 << 20, seed: 253)
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        try await uploadsWhole(body, to: server, manager)
        #expect(chunks(server, over: 6 << 20).lengths == [6 << 20, 6 << 20, 6 << 20, 2 << 20])
        #expect(server.bodyBytes == Int64(body.count))
    }

    /// The PATCHes' lengths; the offsets of those over `limit` (libcurl sends a request again on a new connection
    /// when the server reset the first before it read any of the body: one chunk, two heads at the server); and
    /// the lengths after the last of those.
    func chunks(_ server: TestUploadServer, over limit: Int64) -> (lengths: [Int64], grownAt: Set<String>, after: [Int64]) {
        let patches = server.requests.filter { $0.method == "PATCH" }
        let lengths = patches.map { $0.header("Content-Length").flatMap(Int64.init) ?? 0 }
        let grown = patches.indices.filter { lengths[$0] > limit }
        return (lengths, Set(grown.compactMap { patches[$0].header("Upload-Offset") }), grown.last.map { Array(lengths[($0 + 1)...]) } ?? [])
    }

    /// Issue 41: on a fast link each chunk's round trip was a large share (6 MiB chunks through 20 ms: 1.69 x one
    /// PATCH): chunks grow until the wait for an answer is 2 % of a chunk's time; a server that refuses a grown
    /// one (413) gets the start size from then on, and the bytes it refused go again in those.
    @Test func aFastLinksChunksGrowAndARefusedOneGoesBackToTheStart() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        server.largestPatch = 4 << 20
        server.patchAnswerDelay = .milliseconds(50)
        let body = Resource.randomBytes(count: 12 << 20, seed: 254)
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: 1 << 20, grows: true, cutShare: 1)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        try await uploadsWhole(body, to: server, manager)
        // 1 MiB and a 50 ms wait: the next chunk is a second's worth at that pace, over what this server takes.
        let sent = chunks(server, over: 4 << 20)
        #expect(sent.lengths.first == 1 << 20 && sent.grownAt.count == 1, "one refusal, then the start size: \(sent.lengths)")
        #expect(sent.after.dropLast().allSatisfy { $0 == 1 << 20 } && (sent.after.last ?? 0) <= 1 << 20, "\(sent.lengths)")
        #expect(sent.lengths.allSatisfy { $0 % (256 << 10) == 0 }, "multiples of 256 KiB (Cloudflare): \(sent.lengths)")

        // The engine remembers: the next upload to that host sends the start size, nothing refused.
        let before = server.requests.count
        let again = manager.add(spec(file("again.bin", body), target(server), .tus))
        try await finish(manager, [again])
        #expect(manager.snapshot(of: again)?.state == .completed)
        #expect(server.requests.dropFirst(before).filter { $0.method == "PATCH" }
                    .allSatisfy { $0.header("Content-Length") == "\(1 << 20)" })
    }

    /// Issue 41: a refusal the client never reads. PyPI's resumable-upload closes a refused PATCH's connection with
    /// the body unread; behind a proxy the reset went ahead of its 413, libcurl failed to send the request again
    /// (error 65), and each attempt grew its chunk again and lost it: three retries for a 64 MiB file. A grown
    /// chunk cut unanswered is taken as refused: the start size, the server asked, no retry spent.
    @Test func aGrownChunkCutUnansweredGoesBackToTheStartInTheSameAttempt() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        server.largestPatch = 4 << 20
        server.resetsLargePatches = true
        server.patchAnswerDelay = .milliseconds(50)
        let body = Resource.randomBytes(count: 12 << 20, seed: 257)
        var configuration = testConfiguration()
        configuration.uploadChunking = UploadChunking(size: 1 << 20, grows: true, cutShare: 1)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(file("data.bin", body), target(server), .tus))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed && item.retries == 0 && item.attempts.count == 1, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
        let sent = chunks(server, over: 4 << 20)
        #expect(sent.grownAt.count == 1, "one grown chunk, lost: \(sent.lengths)")
        #expect(sent.after.allSatisfy { $0 <= 1 << 20 }, "\(sent.lengths)")
        #expect(methods(server).contains("HEAD"), "the server was asked where the upload stands")
    }

    /// The chunk rule: at the pace of the last whole chunk, what goes in 50 times the wait for its answer (the
    /// wait is then 2 % of a chunk), at most 2 s of it and 4 % of the upload, in 256 KiB steps, never less than it
    /// is, at most 192 MiB;
    /// a host's exact size and 0 (one request) never grow; a refusal goes back once.
    @Test func chunksGrowUntilTheWaitForAnAnswerIsTwoPercent() {
        let big: Int64 = 100 << 30
        var chunking = UploadChunking.standard
        #expect(chunking.count(from: 0, of: 100 << 20) == 6 << 20 && chunking.count(from: 98 << 20, of: 100 << 20) == 2 << 20)
        chunking.sent(6 << 20, in: 0.03, waited: 0.0005, of: big)
        #expect(chunking.size == 6 << 20, "a 0.5 ms wait at 200 MiB/s: 25 ms of it is 5 MiB, less than the chunk")
        chunking.sent(6 << 20, in: 0.06, waited: 0.02, of: big)
        #expect(chunking.size == 100 << 20, "100 MiB/s through 20 ms: a second of it")
        chunking.sent(1 << 20, in: 0.001, waited: 0.0005, of: big)
        #expect(chunking.size == 100 << 20, "a short last chunk says nothing of the pace")
        chunking.sent(100 << 20, in: 60, waited: 0.5, of: big)
        #expect(chunking.size == 100 << 20, "a slow chunk does not shrink it")
        chunking.sent(100 << 20, in: 1, waited: 0.001, of: big)
        #expect(chunking.size == 100 << 20, "a shorter wait does not shrink it")
        chunking.sent(100 << 20, in: 0.5, waited: 0.1, of: big)
        #expect(chunking.size == UploadChunking.ceiling, "200 MiB/s for at most 2 s: more than 192 MiB")
        let wentBack = chunking.refused()
        #expect(wentBack && chunking.size == 6 << 20 && !chunking.grows)
        let again = chunking.refused()
        #expect(!again, "the start size refused is the server's answer")
        chunking.sent(6 << 20, in: 0.1, waited: 0.09, of: big)
        #expect(chunking.size == 6 << 20)
        var odd = UploadChunking(size: 1 << 20, grows: true)
        odd.sent(1 << 20, in: 1.7, waited: 0.1, of: big)
        #expect(odd.size == 1 << 20, "1.18 MiB rounds down to a multiple of 256 KiB: not less than the start")
        odd.sent(1 << 20, in: 1.5, waited: 0.1, of: big)
        #expect(odd.size == 1280 << 10)
        odd.sent(2 << 20, in: 0.001, waited: 0, of: big)
        #expect(odd.size == 1280 << 10, "no wait measured: no growth")
        // At most 4 % of the upload: a cut or a kill costs under 5 % (or the start size).
        var small = UploadChunking.standard
        small.sent(6 << 20, in: 0.06, waited: 0.02, of: 128 << 20)
        #expect(small.size == 6 << 20, "4 % of 128 MiB is less than the start")
        small.sent(6 << 20, in: 0.06, waited: 0.02, of: 1 << 30)
        #expect(small.size == 40 << 20 + 768 << 10, "4 % of a GiB (40.96 MiB), in 256 KiB steps")
        var exact = UploadChunking(size: 6 << 20, grows: false)
        exact.sent(6 << 20, in: 0.06, waited: 0.05, of: big)
        #expect(exact.size == 6 << 20)
        var whole = UploadChunking(size: 0, grows: true)
        whole.sent(1 << 30, in: 0.1, waited: 0.05, of: big)
        #expect(whole.size == 0 && whole.count(from: 5, of: 100) == 95)
    }

    /// A host's own chunk (`[[hosts]] upload_chunk`) wins over the default; 0 is the rest in one.
    @Test func aHostsChunkWinsOverTheDefault() {
        var configuration = EngineConfiguration()
        let exact = UploadChunking(size: 6 << 20, grows: false)
        configuration.hostHeaders = [HostHeaders(match: "*.supabase.co", headers: [], uploadChunk: exact),
                                     HostHeaders(match: "big.example", headers: [], uploadChunk: UploadChunking(size: 0, grows: false))]
        #expect(configuration.uploadChunking(for: "x.supabase.co") == exact)
        #expect(configuration.uploadChunking(for: "big.example") == UploadChunking(size: 0, grows: false))
        #expect(configuration.uploadChunking(for: "other.example") == .standard)
    }

    // MARK: The engine stops and starts again

    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aRestartedEngineGoesOnFromTheStoredLocation(_ kind: TestUploadServer.Kind) async throws {
        let server = try TestUploadServer(kind)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 4 << 20, seed: 251)
        let path = file("data.bin", body)
        server.keepsCutPatches = true
        server.holdOnce(after: 1 << 20)
        let storePath = dir.path + "/queue.sqlite"
        var id: TransferID
        do {
            let manager = try TransferManager(configuration: testConfiguration(), store: try SQLiteQueueStore(path: storePath))
            id = try manager.addSaved([spec(path, target(server), kind == .tus ? .tus : .ietf)])[0]
            try await eventually("the server holds the upload") { server.held == 1 }
            try await eventually("the location is kept") { manager.snapshot(of: id)?.resumable?.location != nil }
            manager.shutdown()
        }
        let before = try #require(try SQLiteQueueStore(path: storePath).loadAll().first)
        #expect(before.resumable?.location != nil, "the location is in the store")
        let received = server.bodyBytes

        let manager = try TransferManager(configuration: testConfiguration(), store: try SQLiteQueueStore(path: storePath))
        defer { manager.shutdown() }
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(server.stored(storedPath(server))?.data == body)
        #expect(server.bodyBytes == Int64(body.count), "the second engine sent only what the server did not have (\(received) before)")
        #expect(item.resumable?.resumptions.first?.offset == received)
        #expect(methods(server).suffix(2) == ["HEAD", "PATCH"])
    }

    // MARK: The server forgot the upload

    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aLocationTheServerForgotStartsOverFromZero(_ kind: TestUploadServer.Kind) async throws {
        let held = try await held(kind, seed: 252)
        defer { held.shutdown() }
        let (server, manager, id) = (held.server, held.manager, held.id)
        try await pause(held)
        server.forgetUploads()
        manager.resume(id)
        try await finish(manager, [id])

        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        let reason = try #require(item.resumable?.restartReason)
        #expect(reason.contains("no longer has the upload") && reason.contains("404"), "\(reason)")
        let stored = try #require(server.storedPaths.last.flatMap(server.stored))
        #expect(stored.data == held.body)
        #expect(methods(server).contains("HEAD"))
    }

    // MARK: An offset conflict

    /// A 409 to a PATCH (the server's offset is not the one sent) is met by asking for the offset again.
    @Test func anOffsetConflictAsksForTheOffsetAgain() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 259)
        let path = file("data.bin", body)
        server.conflictOnce()
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), .tus))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(methods(server) == ["POST", "PATCH", "HEAD", "PATCH"])
        #expect(item.attempts.count == 1, "within the same attempt: no retry spent")
        #expect(server.stored("/files/1")?.data == body)
    }

    // MARK: Servers that answer wrongly

    /// A tus upload of `count` random bytes to a server that answers every PATCH so, to its end.
    func tusUpload(to server: TestUploadServer, answering: TestUploadServer.PatchAnswer, count: Int, seed: UInt64,
                   configuration: EngineConfiguration = testConfiguration()) async throws -> TransferSnapshot {
        server.answerPatches(answering)
        let path = file("data.bin", Resource.randomBytes(count: count, seed: seed))
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), .tus))
        try await finish(manager, [id])
        return try #require(manager.snapshot(of: id))
    }

    /// A tus server that answers a PATCH with success and its old offset keeps none of what it is sent: it is
    /// asked once where it stands, and the upload ends there (it once sent the rest again without end: 15 GB
    /// in 20 s for a 1 MB file).
    @Test func aTusServerThatKeepsNothingEndsTheUploadAfterOneQuery() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        let item = try await tusUpload(to: server, answering: .keepsNothing, count: 1 << 20, seed: 261)
        #expect(item.state == .failed)
        #expect(item.lastError?.contains("kept none of the 1048576 bytes sent to it") == true, "\(item.lastError ?? "")")
        #expect(methods(server) == ["POST", "PATCH", "HEAD"], "one body sent, then the question; no retry")
    }

    /// A PATCH answered with an offset past the file's length is no end: the upload starts over, as an offset
    /// past the length from a HEAD makes it, and a server that keeps saying so fails the item.
    @Test func aTusOffsetPastTheLengthIsNotAFinishedUpload() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        // With the retries a user has: the second start-over fails the item, not retried (it was sent 12 times).
        let item = try await tusUpload(to: server, answering: .claimsMore, count: 64 << 10, seed: 262)
        #expect(item.state == .failed)
        #expect(item.lastError?.contains("says it holds 66536 bytes of a 65536-byte file") == true, "\(item.lastError ?? "")")
        #expect(methods(server).filter { $0 != "DELETE" } == ["POST", "PATCH", "POST", "PATCH"], "started over once")
        try await eventually("the first copy is deleted") { methods(server).filter { $0 == "DELETE" }.count == 1 }
    }

    /// An IETF server that answers the append with success but says the upload is incomplete is asked where
    /// it stands, not taken at the file's end (it was: "done" with 51 MB of 64 on the server).
    @Test func anIETFAppendAnsweredIncompleteIsNotTheEnd() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let path = file("data.bin", Resource.randomBytes(count: 1 << 20, seed: 263))
        // The server holds half; its answer to the rest: success, incomplete, and the same offset.
        server.routeHead("/loc", ietfAnswer(offset: 524_288, complete: false))
        server.route("/loc", ietfAnswer(offset: 524_288, complete: false))
        let id = try await resumed(path, at: server.url("/loc"))
        let item = try #require(id.manager.snapshot(of: id.id))
        #expect(item.state == .failed)
        #expect(item.lastError?.contains("kept none of the 524288 bytes sent to it") == true, "\(item.lastError ?? "")")
        #expect(server.requests("/loc").map(\.method) == ["PATCH"])
        #expect(server.headRequests("/loc").count == 2)
        id.manager.shutdown()
    }

    /// An IETF server that takes part of an append (its answer: incomplete, at a later offset) is sent the rest.
    @Test func anIETFAppendTakenInPartSendsTheRest() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 264)
        let path = file("data.bin", body)
        server.routeHead("/loc", ietfAnswer(offset: 524_288, complete: false))
        server.route("/loc", [ietfAnswer(offset: 786_432, complete: false), ietfAnswer(offset: nil, complete: true)])
        let id = try await resumed(path, at: server.url("/loc"))
        let item = try #require(id.manager.snapshot(of: id.id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        let patches = server.requests("/loc")
        #expect(patches.map { $0.header("Upload-Offset") } == ["524288", "786432"])
        #expect(patches.last?.bodySHA256 == sha256Hex(body.suffix(from: 786432)))
        id.manager.shutdown()
    }

    /// An IETF server's 204: its offset (none: not said) and whether it says the upload is complete.
    func ietfAnswer(offset: Int?, complete: Bool) -> Behavior {
        .status(204, headers: (offset.map { [("Upload-Offset", String($0))] } ?? [])
                    + [("Upload-Complete", complete ? "?1" : "?0"), ("Upload-Draft-Interop-Version", "6")])
    }

    /// An engine that takes up an IETF upload whose location the queue already holds (as after a kill -9),
    /// run to its end.
    func resumed(_ path: String, at location: URL) async throws -> (manager: TransferManager, id: TransferID) {
        let store = InMemoryQueueStore()
        let stored = try #require(try store.add([spec(path, location.deletingLastPathComponent().appendingPathComponent("up"), .ietf)]).first)
        var upload = ResumableUpload(kind: .ietf)
        upload.location = location.absoluteString
        try store.recordResumable(stored.id, upload)
        let manager = try TransferManager(configuration: testConfiguration(), store: store)
        try await finish(manager, [stored.id])
        return (manager, stored.id)
    }

    /// tus: an empty file is whole once its upload is made; no PATCH of nothing follows.
    @Test func anEmptyFileIsUploadedByItsCreationAlone() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        let path = file("empty.bin", Data())
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, target(server), .tus))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(methods(server) == ["POST"])
    }

    // MARK: The file changed

    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aFileThatChangedUnderTheUploadFailsWithThatReason(_ kind: TestUploadServer.Kind) async throws {
        let held = try await held(kind, seed: 253)
        defer { held.shutdown() }
        let (server, manager, id) = (held.server, held.manager, held.id)
        try await pause(held)
        // Same size, one byte different at the end: only the hash of the last MiB sees it (and the time).
        var changed = held.body
        changed[changed.count - 1] ^= 0xFF
        try changed.write(to: URL(fileURLWithPath: held.path))
        let requestsBefore = server.requests.count
        manager.resume(id)
        try await eventually("failed") { manager.snapshot(of: id)?.state == .failed }

        let item = try #require(manager.snapshot(of: id))
        #expect(item.lastError?.contains("changed since its upload began") == true, "\(item.lastError ?? "")")
        #expect(item.resumable?.location == nil, "a retry starts over")
        #expect(server.storedPaths.isEmpty)
        // No byte more; the copy of the old file is ended on the server, as a cancel ends it.
        try await eventually("the old copy is deleted") { server.requests.count == requestsBefore + 1 }
        #expect(server.requests.last?.method == "DELETE")
        if kind == .tus { try await eventually("the upload is gone") { server.tusOffset("/files/1") == nil } }
    }

    /// A file written to while it is sent fails the item ("file changed"), and one `ferry retry` sends the file
    /// as it is then, from the start (it took two: the first failed again, "changed since its upload began").
    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aFileChangedWhileSentIsSentAfreshByOneRetry(_ kind: TestUploadServer.Kind) async throws {
        let server = try TestUploadServer(kind)
        defer { server.shutdown() }
        let first = Resource.randomBytes(count: 4 << 20, seed: 265)
        let path = file("data.bin", first)
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        // Slow (128 s for the file: it cannot be all sent before the test changes it, however busy the machine)
        // until the file has changed, then at full speed to its last read.
        var upload = spec(path, target(server), kind == .tus ? .tus : .ietf)
        upload.rateLimit = 32 << 10
        let id = manager.add(upload)
        try await eventually("bytes are on their way") { (manager.snapshot(of: id)?.bytesDone ?? 0) > 0 }
        let more = Resource.randomBytes(count: 64 << 10, seed: 266)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: more)
        try handle.close()
        #expect(manager.setRateLimit(id, nil))
        try await finish(manager, [id])
        let failed = try #require(manager.snapshot(of: id))
        #expect(failed.state == .failed)
        #expect(failed.failure?.kind == .fileChanged, "\(failed.lastError ?? "")")
        manager.retry(id)
        try await eventually("sent again") { manager.snapshot(of: id)?.state.isTerminal == true }
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        let stored = try #require(server.storedPaths.last.flatMap(server.stored))
        #expect(stored.data == first + more)
    }

    /// What a run says of a resumable upload is of that run: a put asked again after one that resumed does not
    /// say the old resumption again (it printed "the server has 512.0 KiB; sending the rest" for nothing sent).
    @Test func aPutAskedAgainDoesNotRepeatAnEarlierRunsResumption() async throws {
        let server = try TestUploadServer(.tus)
        defer { server.shutdown() }
        let path = file("data.bin", Resource.randomBytes(count: 2 << 20, seed: 267))
        server.cutOnce(after: 1 << 20)
        let state = dir.path + "/state"
        let arguments = ["put", "--no-tui", "--tus", path, target(server).absoluteString]
        let first = try await runFerry(arguments, stateDir: state)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("; sending the rest"), "\(first.stderr)")
        let again = try await runFerry(arguments, stateDir: state)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("already sent"), "\(again.stderr)")
        #expect(!again.stderr.contains("sending the rest"), "\(again.stderr)")
    }

    // MARK: Cancel ends the upload on the server

    @Test(arguments: [TestUploadServer.Kind.ietf, .tus])
    func aCancelledUploadIsDeletedOnTheServer(_ kind: TestUploadServer.Kind) async throws {
        let held = try await held(kind, seed: 254)
        defer { held.shutdown() }
        let (server, manager, id) = (held.server, held.manager, held.id)
        let location = try #require(manager.snapshot(of: id)?.resumable?.location)
        manager.cancel(id)
        try await eventually("a DELETE reached the server") { server.requests.contains { $0.method == "DELETE" } }
        let delete = try #require(server.requests.first { $0.method == "DELETE" })
        #expect(server.url(delete.uri).absoluteString == location)
        if kind == .tus {
            #expect(delete.header("Tus-Resumable") == "1.0.0")
            try await eventually("the upload is gone") { server.tusOffset("/files/1") == nil }
        } else {
            #expect(delete.header("Upload-Draft-Interop-Version") == "6")
        }
        #expect(manager.snapshot(of: id)?.state == .cancelled)
        #expect(manager.snapshot(of: id)?.resumable == nil)
    }

    /// Removing a paused upload from the queue ends its copy on the server too.
    @Test func aRemovedPausedUploadIsDeletedOnTheServer() async throws {
        let held = try await held(.tus, seed: 260)
        defer { held.shutdown() }
        try await pause(held)
        #expect(held.manager.remove(held.id))
        try await eventually("a DELETE reached the server") { held.server.requests.contains { $0.method == "DELETE" } }
        try await eventually("the upload is gone") { held.server.tusOffset("/files/1") == nil }
    }

    // MARK: A server that does not know the protocol

    /// A PUT of `count` random bytes to the server's /up/data.bin offering the IETF protocol, to its end.
    func uploaded(to server: TestUploadServer, count: Int, seed: UInt64,
                  configuration: EngineConfiguration = testConfiguration()) async throws -> (item: TransferSnapshot, body: Data) {
        let body = Resource.randomBytes(count: count, seed: seed)
        let path = file("data.bin", body)
        let manager = try TransferManager(configuration: configuration, store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, server.url("/up/data.bin"), .ietf))
        try await finish(manager, [id])
        return (try #require(manager.snapshot(of: id)), body)
    }

    @Test func anUploadOfferedTheProtocolAndNotTakenWorksAsBefore() async throws {
        let server = try TestUploadServer(.plain)
        defer { server.shutdown() }
        let (item, body) = try await uploaded(to: server, count: 2 << 20, seed: 255)
        #expect(item.state == .completed)
        #expect(methods(server) == ["PUT"], "one request, no extra round trip")
        #expect(server.requests[0].header("Upload-Draft-Interop-Version") == "6")
        #expect(server.stored("/up/data.bin")?.data == body)
        #expect(item.resumable?.location == nil)
        #expect(item.response?.status == 201)
    }

    /// A server of another version of the draft refuses ours with 400: the upload goes again plain, at once.
    @Test func aServerOfAnotherVersionOfTheDraftGetsAPlainUpload() async throws {
        let server = try TestUploadServer(.ietf3)
        defer { server.shutdown() }
        let (item, body) = try await uploaded(to: server, count: 1 << 20, seed: 261)
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        try #require(methods(server) == ["PUT", "PUT"])
        #expect(server.requests[1].header("Upload-Draft-Interop-Version") == nil)
        #expect(item.attempts.count == 1, "within the same attempt")
        #expect(server.stored("/up/data.bin")?.data == body)
        #expect(item.resumable == nil)
    }

    /// A cut upload the server did not offer to resume is sent again whole, as a plain upload always was.
    @Test func aCutUploadToAServerWithoutTheProtocolIsSentAgainWhole() async throws {
        let server = try TestUploadServer(.plain)
        defer { server.shutdown() }
        server.cutOnce(after: 1 << 20)
        let (item, body) = try await uploaded(to: server, count: 2 << 20, seed: 256)
        #expect(item.state == .completed)
        #expect(methods(server) == ["PUT", "PUT"])
        #expect(server.stored("/up/data.bin")?.data == body)
    }

    /// `[uploads] resumable = false`: the upload offers nothing.
    @Test func turnedOffTheUploadOffersNothing() async throws {
        let server = try TestUploadServer(.ietf)
        defer { server.shutdown() }
        var configuration = testConfiguration()
        configuration.offerResumableUploads = false
        let (item, _) = try await uploaded(to: server, count: 100_000, seed: 257, configuration: configuration)
        #expect(item.state == .completed)
        #expect(server.requests.first?.header("Upload-Draft-Interop-Version") == nil)
        #expect(item.resumable == nil)
    }

    /// A POST resumes too (URLSession offers the protocol for every upload task).
    @Test func aPostResumesWithTheIETFProtocol() async throws {
        let server = try TestUploadServer(.ietf)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 3 << 20, seed: 258)
        let path = file("data.bin", body)
        server.holdOnce(after: 1 << 20)
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        defer { manager.shutdown() }
        let id = manager.add(spec(path, server.url("/up/data.bin"), .ietf, method: "POST"))
        try await cutOnceTheLocationIsKnown(server, manager, id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(methods(server) == ["POST", "HEAD", "PATCH"])
        #expect(server.stored("/up/data.bin")?.data == body)
        #expect(server.bodyBytes == Int64(body.count))
    }
}
