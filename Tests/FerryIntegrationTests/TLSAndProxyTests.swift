import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Testing
import TestHTTPServer

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Helpers

/// What a TLS client connection read before it ended, and the error that ended it, if any.
private struct TLSExchange {
    var data: Data
    var error: (any Error)?

    var response: RawResponse? { RawResponse(data) }
}

/// Collects everything read until the connection ends.
private final class CollectHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var data = Data()
    private var error: (any Error)?
    private var done = false
    private let promise: EventLoopPromise<TLSExchange>

    init(promise: EventLoopPromise<TLSExchange>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        self.data.append(contentsOf: buffer.readableBytesView)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.error == nil { self.error = error }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            done = true
            promise.succeed(TLSExchange(data: data, error: error))
        }
        context.fireChannelInactive()
    }
}

/// Sends `request` (+ `body`) over TLS, trusting only `ca`'s certificate, and reads until the connection
/// ends (at most 60 s). `hostname` nil: the certificate must match the IP address 127.0.0.1. `socket`: an
/// already connected descriptor (e.g. a tunnel through the proxy), taken over by the exchange.
private func tlsExchange(
    port: Int, trusting ca: TestCertificateAuthority, hostname: String? = nil,
    request: String, body: Data = Data(), socket: Int32? = nil
) async throws -> TLSExchange {
    var configuration = TLSConfiguration.makeClientConfiguration()
    configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: ca.caDER, format: .der)])
    let sslContext = try NIOSSLContext(configuration: configuration)
    let group = MultiThreadedEventLoopGroup.singleton
    let promise = group.next().makePromise(of: TLSExchange.self)
    let bootstrap = ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
                try channel.pipeline.syncOperations.addHandler(CollectHandler(promise: promise))
            }
        }
    let channel: any Channel
    if let socket {
        channel = try await bootstrap.withConnectedSocket(socket).get()
    } else {
        channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
    }
    channel.eventLoop.scheduleTask(in: .seconds(60)) { channel.close(promise: nil) }
    var buffer = channel.allocator.buffer(capacity: request.utf8.count + body.count)
    buffer.writeString(request)
    buffer.writeBytes(body)
    channel.writeAndFlush(buffer, promise: nil)
    return try await promise.futureResult.get()
}

/// Asks the proxy on `client`'s connection for a tunnel to 127.0.0.1:`port`; returns the proxy's answer head.
private func openTunnel(_ client: RawClient, to port: Int) -> String {
    client.send("CONNECT 127.0.0.1:\(port) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
    return String(decoding: client.readUntil("\r\n\r\n"), as: UTF8.self)
}

// MARK: - Tests

@Suite struct TLSAndProxyTests {
    @Test func certificateAuthoritiesAreDistinctAndWritable() throws {
        let a = try TestCertificateAuthority()
        let b = try TestCertificateAuthority(1)
        #expect(a.caPEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(a.serverCertificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(a.serverPrivateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(a.caDER != b.caDER)
        #expect(a.commonName != b.commonName)
        #expect(b.commonName == "ferry test CA 2")
        #expect(try NIOSSLCertificate(bytes: b.serverCertificateDER, format: .der) != NIOSSLCertificate(bytes: a.serverCertificateDER, format: .der))
        #expect(Set((0..<TestCertificateAuthority.count).map { try! TestCertificateAuthority($0).caDER }).count == TestCertificateAuthority.count)
        let certificate = try NIOSSLCertificate(bytes: a.caDER, format: .der)
        #expect(try NIOSSLCertificate(bytes: Array(a.caPEM.utf8), format: .pem) == certificate)

        let dir = try TempDir()
        let path = dir.path + "/ca.pem"
        try a.writeCAPEM(to: path)
        #expect(String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self) == a.caPEM)
    }

    @Test func httpsServesWithTheCAsCertificate() async throws {
        let ca = try TestCertificateAuthority()
        let server = try TestHTTPServer(tls: ca)
        defer { server.shutdown() }
        #expect(server.url("/f?x=1").absoluteString == "https://127.0.0.1:\(server.port)/f?x=1")
        #expect(server.url("/f", host: "localhost").absoluteString == "https://localhost:\(server.port)/f")
        #expect(server.scheme == "https")
        #expect(server.certificateAuthority?.caPEM == ca.caPEM)
        let body = Resource.randomBytes(count: 1 << 20, seed: 21)
        server.route("/f", .serve(Resource(body: body, etag: "\"t\"")))

        // By IP address (the certificate's 127.0.0.1), then by name (its "localhost").
        for hostname in [nil, "localhost"] {
            let exchange = try await tlsExchange(
                port: server.port, trusting: ca, hostname: hostname,
                request: "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(exchange.error == nil)
            let response = try #require(exchange.response)
            #expect(response.status == 200)
            #expect(response.header("ETag") == "\"t\"")
            #expect(response.body == body)
        }
        #expect(server.requests("/f").count == 2)

        let plain = try TestHTTPServer()  // init() is still plain HTTP
        defer { plain.shutdown() }
        #expect(plain.url("/f").absoluteString == "http://127.0.0.1:\(plain.port)/f")
        #expect(plain.scheme == "http")
        #expect(plain.certificateAuthority == nil)
    }

    @Test func httpsRefusedByAClientTrustingAnotherCA() async throws {
        let ca = try TestCertificateAuthority()
        let other = try TestCertificateAuthority(1)
        let server = try TestHTTPServer(tls: ca)
        defer { server.shutdown() }
        server.route("/f", .status(200, body: Data("ok".utf8)))

        let refused = try await tlsExchange(
            port: server.port, trusting: other, request: "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(refused.data.isEmpty)
        guard case .handshakeFailed = refused.error as? NIOSSLError else {
            Issue.record("expected a handshake failure, got \(String(describing: refused.error))")
            return
        }
        // The server goes on.
        let accepted = try await tlsExchange(
            port: server.port, trusting: ca, request: "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(accepted.response?.body == Data("ok".utf8))
        #expect(server.requests("/f").count == 1)
        #expect(server.connectionsAccepted == 2)
        #expect(serverEventually { server.currentConcurrentRequests == 0 })
    }

    @Test func httpsLargeBodyRangeAndUploads() async throws {
        let ca = try TestCertificateAuthority()
        let server = try TestHTTPServer(tls: ca)
        defer { server.shutdown() }
        let big = Resource.randomBytes(count: 64 << 20, seed: 22)
        server.route("/big", .serve(Resource(body: big, etag: "\"b\"")))
        server.route("/up", .status(201))

        let whole = try await tlsExchange(
            port: server.port, trusting: ca, request: "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let response = try #require(whole.response)
        #expect(response.status == 200)
        #expect(response.body.count == big.count)
        #expect(sha256Hex(response.body) == sha256Hex(big))

        let resumed = try await tlsExchange(
            port: server.port, trusting: ca,
            request: "GET /big HTTP/1.1\r\nHost: x\r\nRange: bytes=1000000-\r\nIf-Range: \"b\"\r\nConnection: close\r\n\r\n")
        let partial = try #require(resumed.response)
        #expect(partial.status == 206)
        #expect(partial.header("Content-Range") == "bytes 1000000-\(big.count - 1)/\(big.count)")
        #expect(partial.body == big[1_000_000...])

        let payload = Resource.randomBytes(count: 3 << 20, seed: 23)
        let put = try await tlsExchange(
            port: server.port, trusting: ca,
            request: "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n",
            body: payload)
        #expect(put.response?.status == 201)
        let chunked = try await tlsExchange(
            port: server.port, trusting: ca,
            request: "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        #expect(chunked.response?.status == 201)
        let recorded = server.requests("/up")
        #expect(recorded.count == 2)
        #expect(recorded.first?.bodySHA256 == sha256Hex(payload))
        #expect(recorded.last?.chunked == true)
        #expect(recorded.last?.body == Data("hello world".utf8))
    }

    @Test func httpsMisbehaviors() async throws {
        let ca = try TestCertificateAuthority()
        let server = try TestHTTPServer(tls: ca)
        defer { server.shutdown() }
        let body = Resource.randomBytes(count: 1 << 20, seed: 24)
        server.route("/cut", .serve(Resource(body: body), ServeOptions(cutAfter: 300_001)))
        server.route("/close", .closeWithoutResponse)
        let slowBody = Resource.randomBytes(count: 100_000, seed: 25)
        server.route("/slow", .serve(Resource(body: slowBody), ServeOptions(bytesPerSecond: 200_000)))

        let cut = try await tlsExchange(
            port: server.port, trusting: ca, request: "GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")  // keep-alive: only the cut ends it
        let cutResponse = try #require(cut.response)
        #expect(cutResponse.header("Content-Length") == String(body.count))
        #expect(cutResponse.body == body.prefix(300_001))

        let closed = try await tlsExchange(port: server.port, trusting: ca, request: "GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(closed.data.isEmpty)
        #expect(server.requests("/close").count == 1)

        let start = Date()
        let slow = try await tlsExchange(
            port: server.port, trusting: ca, request: "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(Date().timeIntervalSince(start) > 0.4)
        #expect(slow.response?.body == slowBody)
    }

    @Test func proxyForwardsAbsoluteFormRequests() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 700_000, seed: 26)
        server.route("/p", .serve(Resource(body: body)))
        server.route("/up", .status(201, body: Data("stored".utf8)))
        let origin = "http://127.0.0.1:\(server.port)"

        let get = try RawClient(port: proxy.port)
        get.send("GET \(origin)/p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nProxy-Connection: keep-alive\r\n\r\n")
        let (raw, eof) = get.readToEOF()
        #expect(eof)  // the proxy ends the connection after the answer
        let response = try #require(RawResponse(raw))
        #expect(response.status == 200)
        #expect(response.header("Connection") == "close")
        #expect(response.body == body)
        let seen = try #require(server.requests("/p").first)
        #expect(seen.uri == "/p?q=1")
        #expect(seen.header("Host") == "127.0.0.1:\(server.port)")
        #expect(seen.header("Connection") == "close")
        #expect(seen.header("Proxy-Connection") == nil)

        // Bodies: 10 MiB with Content-Length, and chunked.
        let payload = Resource.randomBytes(count: 10 << 20, seed: 27)
        let put = try RawClient(port: proxy.port)
        put.send("PUT \(origin)/up HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(payload.count)\r\n\r\n")
        put.send(payload)
        let putResponse = try #require(RawResponse(put.readToEOF().data))
        #expect(putResponse.status == 201)
        #expect(putResponse.body == Data("stored".utf8))
        let post = try RawClient(port: proxy.port)
        post.send("POST \(origin)/up HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        #expect(RawResponse(post.readToEOF().data)?.status == 201)
        let uploads = server.requests("/up")
        #expect(uploads.count == 2)
        #expect(uploads.first?.bodyLength == payload.count)
        #expect(uploads.first?.bodySHA256 == sha256Hex(payload))
        #expect(uploads.last?.chunked == true)
        #expect(uploads.last?.body == Data("hello world".utf8))

        #expect(proxy.requests == ["GET \(origin)/p?q=1", "PUT \(origin)/up", "POST \(origin)/up"])
        #expect(proxy.refusedRequests.isEmpty)
        #expect(proxy.connectionsAccepted == 3)
        #expect(server.connectionsAccepted == 3)
    }

    @Test func proxyStreamsALargeBodyWithoutHoldingIt() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 64 << 20, seed: 28)
        server.route("/big", .serve(Resource(body: body)))

        let client = try RawClient(port: proxy.port, timeoutSeconds: 30)
        client.send("GET http://localhost:\(server.port)/big HTTP/1.1\r\nHost: localhost:\(server.port)\r\n\r\n")
        // The client reads nothing: the proxy must stop reading from the origin (the event waited for), not store
        // the body.
        #expect(serverEventually { proxy.readsHeld > 0 })
        #expect(proxy.maxBufferedBytes < 4 << 20)
        let response = try #require(RawResponse(client.readToEOF().data))
        #expect(response.status == 200)
        #expect(response.body.count == body.count)
        #expect(sha256Hex(response.body) == sha256Hex(body))
        // While the client drains, a busy machine can leave a few read bursts in flight (5.3 MiB was seen once
        // in CI under load); holding the 64 MiB body would still show here.
        #expect(proxy.maxBufferedBytes < 16 << 20)
        #expect(proxy.requests == ["GET http://localhost:\(server.port)/big"])
    }

    @Test func proxyTunnelsHTTPS() async throws {
        let ca = try TestCertificateAuthority()
        let server = try TestHTTPServer(tls: ca)
        defer { server.shutdown() }
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        let body = Resource.randomBytes(count: 2 << 20, seed: 29)
        server.route("/s", .serve(Resource(body: body)))

        let client = try RawClient(port: proxy.port)
        let answer = openTunnel(client, to: server.port)
        #expect(answer.hasPrefix("HTTP/1.1 200 "))
        let exchange = try await tlsExchange(
            port: server.port, trusting: ca, hostname: "localhost",
            request: "GET /s HTTP/1.1\r\nHost: localhost:\(server.port)\r\nConnection: close\r\n\r\n",
            socket: dup(client.fd))
        #expect(exchange.response?.status == 200)
        #expect(exchange.response?.body == body)
        #expect(proxy.requests == ["CONNECT 127.0.0.1:\(server.port)"])
        #expect(server.requests("/s").count == 1)
    }

    @Test func proxyRefusesWhatIsNotThisMachine() throws {
        let server = try TestHTTPServer()
        defer { server.shutdown() }
        let proxy = try TestForwardProxy()
        defer { proxy.shutdown() }
        server.route("/x", .status(200))

        // Loopback addresses other than 127.0.0.1 are refused too (and harmless if they were not).
        let get = try RawClient(port: proxy.port)
        get.send("GET http://127.0.0.2:\(server.port)/x HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n")
        #expect(RawResponse(get.readToEOF().data)?.status == 403)

        // Refused while a body is still coming: the answer is still read, not reset.
        let put = try RawClient(port: proxy.port)
        let payload = Resource.randomBytes(count: 1 << 20, seed: 30)
        put.send("PUT http://127.1.2.3/x HTTP/1.1\r\nHost: 127.1.2.3\r\nContent-Length: \(payload.count)\r\n\r\n")
        put.send(payload)
        #expect(RawResponse(put.readToEOF().data)?.status == 403)

        let connect = try RawClient(port: proxy.port)
        connect.send("CONNECT 127.0.0.2:443 HTTP/1.1\r\nHost: 127.0.0.2:443\r\n\r\n")
        #expect(RawResponse(connect.readToEOF().data)?.status == 403)

        let originForm = try RawClient(port: proxy.port)
        originForm.send("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(RawResponse(originForm.readToEOF().data)?.status == 400)

        #expect(proxy.requests.isEmpty)
        #expect(proxy.refusedRequests == [
            "GET http://127.0.0.2:\(server.port)/x", "PUT http://127.1.2.3/x", "CONNECT 127.0.0.2:443", "GET /x",
        ])
        #expect(server.allRequests.isEmpty)
        #expect(server.connectionsAccepted == 0)
    }
}
