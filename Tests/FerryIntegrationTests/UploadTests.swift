@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import NIOCore
import Synchronization
import Testing
import TestHTTPServer

/// A part of a multipart body, as `parseMultipart` took it apart.
struct ParsedPart {
    var headers: [String: String] = [:]
    var body = Data()
    /// A parameter of Content-Disposition, as sent (still escaped).
    func parameter(_ name: String) -> String? {
        guard let disposition = headers["content-disposition"] else { return nil }
        for piece in disposition.split(separator: ";") {
            let trimmed = piece.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix(name + "=") {
                return String(trimmed.dropFirst(name.count + 1)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        return nil
    }
}

struct MalformedMultipart: Error, CustomStringConvertible {
    var description: String
}

/// A multipart/form-data body taken apart by the RFC's grammar (RFC 2046 section 5.1.1, RFC 7578), strictly and
/// independently of ferry's encoder: a delimiter is CRLF, two dashes and the boundary (the first without the
/// CRLF), each part's header lines end in CRLF and an empty line, and the last delimiter ends in two dashes.
func parseMultipart(_ request: RecordedRequest) throws -> [ParsedPart] {
    let contentType = try #require(request.header("Content-Type"))
    let boundary = try #require(contentType.components(separatedBy: "boundary=").last)
    let body = [UInt8](request.body)
    let crlf: [UInt8] = [13, 10]
    let delimiter = crlf + Array("--\(boundary)".utf8)
    func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard needle.count <= body.count - start else { return nil }
        return (start...(body.count - needle.count)).first { body[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
    // The first delimiter opens the body (no preamble in what ferry sends).
    guard body.starts(with: delimiter.dropFirst(2)) else { throw MalformedMultipart(description: "the body does not open with --\(boundary)") }
    var at = delimiter.count - 2
    var parts: [ParsedPart] = []
    while true {
        // After a delimiter: "--" closes the body, CRLF opens a part.
        if body[at...].starts(with: Array("--".utf8)) { break }
        guard body[at...].starts(with: crlf) else { throw MalformedMultipart(description: "no CRLF after a delimiter at \(at)") }
        at += 2
        var part = ParsedPart()
        while true {
            guard let end = find(crlf, from: at) else { throw MalformedMultipart(description: "a header line without CRLF") }
            if end == at { at += 2; break }
            let line = String(decoding: body[at..<end], as: UTF8.self)
            guard let colon = line.firstIndex(of: ":") else { throw MalformedMultipart(description: "a header line without a colon: \(line)") }
            part.headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            at = end + 2
        }
        guard let next = find(delimiter, from: at) else { throw MalformedMultipart(description: "a part without a closing delimiter") }
        part.body = Data(body[at..<next])
        parts.append(part)
        at = next + delimiter.count
    }
    return parts
}

@Suite struct UploadTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    func file(_ name: String, _ data: Data) -> String {
        let path = dir.path + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: data)
        return path
    }

    /// The Content-Length path relies on blank Transfer-Encoding/Expect headers (libcurl would otherwise send
    /// chunked *and* Content-Length); the test server, like nginx, rejects that combination with 400.
    @Test func aSixtyFourMiBPutArrivesIdenticalWithContentLengthAndNoChunking() async throws {
        let body = Resource.randomBytes(count: 64 << 20, seed: 30)
        let path = file("big.bin", body)
        server.route("/up/big.bin", .status(201, body: Data("stored".utf8)))
        let result = try await runFerry(["put", path, server.url("/up/big.bin").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "stored")
        let requests = server.requests("/up/big.bin")
        try #require(requests.count == 1)
        #expect(requests[0].method == "PUT")
        #expect(requests[0].header("Content-Length") == "67108864")
        #expect(requests[0].header("Transfer-Encoding") == nil)
        #expect(!requests[0].chunked)
        #expect(requests[0].bodyLength == body.count)
        #expect(requests[0].bodySHA256 == sha256Hex(body))
        #expect(requests[0].header("Content-Type") == "application/octet-stream")
        #expect(server.badRequests == 0)
        #expect(result.stderr.contains("done, 64.0 MiB sent (HTTP 201)"))
    }

    @Test func aMultipartPostCarriesEveryFieldAndFile() async throws {
        let photo = Resource.randomBytes(count: 1_500_000, seed: 31)
        let notes = Data("line one\nline two\n".utf8)
        let photoPath = file("photo.jpg", photo)
        let notesPath = file("notes.txt", notes)
        server.route("/form", .status(200, body: Data("{\"ok\":true}".utf8)))
        let result = try await runFerry(["put", photoPath, server.url("/form").absoluteString, "--field", "image",
                                   "-F", "title=hello world", "-F", "city=Zürich 東京",
                                   "-F", "attachment=@\(notesPath);type=text/x-notes"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "{\"ok\":true}")
        let request = try #require(server.requests("/form").first)
        #expect(request.method == "POST")
        #expect(!request.chunked)
        #expect(request.header("Content-Length") == String(request.bodyLength))
        let parts = try parseMultipart(request)
        try #require(parts.count == 4)
        #expect(parts[0].parameter("name") == "image")
        #expect(parts[0].parameter("filename") == "photo.jpg")
        #expect(parts[0].headers["content-type"] == "image/jpeg")
        #expect(parts[0].body == photo)
        #expect(parts[1].parameter("name") == "title")
        #expect(String(decoding: parts[1].body, as: UTF8.self) == "hello world")
        #expect(parts[2].parameter("name") == "city")
        #expect(String(decoding: parts[2].body, as: UTF8.self) == "Zürich 東京")
        #expect(parts[3].parameter("name") == "attachment")
        #expect(parts[3].parameter("filename") == "notes.txt")
        #expect(parts[3].headers["content-type"] == "text/x-notes")
        #expect(parts[3].body == notes)
    }

    @Test func hostilePartNamesCannotInjectHeaders() async throws {
        let path = file("a.bin", Data("x".utf8))
        server.route("/inject", .status(200))
        let result = try await runFerry(["put", path, server.url("/inject").absoluteString,
                                   "--field", "f\"\r\nX-Injected: 1", "-F", "n\r\nContent-Type: evil=v"])
        #expect(result.status == 0, "\(result.stderr)")
        let parts = try parseMultipart(try #require(server.requests("/inject").first))
        try #require(parts.count == 2)
        #expect(parts.allSatisfy { $0.headers["x-injected"] == nil })
        #expect(parts[0].parameter("name") == "f%22%0D%0AX-Injected: 1")
        #expect(parts[1].headers["content-type"] == nil)
        #expect(String(decoding: parts[1].body, as: UTF8.self) == "v")
    }

    @Test func standardInputArrivesIdenticalAndChunkedEvenWhenItPauses() async throws {
        let first = Resource.randomBytes(count: 700_000, seed: 32)
        let second = Resource.randomBytes(count: 900_000, seed: 33)
        server.route("/stdin", .status(201, body: Data("got it".utf8)))
        let result = try await runFerry(["put", "-", server.url("/stdin").absoluteString]) { handle in
            handle.write(first)
            // A producer that stalls must not end the body: the second part is written only once the server has
            // the first (the body is on its way and waits), not after a guess at how long that takes.
            let deadline = Date().addingTimeInterval(60)
            while server.bytesReceived("/stdin").reduce(0, { $0 + $1.bytes }) < first.count, Date() < deadline { usleep(10_000) }
            handle.write(second)
            try? handle.close()
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "got it")
        let request = try #require(server.requests("/stdin").first)
        #expect(request.chunked)
        #expect(request.bodyLength == first.count + second.count)
        #expect(request.bodySHA256 == sha256Hex(first + second))
    }

    @Test func forbiddenFailsAfterOneRequestWithStatusOne() async throws {
        let path = file("a.txt", Data("secret".utf8))
        server.route("/deny", .status(403, body: Data("no \u{1B}[31mway".utf8)))
        let result = try await runFerry(["put", path, server.url("/deny").absoluteString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("HTTP 403 Forbidden"))
        #expect(result.stderr.contains("no ") && !result.stderr.contains("\u{1B}"))
        #expect(result.stdout.isEmpty)
        #expect(server.requests("/deny").count == 1)
    }

    /// A file that grows while it is sent: its first `length` bytes reached the server and the upload was called
    /// done (a file rewritten in place would have arrived old and new mixed). The last read fails now, so the
    /// server never has a whole body of a changed file, and the item fails saying why (`ferry retry` sends the
    /// file as it is then).
    @Test func aFileThatChangesWhileItIsSentIsNotCalledSent() async throws {
        // 4 s at its limit: the file grows long before its last read, however busy the machine.
        let first = Resource.randomBytes(count: 8 << 20, seed: 40)
        let more = Resource.randomBytes(count: 512 << 10, seed: 41)
        let path = file("grow.bin", first)
        server.route("/grow", .status(201, body: Data("stored".utf8)))
        let url = server.url("/grow").absoluteString
        let run = Task { try await runFerry(["put", "--limit-rate", "2M", path, url]) }
        try await eventually("the upload under way") { !server.bytesReceived("/grow").isEmpty }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: more)
        try handle.close()
        let result = try await run.value
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("#1 grow.bin: failed (file changed)"), "\(result.stderr)")
        #expect(result.stderr.contains("grow.bin changed while it was being uploaded (8388608 bytes when it began, 8912896 now)"),
                "\(result.stderr)")
        #expect(!server.requests("/grow").contains { $0.bodySHA256 == sha256Hex(first) }, "the old length, taken as a whole body")
    }

    @Test func aPutIsResentInFullAfter503s() async throws {
        let body = Resource.randomBytes(count: 2 << 20, seed: 34)
        let path = file("retry.bin", body)
        let busy = Behavior.status(503, headers: [("Retry-After", "0")])
        server.route("/retry", [busy, busy, .status(201, body: Data("finally".utf8))])
        let result = try await runFerry(["put", path, server.url("/retry").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "finally")
        let requests = server.requests("/retry")
        #expect(requests.count == 3)
        #expect(requests.allSatisfy { $0.bodyLength == body.count && $0.bodySHA256 == sha256Hex(body) })
    }

    @Test func aPostIsNotRetriedAfterA500() async throws {
        let path = file("p.bin", Data("p".utf8))
        server.route("/post500", [.status(500), .status(201)])
        let result = try await runFerry(["put", "-X", "POST", path, server.url("/post500").absoluteString])
        #expect(result.status == 1)
        #expect(server.requests("/post500").count == 1)
    }

    @Test func aPostIsRetriedAfterA503() async throws {
        let path = file("p.bin", Data("p".utf8))
        server.route("/post503", [.status(503, headers: [("Retry-After", "0")]), .status(201)])
        let result = try await runFerry(["put", "-X", "POST", path, server.url("/post503").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests("/post503").count == 2)
    }

    @Test func standardInputIsNeverResent() async throws {
        server.route("/once", [.status(503, headers: [("Retry-After", "0")]), .status(201)])
        let result = try await runFerry(["put", "-", server.url("/once").absoluteString]) { handle in
            handle.write(Data("only once".utf8))
            try? handle.close()
        }
        #expect(result.status == 1)
        #expect(result.stderr.contains("standard input cannot be sent again"))
        #expect(server.requests("/once").count == 1)
    }

    /// On Linux a 307/308 makes URLSession re-send the upload with an empty body and report success.
    @Test(arguments: [307, 308])
    func aRedirectedUploadIsNeverCalledASuccess(_ status: Int) async throws {
        let path = file("r.bin", Resource.randomBytes(count: 100_000, seed: 35))
        server.route("/moved", .redirect(status, location: server.url("/target").absoluteString))
        server.route("/target", .status(201))
        let result = try await runFerry(["put", path, server.url("/moved").absoluteString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("HTTP \(status)"))
        #expect(result.stderr.contains("redirected"))
        #expect(server.requests("/target").isEmpty)
    }

    @Test(arguments: [
        (["put", "/nonexistent/file", "http://127.0.0.1:1/x"], "No such file"),
        (["put", "/tmp", "http://127.0.0.1:1/x"], "directory"),
        (["put", "-", "notaurl"], "not a valid URL"),
        (["put", "-", "gopher://127.0.0.1/x"], "unsupported scheme"),
        (["put", "-", "http://127.0.0.1:1/x", "-F", "novalue"], "bad -F"),
        (["put", "-", "http://127.0.0.1:1/x", "-F", "=x"], "bad -F"),
        (["put", "-", "http://127.0.0.1:1/x", "-F", "f=@/nonexistent"], "No such file"),
        (["put", "-", "http://127.0.0.1:1/x", "-F", "a=b"], "standard input can only be sent as a raw body"),
        (["put", "-", "http://127.0.0.1:1/x", "-X", "DELETE"], "-X takes PUT or POST"),
    ])
    func badUploadInputExitsTwo(_ arguments: [String], _ message: String) async throws {
        let result = try await runFerry(arguments)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    /// A blocking body-stream read stalls every session of the process on Linux (their work queues share a
    /// serial target), so standard input is sent from the session's DispatchIO file source instead of a
    /// stream. Here a download must finish while the stdin producer is still stalled (it is only released
    /// after the download is done), and the body must still arrive whole.
    @Test func aStalledStandardInputDoesNotStallOtherTransfers() async throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        var configuration = testConfiguration()
        configuration.standardInputPath = "/dev/fd/\(fds[0])"
        configuration.idleTimeout = 120  // the stalled upload must outlive a slow download on a busy machine
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        server.route("/sink", .status(201))
        let body = Resource.randomBytes(count: 4 << 20, seed: 36)
        server.route("/file.bin", .serve(Resource(body: body)))
        let head = Data("start ".utf8)
        _ = head.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
        let upload = manager.add(TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.standardInput, contentType: "text/plain")),
                                              to: server.url("/sink")))
        try await eventually("the upload started") { manager.snapshot(of: upload)?.state == .running }
        // The upload waits on its pipe once the server has what was written (an event, not 200 ms).
        try await eventually("the server has the first bytes") {
            server.bytesReceived("/sink").reduce(0) { $0 + $1.bytes } >= head.count
        }
        let download = manager.add(TransferSpec(download: server.url("/file.bin"), directory: dir.path))
        try await finish(manager, [download], within: 20)
        #expect(manager.snapshot(of: download)?.state == .completed)
        #expect(manager.snapshot(of: upload)?.state == .running)
        let tail = Data("end".utf8)
        _ = tail.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
        close(fds[1])
        try await finish(manager, [upload], within: 20)
        #expect(manager.snapshot(of: upload)?.state == .completed)
        #expect(server.requests("/sink").first?.body == head + tail)
        #expect(manager.snapshot(of: upload)?.response?.status == 201)
    }

    @Test func theResponseIsKeptForTheDetailView() async throws {
        let path = file("d.json", Data("{}".utf8))
        let big = Data(repeating: UInt8(ascii: "a"), count: 100_000)
        server.route("/answer", .status(201, headers: [("Location", "/objects/7")], body: big))
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: path), contentType: "application/json")),
                                          to: server.url("/answer")))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed)
        #expect(item.progress == 1.0)
        #expect(item.displayName == "d.json")
        let response = try #require(item.response)
        #expect(response.status == 201)
        #expect(response.headers.contains(HTTPHeader(name: "Location", value: "/objects/7")))
        #expect(response.body.count == ServerResponse.bodyLimit)
        #expect(response.bodyLength == 100_000)
        #expect(response.truncated)
        #expect(server.requests("/answer").first?.header("Content-Type") == "application/json")
    }
}
