@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// HTTP/2 through ferry's transport against an in-process server that offers h2 by ALPN (swift-nio-http2):
/// transfers to one host share one connection as streams, and what holds over HTTP/1.1 holds there
/// (resume with Range and If-Range, segments, a cancel of one stream, limits).
@Suite struct HTTP2Tests {
    let https: TrustedHTTPS
    var server: TestHTTPServer { https.server }
    var dir: TempDir { https.dir }
    var caFile: String { https.caFile }

    init() throws {
        https = try TrustedHTTPS(http2: true)
    }

    func configuration(maxConcurrent: Int = 4) -> EngineConfiguration { https.configuration(maxConcurrent: maxConcurrent) }

    func spec(_ path: String, segments: Int? = nil) -> TransferSpec {
        TransferSpec(download: server.url(path), directory: dir.path, segments: segments)
    }

    @Test func downloadsToOneHostShareOneConnectionAsStreams() async throws {
        let bodies = (0..<12).map { Resource.randomBytes(count: 256 << 10, seed: UInt64(200 + $0)) }
        for (index, body) in bodies.enumerated() {
            // Slow enough that the transfers overlap: they are streams of one connection at the same time.
            server.route("/f\(index)", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 1 << 20)))
        }
        let manager = try TransferManager(configuration: configuration(maxConcurrent: 8))
        defer { manager.shutdown() }
        let ids = bodies.indices.map { manager.add(spec("/f\($0)")) }
        try await finish(manager, Set(ids))
        for (index, body) in bodies.enumerated() {
            #expect(manager.snapshot(of: ids[index])?.state == .completed, "\(manager.snapshot(of: ids[index])?.lastError ?? "")")
            #expect(dir.contents("f\(index)") == body)
        }
        #expect(server.allRequests.allSatisfy { $0.version == "HTTP/2.0" }, "\(server.allRequests.map(\.version))")
        #expect(server.maxConcurrentRequests >= 4, "streams at once: \(server.maxConcurrentRequests)")
        #expect(server.connectionsAccepted == 1, "connections: \(server.connectionsAccepted)")
    }

    @Test func aHostOverHTTP2RunsMoreItemsAtOnceOnItsOneConnection() async throws {
        // -j 2: two connections' worth. Once the host has answered over HTTP/2 it takes one connection, with
        // up to ConcurrencyCaps.minimumStreams (16) of its items on it.
        for index in 0..<20 {
            server.route("/s\(index)", .serve(Resource(body: Data(repeating: UInt8(index), count: 64 << 10)),
                                               ServeOptions(delayBeforeHead: index == 0 ? 0 : 0.3)))
        }
        let manager = try TransferManager(configuration: configuration(maxConcurrent: 2))
        defer { manager.shutdown() }
        let ids = (0..<20).map { manager.add(spec("/s\($0)")) }
        try await finish(manager, Set(ids))
        #expect(ids.allSatisfy { manager.snapshot(of: $0)?.state == .completed })
        #expect(server.maxConcurrentRequests > 2 && server.maxConcurrentRequests <= 16, "\(server.maxConcurrentRequests)")
        #expect(server.connectionsAccepted == 1, "connections: \(server.connectionsAccepted)")
    }

    @Test func aCutStreamResumesWithRangeAndIfRange() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 220)
        let resource = Resource(body: body, etag: "\"h2-v1\"")
        server.route("/cut.bin", [.serve(resource, ServeOptions(cutAfter: 1 << 20)), .serve(resource)])
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/cut.bin"))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("cut.bin") == body)
        let requests = server.requests("/cut.bin")
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0.version == "HTTP/2.0" })
        let range = try #require(requests.last?.header("Range"))
        #expect(range.hasPrefix("bytes=") && range != "bytes=0-", "\(range)")
        #expect(requests.last?.header("If-Range") == "\"h2-v1\"")
    }

    @Test func segmentsAreStreamsOfOneConnection() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 221)
        server.route("/seg.bin", .serve(Resource(body: body, etag: "\"seg\""), ServeOptions(bytesPerSecond: 4 << 20)))
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/seg.bin", segments: 4))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("seg.bin") == body)
        let ranged = server.requests("/seg.bin").filter { $0.header("Range") != nil }
        #expect(ranged.count >= 3, "\(server.requests("/seg.bin").map { $0.header("Range") ?? "-" })")
        #expect(server.requests("/seg.bin").allSatisfy { $0.version == "HTTP/2.0" })
        #expect(server.connectionsAccepted == 1, "connections: \(server.connectionsAccepted)")
    }

    @Test func cancellingOneStreamLeavesTheOthersOnItsConnectionRunning() async throws {
        let slow = Resource.randomBytes(count: 8 << 20, seed: 222)
        let other = Resource.randomBytes(count: 4 << 20, seed: 223)
        // The stream to cancel stalls after 1 MiB and stays open: it cannot end before the test cancels it,
        // however busy the machine (at 512 KiB/s it finished first under the whole suite's load).
        server.route("/slow.bin", .serve(Resource(body: slow), ServeOptions(stallAfter: 1 << 20)))
        server.route("/other.bin", .serve(Resource(body: other), ServeOptions(bytesPerSecond: 512 << 10)))
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let cancelled = manager.add(spec("/slow.bin"))
        let kept = manager.add(spec("/other.bin"))
        try await eventually("both streams move") {
            (manager.snapshot(of: cancelled)?.bytesDone ?? 0) > 0 && (manager.snapshot(of: kept)?.bytesDone ?? 0) > 0
        }
        manager.cancel(cancelled)
        try await finish(manager, [cancelled, kept])
        #expect(manager.snapshot(of: cancelled)?.state == .cancelled)
        #expect(manager.snapshot(of: kept)?.state == .completed, "\(manager.snapshot(of: kept)?.lastError ?? "")")
        #expect(dir.contents("other.bin") == other)
        #expect(server.requests("/other.bin").count == 1, "the other stream was not cut and retried")
        #expect(server.connectionsAccepted == 1, "connections: \(server.connectionsAccepted)")
    }

    /// /limited.bin added limited to 512 KiB/s, once its bytes move.
    func startLimited(_ manager: TransferManager) async throws -> TransferID {
        var limitedSpec = spec("/limited.bin")
        limitedSpec.rateLimit = 512 << 10
        let id = manager.add(limitedSpec)
        try await eventually("the limited one moves") { !server.bytesSent("/limited.bin").isEmpty }
        return id
    }

    /// A limited item keeps HTTP/1.1 on a connection of its own, where the limit holds at the wire (libcurl
    /// 7.88 would hold a paused stream's data in its stream window, the server sending at full speed: 5.6 MiB
    /// in 4 s for 512 KiB/s); the others go on over HTTP/2, not held up by it.
    @Test func aLimitedItemHoldsAtTheWireAndDoesNotHoldUpTheOthers() async throws {
        let limited = Resource.randomBytes(count: 16 << 20, seed: 224)
        let free = Resource.randomBytes(count: 8 << 20, seed: 225)
        server.route("/limited.bin", .serve(Resource(body: limited)))
        server.route("/free.bin", .serve(Resource(body: free)))
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let slow = try await startLimited(manager)
        let start = try #require(server.bytesSent("/limited.bin").start)
        let fast = manager.add(spec("/free.bin"))
        try await finish(manager, [fast], within: 30)
        #expect(manager.snapshot(of: fast)?.state == .completed, "\(manager.snapshot(of: fast)?.lastError ?? "")")
        #expect(dir.contents("free.bin") == free)
        try await eventually("4 s of the limited one") { Date().timeIntervalSince(start) >= 4 }
        let rate = server.bytesSent("/limited.bin").rate(from: 1, to: 4, after: start)
        print("HTTP2Tests: an item limited to 512 KiB/s, as the server sent it: \(rate / 1024) KiB/s")
        #expect(rate < 1.3 * 512 * 1024, "\(rate / 1024) KiB/s at the wire")
        #expect(server.requests("/limited.bin").first?.version == "HTTP/1.1")
        #expect(server.requests("/free.bin").first?.version == "HTTP/2.0")
        #expect(server.connectionsAccepted == 2, "the limited one's, and the others' shared one: \(server.connectionsAccepted)")
        manager.cancel(slow)
    }

    /// A limited download's HTTP/1.1 connection is never taken by a download that wants a stream: once the
    /// host had answered over HTTP/2, libcurl 7.88 sent the next request on the limited one's busy connection,
    /// which failed ("Received HTTP/0.9") and the limited file was published with that response in it.
    @Test func aLimitedDownloadsConnectionIsNeverTakenForAStream() async throws {
        let limited = Resource.randomBytes(count: 32 << 20, seed: 226)  // a minute at its limit: it runs beside the others
        server.route("/limited.bin", .serve(Resource(body: limited)))
        let small = (0..<2).map { Resource.randomBytes(count: 64 << 10, seed: UInt64(227 + $0)) }
        for (index, body) in small.enumerated() { server.route("/s\(index).bin", .serve(Resource(body: body))) }
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let slow = try await startLimited(manager)
        // One at a time, each after the one before it: the second comes once the host is known to multiplex.
        var ids: [TransferID] = []
        for index in small.indices {
            let id = manager.add(spec("/s\(index).bin"))
            try await finish(manager, [id])
            ids.append(id)
        }
        #expect(manager.snapshot(of: slow)?.state == .running, "the limited one ran beside them all along")
        for (index, id) in ids.enumerated() {
            #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
            #expect(dir.contents("s\(index).bin") == small[index])
        }
        // What the limited one wrote so far is the server's file, nothing else in it (the other response was).
        manager.pause(slow)
        try await eventually("paused") { manager.snapshot(of: slow)?.state == .paused }
        let part = try #require(dir.contents("limited.bin.part"))
        #expect(!part.isEmpty && part == limited.prefix(part.count), "\(part.count) bytes written")
        #expect(server.requests("/limited.bin").map(\.version) == ["HTTP/1.1"])
        #expect(server.requests("/s1.bin").map(\.version) == ["HTTP/2.0"])
        // The limited one's connection carried its request alone (under the whole suite's load the streams'
        // connection was sometimes made again between the two small files: 3 connections, none of them shared).
        let limitedConnection = server.requests("/limited.bin").first?.connection
        #expect(server.allRequests.filter { $0.connection == limitedConnection }.map(\.path) == ["/limited.bin"], """
            the limited one's connection: \(server.connectionsAccepted) connections; asked: \
            \(["/limited.bin", "/s0.bin", "/s1.bin"].map { "\($0) \(server.requests($0).map { "\($0.version) #\($0.connection)" })" }); \
            attempts: \((ids + [slow]).map { manager.snapshot(of: $0)?.attempts.map { $0.error ?? "ok" } ?? [] })
            """)
    }

    /// A limit set on a download running as an HTTP/2 stream moves it to a connection of its own, from where it
    /// was (a Range): libcurl 7.88 cannot hold one stream back, and the paused stream's data piled up in memory
    /// until it failed "Out of memory".
    @Test func aLimitSetOnAStreamMovesItToAConnectionOfItsOwn() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 229)
        // The stream stalls after 2 MiB (it cannot end before the limit is set, however busy the machine); the
        // request on a connection of its own gets the rest.
        server.route("/big.bin", [.serve(Resource(body: body, etag: "\"b\""), ServeOptions(stallAfter: 2 << 20)),
                                  .serve(Resource(body: body, etag: "\"b\""))])
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/big.bin"))
        try await eventually("a MiB over HTTP/2") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 1 << 20 }
        #expect(manager.setRateLimit(id, 4 << 20))
        try await eventually("asked again, on a connection of its own") { server.requests("/big.bin").count == 2 }
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("big.bin") == body)
        let requests = server.requests("/big.bin")
        #expect(requests.map(\.version) == ["HTTP/2.0", "HTTP/1.1"], "\(requests.map(\.version))")
        #expect(requests.last?.header("Range")?.hasPrefix("bytes=") == true && requests.last?.header("If-Range") == "\"b\"")
        let item = try #require(manager.snapshot(of: id))
        #expect(item.retries == 0 && item.lastError == nil, "a move, not a failure: no retry spent, no waiting")
        #expect(item.attempts.first?.error?.contains("moved from an HTTP/2 stream") == true, "\(item.attempts)")
    }

    /// With --retries 0 a limit set on a stream still moves it (it went through the retry rules and failed).
    @Test func aLimitMovesAStreamEvenWithNoRetries() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 230)
        server.route("/norety.bin", [.serve(Resource(body: body, etag: "\"n\""), ServeOptions(stallAfter: 1 << 20)),
                                     .serve(Resource(body: body, etag: "\"n\""))])
        var noRetries = configuration()
        noRetries.retry.maxRetries = 0
        let manager = try TransferManager(configuration: noRetries)
        defer { manager.shutdown() }
        let id = manager.add(spec("/norety.bin"))
        try await eventually("half a MiB over HTTP/2") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 512 << 10 }
        #expect(manager.setRateLimit(id, 8 << 20))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("norety.bin") == body)
    }

    @Test func throughAProxysTunnelDownloadsShareOneConnection() async throws {
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let bodies = (0..<4).map { Resource.randomBytes(count: 512 << 10, seed: UInt64(230 + $0)) }
        for (index, body) in bodies.enumerated() {
            server.route("/t\(index)", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 1 << 20)))
        }
        let result = try await runFerry(["get", "--no-tui", "-j", "4", "-o", dir.path] + (0..<4).map { server.url("/t\($0)").absoluteString },
                                        environment: ["HTTPS_PROXY": proxy.url.absoluteString, "SSL_CERT_FILE": caFile])
        #expect(result.status == 0, "\(result.stderr)")
        for (index, body) in bodies.enumerated() { #expect(dir.contents("t\(index)") == body) }
        #expect(proxy.requests == ["CONNECT 127.0.0.1:\(server.port)"], "one tunnel: \(proxy.requests)")
        #expect(server.allRequests.allSatisfy { $0.version == "HTTP/2.0" })
    }

    @Test func anErrorStatusOverHTTP2IsSaidAsOverHTTP1() async throws {
        server.route("/missing", .status(404, body: Data("<html><body>Not here</body></html>".utf8)))
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/missing"))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .failed)
        #expect(manager.snapshot(of: id)?.lastError?.hasPrefix("HTTP 404 Not Found") == true, "\(manager.snapshot(of: id)?.lastError ?? "")")
    }

    @Test func plainHTTPStaysOnHTTP1() async throws {
        let plain = try TestHTTPServer()
        defer { plain.shutdown() }
        plain.route("/p", .serve(Resource(body: Data("plain".utf8))))
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: plain.url("/p"), directory: dir.path))
        try await finish(manager, [id])
        #expect(dir.contents("p") == Data("plain".utf8))
        #expect(plain.requests("/p").first?.version == "HTTP/1.1", "no h2c guessing")
    }
}
