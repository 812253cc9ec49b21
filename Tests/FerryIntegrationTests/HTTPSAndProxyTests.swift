@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// https through ferry's transport against an in-process TLS server whose certificate the test makes, and
/// proxies from the environment as curl reads them, through a tiny forward proxy that counts requests.
@Suite struct HTTPSAndProxyTests {
    let https: TrustedHTTPS
    var server: TestHTTPServer { https.server }
    var dir: TempDir { https.dir }
    var caFile: String { https.caFile }

    init() throws {
        https = try TrustedHTTPS()
    }

    func trustingConfiguration() -> EngineConfiguration { https.configuration() }

    @Test func aDownloadOverHTTPSIsIdentical() async throws {
        let body = Resource.randomBytes(count: 3 << 20, seed: 71)
        server.route("/tls.bin", .serve(Resource(body: body)))
        let manager = try TransferManager(configuration: trustingConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/tls.bin", host: "localhost"), directory: dir.path))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("tls.bin") == body)
    }

    @Test func aCutHTTPSDownloadResumesWithOneRangedRequest() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 72)
        let resource = Resource(body: body, etag: "\"tls-v1\"")
        server.route("/cut.bin", [.serve(resource, ServeOptions(cutAfter: 1 << 20)), .serve(resource)])
        let manager = try TransferManager(configuration: trustingConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/cut.bin"), directory: dir.path))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("cut.bin") == body)
        let requests = server.requests("/cut.bin")
        #expect(requests.count == 2)
        let range = try #require(requests.last?.header("Range"))
        #expect(range.hasPrefix("bytes=") && range != "bytes=0-", "\(range)")
        #expect(requests.last?.header("If-Range") == "\"tls-v1\"")
    }

    @Test func anUploadOverHTTPSArrivesWhole() async throws {
        let body = Resource.randomBytes(count: 5 << 20, seed: 73)
        let file = dir.path + "/up.bin"
        try body.write(to: URL(fileURLWithPath: file))
        server.route("/up", .status(201, body: Data("stored\n".utf8)))
        let manager = try TransferManager(configuration: trustingConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: file), contentType: "application/octet-stream")), to: server.url("/up")))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        let received = try #require(server.requests("/up").first)
        #expect(received.method == "PUT")
        #expect(received.bodySHA256 == sha256Hex(body))
        #expect(!received.chunked)
    }

    @Test func aCertificateFromAnUntrustedAuthorityFailsAndSaysSo() async throws {
        server.route("/secret.bin", .serve(Resource(body: Data("secret".utf8))))
        // The system's trust store, which does not know the test's CA.
        let result = try await runFerry(["get", "--no-tui", "--retries", "0", "-o", dir.path,
                                         server.url("/secret.bin").absoluteString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("TLS: the certificate of 127.0.0.1:\(server.port) is not trusted"), "\(result.stderr)")
        #expect(result.stderr.contains("SSL_CERT_FILE"))
        #expect(server.requests("/secret.bin").isEmpty)
        #expect(!dir.files().contains("secret.bin"))
    }

    @Test func httpProxyFromTheEnvironmentCarriesPlainRequests() async throws {
        let plain = try TestHTTPServer()
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 74)
        plain.route("/via.bin", .serve(Resource(body: body)))
        let url = plain.url("/via.bin").absoluteString
        let result = try await runFerry(["get", "--no-tui", "-o", dir.path, url],
                                        environment: ["http_proxy": proxy.url.absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("via.bin") == body)
        #expect(proxy.requests == ["GET \(url)"])
    }

    @Test func httpsProxyTunnelsAndSSLCertFileIsTrusted() async throws {
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 75)
        server.route("/tunnel.bin", .serve(Resource(body: body)))
        let result = try await runFerry(["get", "--no-tui", "-o", dir.path, server.url("/tunnel.bin").absoluteString],
                                        environment: ["HTTPS_PROXY": proxy.url.absoluteString, "SSL_CERT_FILE": caFile])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("tunnel.bin") == body)
        #expect(proxy.requests == ["CONNECT 127.0.0.1:\(server.port)"])
    }

    /// A tree's own requests (its listings) go as its files do: through the proxy, trusting SSL_CERT_FILE. They
    /// went direct with the system's CAs only: behind a proxy, or with a CA of one's own, `get -r` listed nothing.
    @Test func aTreeIsListedThroughTheProxyTrustingSSLCertFile() async throws {
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let top = Resource.randomBytes(count: 3_000, seed: 76), below = Resource.randomBytes(count: 5_000, seed: 77)
        server.route("/tree/", TreeTests.index(["a.bin", "sub/"]))
        server.route("/tree/sub/", TreeTests.index(["b.bin"]))
        server.route("/tree/a.bin", .serve(Resource(body: top)))
        server.route("/tree/sub/b.bin", .serve(Resource(body: below)))
        let result = try await runFerry(["get", "-r", "--no-tui", "-o", dir.path, server.url("/tree/").absoluteString],
                                        environment: ["HTTPS_PROXY": proxy.url.absoluteString, "SSL_CERT_FILE": caFile])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("a.bin") == top)
        #expect(dir.contents("sub/b.bin") == below)
        #expect(server.requests("/tree/sub/").count == 1)
        // Every connection, the listings' and the files', through the proxy (without it the listings failed first).
        #expect(!proxy.requests.isEmpty && proxy.requests.allSatisfy { $0 == "CONNECT 127.0.0.1:\(server.port)" }, "\(proxy.requests)")
    }

    /// `put -r`'s own requests (the PROPFINDs and MKCOLs before the uploads) too.
    @Test func aTreeGoesUpThroughTheProxyTrustingSSLCertFile() async throws {
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 4_000, seed: 78)
        try writeFiles(["d/f.bin": body], under: dir.path + "/src")
        server.route("/up/", TreeTests.davListing("/up/", []))
        server.route("/up/d/", .status(201))
        server.route("/up/d/f.bin", .status(201))
        let result = try await runFerry(["put", "-r", dir.path + "/src", server.url("/up/").absoluteString, "--no-tui"],
                                        environment: ["HTTPS_PROXY": proxy.url.absoluteString, "SSL_CERT_FILE": caFile])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.allRequests.map { "\($0.method) \($0.uri)" }.starts(with: ["PROPFIND /up/", "MKCOL /up/d/"]),
                "\(server.allRequests.map { "\($0.method) \($0.uri)" })")
        #expect(server.requests("/up/d/f.bin").map(\.bodySHA256) == [sha256Hex(body)])
        #expect(!proxy.requests.isEmpty && proxy.requests.allSatisfy { $0 == "CONNECT 127.0.0.1:\(server.port)" }, "\(proxy.requests)")
    }

    @Test func noProxyListsHostsThatGoDirect() async throws {
        let plain = try TestHTTPServer()
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        plain.route("/direct.bin", .serve(Resource(body: Data("direct".utf8))))
        let result = try await runFerry(["get", "--no-tui", "-o", dir.path, plain.url("/direct.bin").absoluteString],
                                        environment: ["http_proxy": proxy.url.absoluteString, "no_proxy": "127.0.0.1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(proxy.requests.isEmpty)
        #expect(plain.requests("/direct.bin").count == 1)
    }
}
