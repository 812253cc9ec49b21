@_spi(Testing) import FerryEngine
@testable import FerryTransport
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// ftp:// through the real engine against pyftpdlib's server, started for each test
/// on 127.0.0.1 (TestFTPServer). What the server sent or received is in its own log.
@Suite struct FTPTests {
    let dir: TempDir

    init() throws {
        dir = try TempDir()
    }

    func download(_ url: URL, _ manager: TransferManager, limit: Int64? = nil) -> TransferID {
        var spec = TransferSpec(download: url, directory: dir.path)
        spec.rateLimit = limit
        return manager.add(spec)
    }

    /// An upload of `body`, written here as `name`, into the server's `in/` (made for it), over `scheme`.
    func upload(_ body: Data, named name: String, to server: TestFTPServer, scheme: String = "ftp") throws -> TransferSpec {
        let local = dir.path + "/" + name
        try body.write(to: URL(fileURLWithPath: local))
        try server.put(Data(), at: "in/.keep")
        let (upload, url) = try UploadSpec.to(URL(string: server.url("in", scheme: scheme).absoluteString + "/")!, .file(path: local),
                                              contentType: nil, form: nil, method: nil)
        return TransferSpec(upload: upload, to: url)
    }

    @Test func anFTPDownloadArrivesWholeAndAPausedOneResumesWithTheRestOnly() async throws {
        let server = try TestFTPServer()
        let body = Resource.randomBytes(count: 8 << 20, seed: 50)
        try server.put(body, at: "pub/a file.bin")
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        // At 128 KiB/s: a minute to pause it in, however busy the machine.
        let id = download(server.url("pub/a file.bin"), manager, limit: 128 << 10)
        _ = try await pausePartWay(manager, id, part: dir.path + "/a file.bin.part")
        _ = manager.setRateLimit(id, nil)
        manager.resume(id)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(dir.contents("a file.bin") == body)
        // Where the resume began, as the attempt says it (a busy machine's last buffered bytes may reach the `.part`
        // file after the pause was seen, twice now after the test read its size: the resume rightly goes on from there).
        let kept = try #require(item.attempts.last?.fromOffset)
        #expect(kept > 0 && item.attempts.last?.restartedFrom == nil, "resumed, not started over: \(item.attempts)")
        // The resumed RETR sent exactly the rest. The server logs a transfer when its data connection closes, and
        // the paused one's may close after the resumed one's: its line can come last (a fresh run logged 5,046,272
        // bytes for it last, the rest before).
        try await eventually("the server logged the rest") { server.transfers.contains { $0.bytes == Int64(body.count) - kept } }
        #expect(server.transfers.count >= 2, "\(server.transfers), kept \(kept)")
    }

    /// `get -r` over ftp: the tree walked by its `LIST` lines, fetched keeping its layout; again, nothing is sent.
    @Test func aTreeIsWalkedOverFTPAndARerunFetchesNoFile() async throws {
        let server = try TestFTPServer()
        let files = ["top.txt": Data("top\n".utf8), "a b/inner é.txt": Data("inner\n".utf8),
                     "deep/l1/x.bin": Resource.randomBytes(count: 300_000, seed: 52)]
        for (path, body) in files { try server.put(body, at: "tree/" + path) }
        let out = dir.path + "/out"
        let url = server.url("tree").absoluteString + "/"
        let first = try await runFerry(["get", "-r", "--no-tui", "-o", out, url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("3 files in 4 directories: 3 to download, 0 already here, 0 left alone"), "\(first.stderr)")
        // The login in the URL is never printed.
        #expect(!first.stderr.contains(server.password), "\(first.stderr)")
        for (path, body) in files { #expect(FileManager.default.contents(atPath: out + "/" + path) == body, "\(path)") }
        try await eventually("the server logged the three") { server.transfers.filter { $0.what == "RETR" }.count >= 3 }
        let again = try await runFerry(["get", "-r", "--no-tui", "-o", out, url])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files in 4 directories: 0 to download, 3 already here, 0 left alone"), "\(again.stderr)")
        #expect(server.transfers.filter { $0.what == "RETR" }.count == 3, "\(server.transfers)")
    }

    /// `put -r` over ftp: each directory made (`MKD`), each file stored; again, nothing is stored.
    @Test func aTreeGoesUpOverFTPAndARerunStoresNothing() async throws {
        let server = try TestFTPServer()
        let source = dir.path + "/src"
        let files = ["top.txt": Data("top\n".utf8), "a b/inner é.txt": Data("inner\n".utf8),
                     "deep/l1/x.bin": Resource.randomBytes(count: 300_000, seed: 53)]
        try writeFiles(files, under: source)
        try FileManager.default.createDirectory(atPath: server.path("up"), withIntermediateDirectories: true)
        let url = server.url("up").absoluteString + "/"
        let first = try await runFerry(["put", "-r", "--no-tui", source, url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("3 files: 3 to upload, 0 already there, 3 directories made, 0 left out"), "\(first.stderr)")
        for (path, body) in files { #expect(FileManager.default.contents(atPath: server.path("up/" + path)) == body, "\(path)") }
        try await eventually("the server logged the three") { server.transfers.filter { $0.what == "STOR" }.count >= 3 }
        let again = try await runFerry(["put", "-r", "--no-tui", source, url])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files: 0 to upload, 3 already there, 0 directories made, 0 left out"), "\(again.stderr)")
        #expect(server.transfers.filter { $0.what == "STOR" }.count == 3, "\(server.transfers)")
    }

    @Test func aPausedFTPUploadAppendsOnlyTheRestOnceTheServersBytesCheckOut() async throws {
        let server = try TestFTPServer()
        let body = Resource.randomBytes(count: 8 << 20, seed: 51)
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        var spec = try upload(body, named: "up.bin", to: server)
        spec.rateLimit = 128 << 10
        let id = manager.add(spec)
        try await eventually("some sent") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
        manager.pause(id)
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        try await eventually("the server closed its copy") { server.transfers.count == 1 }
        let kept = try #require(server.transfers.first?.bytes)
        _ = manager.setRateLimit(id, nil)
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(FileManager.default.contents(atPath: server.path("in/up.bin")) == body)
        try await eventually("the append logged") { server.transfers.filter { $0.what == "STOR" }.count >= 2 }
        let stored = server.transfers.filter { $0.what == "STOR" }.map(\.bytes)
        #expect(stored.reduce(0, +) == Int64(body.count), "the file once in all: \(server.transfers)")
        #expect(server.transfers.contains { $0.what == "RETR" && $0.bytes == min(kept, 1 << 20) }, "its last MiB read back: \(server.transfers)")
    }

    /// ftp cannot tell an upload's end from a cut (the data connection's close is the end of the file), and a server
    /// that lost the tail still answers 226 (pyftpdlib did, with libcurl < 8.9 over TLS 1.3): the size is asked after
    /// each upload, and a short copy is a failure that is retried by appending the rest, never a done item.
    @Test func anUploadTheServerKeptShortIsNotDoneButSentOnToTheEnd() async throws {
        let server = try TestFTPServer()
        let body = Resource.randomBytes(count: 3 << 20, seed: 53)
        let local = dir.path + "/lossy-up.bin"
        try body.write(to: URL(fileURLWithPath: local))
        try server.put(Data(), at: "in/.keep")
        let run = try await runFerry(["put", "--no-tui", local, server.url("in").absoluteString + "/"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(FileManager.default.contents(atPath: server.path("in/lossy-up.bin")) == body)
        // The first attempt sent it all and the server kept 112 KiB: said, then the rest appended from there, as
        // the lines say (not "resuming at 3.0 MiB": what was sent is not what the server has).
        // (The retry's wait is said as what is left of it when the line is written: 1s, or 0s on a busy machine.)
        #expect(run.stderr.contains(": 127.0.0.1:\(server.port) kept 114688 of the 3145728 bytes of /in/lossy-up.bin though it said the upload ended well"),
                "\(run.stderr)")
        #expect(run.stderr.contains("#1 lossy-up.bin: retry 1/5 in "), "\(run.stderr)")
        // In this order (a progress line may come between them).
        let lines = run.stderr.split(separator: "\n").map(String.init)
        let asking = lines.firstIndex(of: "ferry: #1 lossy-up.bin: asking the server how much of the file it has (attempt 2)")
        let has = lines.firstIndex(of: "ferry: #1 lossy-up.bin: the server has 112.0 KiB; sending the rest")
        #expect(asking != nil && has != nil && asking! < has!, "\(run.stderr)")
        #expect(!run.stderr.contains("resuming at"), "\(run.stderr)")
        let stored = server.transfers.filter { $0.what == "STOR" }.map(\.bytes)
        #expect(stored == [Int64(body.count), Int64(body.count) - (112 << 10)], "\(server.transfers)")
    }

    @Test func aWrongPasswordIsLoginRefusedAndAMissingFileNoSuchFile() async throws {
        let server = try TestFTPServer()
        try server.put(Data(count: 10), at: "here.bin")
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let wrong = URL(string: "ftp://\(server.user):not-it@127.0.0.1:\(server.port)/here.bin")!
        let refused = download(wrong, manager)
        let missing = download(server.url("not here.bin"), manager)
        try await finish(manager, [refused, missing])
        #expect(manager.snapshot(of: refused)?.failure?.kind == .loginRefused, "\(manager.snapshot(of: refused)?.lastError ?? "")")
        #expect(manager.snapshot(of: refused)?.lastError?.contains("not-it") == false)
        #expect(manager.snapshot(of: missing)?.failure?.kind == .noSuchFile, "\(manager.snapshot(of: missing)?.lastError ?? "")")
        #expect(dir.files().isEmpty)
    }

    // MARK: ftps (explicit TLS)

    /// ftps://: TLS on the ftp port for the login and every byte, against pyftpdlib requiring it (TestFTPServer(tls:)),
    /// the certificate checked as https's is: a download and an upload byte for byte with the test's CA trusted;
    /// refused untrusted; and a server without TLS is refused before the login (the password never goes in the clear).
    /// libcurl before 8.9 can lose the tail of an ftps upload over TLS 1.3 (curl/curl#6149): there ftps stays at TLS 1.2.
    @Test func ftpsStaysAtTLS12WhereLibcurlLosesTheTailOfUploadsOverTLS13() {
        #expect(FTPPart.tlsCeiling(libcurl: "libcurl/7.88.1 OpenSSL/3.0.17 zlib/1.2.13") == 393_216)  // CURL_SSLVERSION_MAX_TLSv1_2
        #expect(FTPPart.tlsCeiling(libcurl: "libcurl/8.8.0 OpenSSL/3.3.0") == 393_216)  // CURL_SSLVERSION_MAX_TLSv1_2
        #expect(FTPPart.tlsCeiling(libcurl: "libcurl/8.9.0 OpenSSL/3.3.1") == nil)
        #expect(FTPPart.tlsCeiling(libcurl: "libcurl/8.11.1-DEV") == nil)
        // A version it cannot read: the safe side.
        #expect(FTPPart.tlsCeiling(libcurl: nil) == 393_216)  // CURL_SSLVERSION_MAX_TLSv1_2
        #expect(FTPPart.tlsCeiling(libcurl: "something else") == 393_216)  // CURL_SSLVERSION_MAX_TLSv1_2
    }

    @Test func ftpsMovesFilesOverTLSAndRefusesAnUntrustedServerOrOneWithoutTLS() async throws {
        let authority = try TestCertificateAuthority()
        let server = try TestFTPServer(tls: authority)
        let caFile = dir.path + "/ca.pem"
        try authority.writeCAPEM(to: caFile)
        var configuration = testConfiguration()
        configuration.transport.caFile = caFile
        let body = Resource.randomBytes(count: 3 << 20, seed: 60)
        try server.put(body, at: "pub/secret file.bin")
        let sending = try upload(body, named: "up.bin", to: server, scheme: "ftps")
        // Without the CA (an engine of its own, first: engines in one process share libcurl's connections): the
        // certificate is not trusted, nothing moves.
        let untrusting = try TransferManager(configuration: testConfiguration())
        defer { untrusting.shutdown() }
        try FileManager.default.createDirectory(atPath: dir.path + "/untrusted", withIntermediateDirectories: true)
        let refused = untrusting.add(TransferSpec(download: server.url("pub/secret file.bin", scheme: "ftps"), directory: dir.path + "/untrusted"))
        try await finish(untrusting, [refused])
        #expect(untrusting.snapshot(of: refused)?.failure?.kind == .tlsUntrusted, "\(untrusting.snapshot(of: refused)?.lastError ?? "")")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/untrusted/secret file.bin"))

        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let got = download(server.url("pub/secret file.bin", scheme: "ftps"), manager)
        let sent = manager.add(sending)
        try await finish(manager, [got, sent])
        #expect(manager.snapshot(of: got)?.state == .completed, "\(manager.snapshot(of: got)?.lastError ?? "")")
        #expect(manager.snapshot(of: sent)?.state == .completed, "\(manager.snapshot(of: sent)?.lastError ?? "")")
        #expect(dir.contents("secret file.bin") == body)
        #expect(FileManager.default.contents(atPath: server.path("in/up.bin")) == body)

        // A server without TLS (pyftpdlib's plain ftp): refused before the login, nothing moves.
        let plain = try TestFTPServer()
        try plain.put(body, at: "pub/x.bin")
        let clear = download(plain.url("pub/x.bin", scheme: "ftps"), manager)
        try await finish(manager, [clear])
        #expect(manager.snapshot(of: clear)?.state == .failed, "\(manager.snapshot(of: clear)?.lastError ?? "")")
        #expect(manager.snapshot(of: clear)?.lastError?.contains("does not take TLS") == true, "\(manager.snapshot(of: clear)?.lastError ?? "")")
        #expect(manager.snapshot(of: clear)?.failure?.kind == .tlsFailed)
        #expect(plain.transfers.isEmpty)
        #expect(!dir.files().contains("x.bin"))
    }
}
