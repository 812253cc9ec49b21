import FerryModel
import FerryStorage
import Foundation
import Testing
import FerryTransport
import TestHTTPServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Helpers

/// A blocking TCP client for exact wire checks.
final class RawClient {
    let fd: Int32

    init(port: Int, timeoutSeconds: Int = 10) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RawError.socket }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // No close(fd) here: deinit runs for a class whose init throws after all stored
        // properties are set, and closing twice could close another test's descriptor.
        guard rc == 0 else { throw RawError.connect }
    }

    deinit { close(fd) }

    func send(_ text: String) { send(Data(text.utf8)) }

    func send(_ data: Data) {
        data.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                off += n
            }
        }
    }

    /// Reads until EOF (or error/timeout; then `sawEOF` is false).
    func readToEOF() -> (data: Data, sawEOF: Bool) {
        var out = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n == 0 { return (out, true) }
            if n < 0 { return (out, false) }
            out.append(contentsOf: buf[0..<n])
        }
    }

    /// Reads until `data` contains `marker` and at least `extra` bytes after the first header end.
    func readUntil(_ marker: String) -> Data {
        var out = Data()
        var buf = [UInt8](repeating: 0, count: 4096)
        let m = Data(marker.utf8)
        while out.range(of: m) == nil {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return out
    }

    /// Reads one response whose body is framed by Content-Length.
    func readResponse() -> RawResponse? {
        var out = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            if let resp = RawResponse(out), let cl = resp.header("content-length").flatMap({ Int($0) }),
                resp.body.count >= cl
            {
                return resp
            }
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { return RawResponse(out) }
            out.append(contentsOf: buf[0..<n])
        }
    }

    enum RawError: Error { case socket, connect }
}

struct RawResponse {
    let statusLine: String
    let status: Int
    let headers: [(String, String)]
    let body: Data

    init?(_ data: Data) {
        guard let sep = data.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        let headText = String(decoding: data[data.startIndex..<sep.lowerBound], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        headers = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        body = Data(data[sep.upperBound...])
    }

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// Decodes a chunked body (nil if malformed or not terminated).
    func dechunked() -> Data? {
        var out = Data()
        var rest = body[...]
        let crlf = Data("\r\n".utf8)
        while true {
            guard let lineEnd = rest.range(of: crlf) else { return nil }
            let sizeText = String(decoding: rest[rest.startIndex..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";")[0], radix: 16) else { return nil }
            rest = rest[lineEnd.upperBound...]
            if size == 0 { return out }
            guard rest.count >= size + 2 else { return nil }
            out.append(rest[rest.startIndex..<(rest.startIndex + size)])
            rest = rest[(rest.startIndex + size + 2)...]
        }
    }
}

private func makeSession() -> URLSession {
    let config = URLSessionConfiguration.keepingNothing
    config.httpMaximumConnectionsPerHost = 8
    config.timeoutIntervalForRequest = 30
    return URLSession(configuration: config)
}

private func fetch(_ request: URLRequest, session: URLSession? = nil) async throws -> (Data, HTTPURLResponse) {
    let s = session ?? makeSession()
    defer { if session == nil { s.finishTasksAndInvalidate() } }
    let (data, response) = try await s.data(for: request)
    return (data, response as! HTTPURLResponse)
}

/// Polls `condition` for up to `seconds` (the server finishes its bookkeeping just after the
/// client has the last byte).
func serverEventually(_ seconds: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        usleep(5_000)
    }
    return true
}

// MARK: - Tests

@Suite struct TestServerTests {
    @Test func randomBytesDeterministic() {
        let a = Resource.randomBytes(count: 1003, seed: 7)
        let b = Resource.randomBytes(count: 1003, seed: 7)
        let c = Resource.randomBytes(count: 1003, seed: 8)
        #expect(a == b)
        #expect(a != c)
        #expect(a.count == 1003)
        #expect(Resource.randomBytes(count: 1000, seed: 7) == a.prefix(1000))
        // (How fast 64 MiB are made is not asserted: the suite runs on a shared, busy machine.)
        let big = Resource.randomBytes(count: 64 << 20, seed: 1)
        #expect(big.count == 64 << 20)
    }

    @Test func fullGETBodyIdentical() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 3 << 20, seed: 1)
        server.route("/file.bin", .serve(Resource(body: body, etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT",
                                                  contentDisposition: "attachment; filename=\"../../etc/passwd\"")))
        let (data, response) = try await fetch(URLRequest(url: server.url("/file.bin?x=1")))
        #expect(response.statusCode == 200)
        #expect(data == body)
        #expect(response.value(forHTTPHeaderField: "ETag") == "\"v1\"")
        #expect(response.value(forHTTPHeaderField: "Accept-Ranges") == "bytes")
        #expect(response.value(forHTTPHeaderField: "Content-Length") == String(body.count))
        #expect(response.value(forHTTPHeaderField: "Last-Modified") == "Wed, 21 Oct 2015 07:28:00 GMT")
        #expect(response.value(forHTTPHeaderField: "Content-Disposition") == "attachment; filename=\"../../etc/passwd\"")
        let recorded = server.requests("/file.bin")
        #expect(recorded.count == 1)
        #expect(recorded.first?.uri == "/file.bin?x=1")
        #expect(recorded.first?.method == "GET")
        #expect(recorded.first?.bodyLength == 0)
    }

    @Test func largeBodyStreamsWithBackpressure() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 64 << 20, seed: 64)
        server.route("/big", .serve(Resource(body: body)))
        let (data, response) = try await fetch(URLRequest(url: server.url("/big")))
        #expect(response.statusCode == 200)
        #expect(data.count == body.count)
        #expect(sha256Hex(data) == sha256Hex(body))
    }

    @Test func rangeGives206() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 10_000, seed: 2)
        server.route("/r", .serve(Resource(body: body, etag: "\"e\"")))

        let client = try RawClient(port: server.port)
        client.send("GET /r HTTP/1.1\r\nHost: x\r\nRange: bytes=100-199\r\nConnection: close\r\n\r\n")
        let resp = try #require(RawResponse(client.readToEOF().data))
        #expect(resp.status == 206)
        #expect(resp.header("Content-Range") == "bytes 100-199/10000")
        #expect(resp.header("Content-Length") == "100")
        #expect(resp.body == body[100..<200])

        var request = URLRequest(url: server.url("/r"))
        request.setValue("bytes=9000-", forHTTPHeaderField: "Range")
        let (data, response) = try await fetch(request)
        #expect(response.statusCode == 206)
        #expect(response.value(forHTTPHeaderField: "Content-Range") == "bytes 9000-9999/10000")
        #expect(data == body[9000...])

        // End past the size is clamped.
        request.setValue("bytes=9990-20000", forHTTPHeaderField: "Range")
        let (tail, tailResponse) = try await fetch(request)
        #expect(tailResponse.statusCode == 206)
        #expect(tailResponse.value(forHTTPHeaderField: "Content-Range") == "bytes 9990-9999/10000")
        #expect(tail == body[9990...])
    }

    @Test func ifRangeRules() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 5000, seed: 3)
        let lm = "Wed, 21 Oct 2015 07:28:00 GMT"
        server.route("/strong", .serve(Resource(body: body, etag: "\"v2\"", lastModified: lm)))
        server.route("/weak", .serve(Resource(body: body, etag: "W/\"v2\"")))
        server.route("/norange", .serve(Resource(body: body, etag: "\"v2\""), ServeOptions(honorRange: false)))

        func get(_ path: String, ifRange: String?) async throws -> (Int, Data) {
            var request = URLRequest(url: server.url(path))
            request.setValue("bytes=1000-", forHTTPHeaderField: "Range")
            if let ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
            let (data, response) = try await fetch(request)
            return (response.statusCode, data)
        }

        let mismatch = try await get("/strong", ifRange: "\"v1\"")
        #expect(mismatch.0 == 200)
        #expect(mismatch.1 == body)
        let match = try await get("/strong", ifRange: "\"v2\"")
        #expect(match.0 == 206)
        #expect(match.1 == body[1000...])
        let byDate = try await get("/strong", ifRange: lm)
        #expect(byDate.0 == 206)
        let weak = try await get("/weak", ifRange: "W/\"v2\"")
        #expect(weak.0 == 200)
        #expect(weak.1 == body)
        let weakNoIfRange = try await get("/weak", ifRange: nil)
        #expect(weakNoIfRange.0 == 206)
        let ignored = try await get("/norange", ifRange: nil)
        #expect(ignored.0 == 200)
        #expect(ignored.1 == body)
    }

    @Test func unsatisfiableRangeGives416() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/r", .serve(Resource(body: Resource.randomBytes(count: 1234, seed: 4))))
        let client = try RawClient(port: server.port)
        client.send("GET /r HTTP/1.1\r\nHost: x\r\nRange: bytes=1234-\r\nConnection: close\r\n\r\n")
        let resp = try #require(RawResponse(client.readToEOF().data))
        #expect(resp.status == 416)
        #expect(resp.header("Content-Range") == "bytes */1234")
        #expect(resp.body.isEmpty)
    }

    @Test func headSendsHeadersOnly() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 4096, seed: 5)
        server.route("/h", .serve(Resource(body: body, etag: "\"h\"", contentType: "text/plain")))
        server.route("/hc", .serve(Resource(body: body), ServeOptions(sendContentLength: false)))

        let client = try RawClient(port: server.port)
        client.send("HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let (raw, eof) = client.readToEOF()
        #expect(eof)
        let resp = try #require(RawResponse(raw))
        #expect(resp.status == 200)
        #expect(resp.header("Content-Length") == "4096")
        #expect(resp.header("Content-Type") == "text/plain")
        #expect(resp.header("ETag") == "\"h\"")
        #expect(resp.body.isEmpty)

        // Chunked HEAD on a keep-alive connection, followed by a GET on the same connection.
        let c2 = try RawClient(port: server.port)
        c2.send("HEAD /hc HTTP/1.1\r\nHost: x\r\n\r\nGET /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let both = c2.readToEOF().data
        let text = String(decoding: both, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let first = try #require(RawResponse(both))
        #expect(first.header("Transfer-Encoding") == "chunked")
        #expect(first.body.starts(with: Data("HTTP/1.1 200 OK\r\n".utf8)))  // no body, no terminator
        let second = try #require(RawResponse(first.body))
        #expect(second.body == body)
        #expect(server.connectionsAccepted == 2)

        var request = URLRequest(url: server.url("/h"))
        request.httpMethod = "HEAD"
        let (data, response) = try await fetch(request)
        #expect(response.statusCode == 200)
        #expect(data.isEmpty)
        #expect(server.requests("/h").map(\.method) == ["GET"])
        #expect(server.headRequests("/h").count == 2)
    }

    @Test func chunkedWithoutContentLength() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 700_000, seed: 6)
        server.route("/c", .serve(Resource(body: body), ServeOptions(sendContentLength: false)))
        let client = try RawClient(port: server.port)
        client.send("GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let resp = try #require(RawResponse(client.readToEOF().data))
        #expect(resp.status == 200)
        #expect(resp.header("Content-Length") == nil)
        #expect(resp.header("Transfer-Encoding") == "chunked")
        #expect(resp.dechunked() == body)

        let (data, response) = try await fetch(URLRequest(url: server.url("/c")))
        #expect(response.statusCode == 200)
        #expect(data == body)
    }

    @Test func cutAfterDeliversExactlyNBytesThenCloses() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 7)
        server.route("/cut", .serve(Resource(body: body), ServeOptions(cutAfter: 300_001)))
        let client = try RawClient(port: server.port)
        client.send("GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")  // keep-alive: only the cut ends it
        let (raw, eof) = client.readToEOF()
        #expect(eof)
        let resp = try #require(RawResponse(raw))
        #expect(resp.status == 200)
        #expect(resp.header("Content-Length") == String(body.count))
        #expect(resp.body.count == 300_001)
        #expect(resp.body == body.prefix(300_001))

        // A client sees the truncation as an error.
        await #expect(throws: (any Error).self) {
            _ = try await fetch(URLRequest(url: server.url("/cut")))
        }
    }

    @Test func scriptedBehaviors() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 2048, seed: 8)
        server.route("/s", [.status(503, headers: [("Retry-After", "2")]), .serve(Resource(body: body))])
        server.route("/moved", .redirect(302, location: "/s"))
        server.route("/created", .status(201, body: Data("made".utf8)))

        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let (d1, r1) = try await fetch(URLRequest(url: server.url("/s")), session: session)
        #expect(r1.statusCode == 503)
        #expect(r1.value(forHTTPHeaderField: "Retry-After") == "2")
        #expect(d1.isEmpty)
        let (d2, r2) = try await fetch(URLRequest(url: server.url("/s")), session: session)
        #expect(r2.statusCode == 200)
        #expect(d2 == body)
        let (d3, r3) = try await fetch(URLRequest(url: server.url("/moved")), session: session)  // followed
        #expect(r3.statusCode == 200)
        #expect(d3 == body)
        #expect(server.requests("/moved").count == 1)
        #expect(server.requests("/s").count == 3)
        let (d4, r4) = try await fetch(URLRequest(url: server.url("/created")), session: session)
        #expect(r4.statusCode == 201)
        #expect(d4 == Data("made".utf8))
        let (_, r5) = try await fetch(URLRequest(url: server.url("/nowhere")), session: session)
        #expect(r5.statusCode == 404)
        #expect(server.allRequests.count == 6)
        #expect(server.connectionsAccepted == 1)  // keep-alive reuse
    }

    @Test func closeWithoutResponseAndHang() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/close", .closeWithoutResponse)
        server.route("/hang", .hang)

        let c1 = try RawClient(port: server.port)
        c1.send("GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
        let (raw, eof) = c1.readToEOF()
        #expect(eof)
        #expect(raw.isEmpty)

        let c2 = try RawClient(port: server.port, timeoutSeconds: 1)
        c2.send("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        let (hung, hungEOF) = c2.readToEOF()
        #expect(!hungEOF)
        #expect(hung.isEmpty)
        #expect(server.currentConcurrentRequests == 1)
        #expect(server.requests("/hang").count == 1)
        shutdown(c2.fd, Int32(SHUT_RDWR))
        #expect(serverEventually { server.currentConcurrentRequests == 0 })
    }

    @Test func concurrencyCounter() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 20_000, seed: 9)
        // Each request lasts ~2.7 s, so the four overlap even when the test tasks start late on a busy machine.
        server.route("/slow", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 40_000, delayBeforeHead: 2.2)))
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let n = 4
        let results = try await withThrowingTaskGroup(of: Data.self) { group in
            for i in 0..<n {
                group.addTask { try await fetch(URLRequest(url: server.url("/slow?i=\(i)")), session: session).0 }
            }
            var all: [Data] = []
            for try await d in group { all.append(d) }
            return all
        }
        #expect(results.count == n)
        #expect(results.allSatisfy { $0 == body })
        #expect(server.maxConcurrentRequests == n)
        #expect(serverEventually { server.currentConcurrentRequests == 0 })
        server.resetCounters()
        #expect(server.maxConcurrentRequests == 0)
    }

    @Test func throttleSlowsTheBody() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 100_000, seed: 10)
        server.route("/t", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 200_000)))
        let client = try RawClient(port: server.port)
        let start = Date()
        client.send("GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let resp = try #require(RawResponse(client.readToEOF().data))
        let elapsed = Date().timeIntervalSince(start)
        #expect(resp.body == body)
        #expect(elapsed > 0.4)  // slowed down; no upper bound: the machine may be busy
    }

    @Test func putBodyRecorded() async throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/up", .status(201, headers: [("Location", "/up/1")], body: Data("ok".utf8)))
        let payload = Resource.randomBytes(count: 3 << 20, seed: 11)
        var request = URLRequest(url: server.url("/up?part=1"))
        request.httpMethod = "PUT"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.upload(for: request, from: payload)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(data == Data("ok".utf8))
        let rec = try #require(server.requests("/up").first)
        #expect(rec.method == "PUT")
        #expect(rec.bodyLength == payload.count)
        #expect(rec.bodySHA256 == sha256Hex(payload))
        #expect(rec.body == payload)
        #expect(rec.header("content-type") == "application/octet-stream")
    }

    @Test func chunkedRequestBodyRecorded() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/up", .status(204))
        let client = try RawClient(port: server.port)
        client.send("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        let resp = try #require(RawResponse(client.readToEOF().data))
        #expect(resp.status == 204)
        let rec = try #require(server.requests("/up").first)
        #expect(rec.chunked)
        #expect(rec.bodyLength == 11)
        #expect(rec.body == Data("hello world".utf8))
        #expect(rec.bodySHA256 == sha256Hex(Data("hello world".utf8)))
    }

    @Test func expectContinueAnswered() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/up", .status(201))
        let client = try RawClient(port: server.port)
        client.send("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
        let interim = client.readUntil("\r\n\r\n")
        #expect(String(decoding: interim, as: UTF8.self).hasPrefix("HTTP/1.1 100 Continue\r\n"))
        #expect(server.requests("/up").isEmpty)  // recorded only once the body arrived
        client.send("abcde")
        let resp = try #require(RawResponse(client.readToEOF().data))
        #expect(resp.status == 201)
        let rec = try #require(server.requests("/up").first)
        #expect(rec.expectContinue)
        #expect(rec.bodyLength == 5)
    }

    @Test func malformedRequestGets400() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        server.route("/up", .status(201))
        let client = try RawClient(port: server.port)
        client.send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        let (raw, eof) = client.readToEOF()
        #expect(eof)
        let resp = try #require(RawResponse(raw))
        #expect(resp.status == 400)
        #expect(server.badRequests == 1)
        #expect(server.allRequests.isEmpty)
        #expect(serverEventually { server.currentConcurrentRequests == 0 })
    }

    @Test func shutdownIsIdempotentAndClosesConnections() throws {
        let server = try TestHTTPServer()
        server.route("/hang", .hang)
        let client = try RawClient(port: server.port)
        client.send("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(serverEventually { !server.requests("/hang").isEmpty })
        server.shutdown()
        server.shutdown()
        let (_, eof) = client.readToEOF()
        #expect(eof)
        #expect(throws: (any Error).self) { _ = try RawClient(port: server.port) }
    }
}
