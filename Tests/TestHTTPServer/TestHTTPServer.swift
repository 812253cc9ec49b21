import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) for tests: serves resources with
/// Range/If-Range/ETag, records requests, and misbehaves on request. Plain HTTP, or HTTPS with
/// a `TestCertificateAuthority`'s server certificate, which with `http2` offers HTTP/2 by ALPN (each
/// stream served as a request of its own, the same routes and misbehaviors; a close ends the stream).
public final class TestHTTPServer: Sendable {
    public let port: Int
    /// "https" when started with `tls`, else "http".
    public let scheme: String
    /// The CA whose server certificate this server presents (nil: plain HTTP).
    public let certificateAuthority: TestCertificateAuthority?
    let core: ServerCore
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel

    /// Binds 127.0.0.1:0 and starts serving: plain HTTP, or HTTPS with `tls`'s server certificate
    /// (same routes, misbehaviors and recording). A client that refuses the certificate only ends its
    /// own connection: nothing is recorded for it, and the server goes on.
    public init(tls: TestCertificateAuthority? = nil, http2: Bool = false) throws {
        precondition(!http2 || tls != nil, "HTTP/2 is offered over TLS (ALPN) only")
        let core = ServerCore()
        let sslContext = try tls.map { try Self.makeSSLContext($0, http2: http2) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                let connection = core.register(channel)
                // HTTP/1.1 on the connection, or on each stream of an HTTP/2 one (as HTTP/1 parts).
                let http1: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                            withErrorHandling: true,
                            withOutboundHeaderValidation: false)  // the server must be able to send hostile headers
                        try channel.pipeline.syncOperations.addHandler(ConnectionHandler(core: core, connection: connection))
                    }
                }
                let stream: @Sendable (any Channel) -> EventLoopFuture<Void> = { stream in
                    stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                        try stream.pipeline.syncOperations.addHandler(ConnectionHandler(core: core, connection: connection))
                    }
                }
                guard let sslContext else { return http1(channel) }
                do {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                guard http2 else { return http1(channel) }
                // What the client's ALPN picks: h2, or HTTP/1.1 when it offers nothing else.
                return channel.configureHTTP2SecureUpgrade(
                    h2ChannelConfigurator: { channel in
                        channel.configureHTTP2Pipeline(mode: .server, inboundStreamInitializer: stream).map { _ in () }
                    },
                    http1ChannelConfigurator: http1)
            }
        (serverChannel, port) = try bindLoopback(bootstrap, group: group)
        self.scheme = tls == nil ? "http" : "https"
        self.certificateAuthority = tls
        self.core = core
        self.group = group
    }

    private static func makeSSLContext(_ ca: TestCertificateAuthority, http2: Bool) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: ca.serverCertificateDER, format: .der))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: ca.serverPrivateKeyDER, format: .der)))
        // A close (cutAfter, closeWithoutResponse, Connection: close, shutdown) sends close_notify and then
        // waits this long for the client's before dropping the TCP connection (default 5 s: an idle pooled
        // client connection would hold up shutdown()).
        configuration.shutdownTimeout = .milliseconds(250)
        if http2 { configuration.applicationProtocols = ["h2", "http/1.1"] }
        return try NIOSSLContext(configuration: configuration)
    }

    deinit {
        shutdown()
    }

    /// `scheme://127.0.0.1:port` + `path` (path and query, starting with "/").
    public func url(_ path: String) -> URL {
        url(path, host: "127.0.0.1")
    }

    /// The same with another name for this machine, e.g. "localhost" (the server certificate is also valid
    /// for it). The server listens on 127.0.0.1 only.
    public func url(_ path: String, host: String) -> URL {
        let authority = host.contains(":") ? "[\(host)]" : host
        return URL(string: "\(scheme)://\(authority):\(port)\(path)")!
    }

    /// Idempotent: closes the listener and live connections, then shuts the event loops down.
    /// Must not be called from one of the server's own event loop threads.
    public func shutdown() {
        guard let children = core.beginShutdown() else { return }
        try? serverChannel.close().wait()
        // All at once: a TLS connection's close waits a moment for the client's close_notify.
        let closes = children.map { $0.close() }
        try? EventLoopFuture.andAllComplete(closes, on: group.next()).wait()
        try? group.syncShutdownGracefully()
    }

    /// Per-request script for `path` (no query): request k gets `behaviors[k]`, the last one
    /// repeats forever. Routing a path again replaces its script and restarts it.
    public func route(_ path: String, _ behaviors: [Behavior]) {
        precondition(!behaviors.isEmpty, "a route needs at least one behavior")
        core.setRoute(path, behaviors)
    }

    public func route(_ path: String, _ behavior: Behavior) {
        route(path, [behavior])
    }

    /// Closes the connections whose answers to `path` stalled (ServeOptions.stallAfter): the event a test
    /// waits for instead of a client's timeout. How many it closed.
    @discardableResult
    public func cutStalled(_ path: String) -> Int {
        let channels = core.state.withLock { $0.stalled.removeValue(forKey: path) ?? [] }
        for channel in channels { channel.close(promise: nil) }
        return channels.count
    }

    /// HEAD requests to `path` get `behavior` instead of the route's current one.
    public func routeHead(_ path: String, _ behavior: Behavior) {
        core.state.withLock { $0.headRoutes[path] = behavior }
    }

    /// Requests to `path` (matched without query), in arrival order; HEAD requests are kept apart.
    public func requests(_ path: String) -> [RecordedRequest] {
        core.state.withLock { $0.requests.filter { $0.path == path } }
    }

    /// HEAD requests to `path`. They are answered by the route's current behavior without moving its script
    /// on.
    public func headRequests(_ path: String) -> [RecordedRequest] {
        core.state.withLock { $0.headRequests.filter { $0.path == path } }
    }

    /// Body bytes the server wrote for `path` (each sample when a write completed, so at the client's pace).
    public func bytesSent(_ path: String) -> [TrafficSample] {
        core.state.withLock { $0.sent[path] ?? [] }
    }

    /// Body bytes the server read for `path`, as they arrived.
    public func bytesReceived(_ path: String) -> [TrafficSample] {
        core.state.withLock { $0.received[path] ?? [] }
    }

    public var allRequests: [RecordedRequest] {
        core.state.withLock { $0.requests }
    }

    /// Peak number of requests in flight: from request head received to response fully written
    /// (or connection closed).
    public var maxConcurrentRequests: Int {
        core.state.withLock { $0.maxInFlight }
    }

    public var currentConcurrentRequests: Int {
        core.state.withLock { $0.inFlight }
    }

    /// Malformed requests (NIO decoder errors) answered with 400 and a close. Not recorded.
    public var badRequests: Int {
        core.state.withLock { $0.badRequests }
    }

    /// Connections accepted so far.
    public var connectionsAccepted: Int {
        core.connections.connectionsAccepted
    }

    /// Sets the peak to the current in-flight count and zeroes `badRequests` and
    /// `connectionsAccepted`. Recorded requests and route scripts are kept.
    public func resetCounters() {
        core.connections.resetAccepted()
        core.state.withLock {
            $0.maxInFlight = $0.inFlight
            $0.badRequests = 0
        }
    }

    /// Forgets all recorded requests.
    public func clearRequests() {
        core.state.withLock {
            $0.requests.removeAll()
            $0.headRequests.removeAll()
        }
    }
}

enum TestHTTPServerError: Error {
    case noPort
}

/// State shared between the public API and the connection handlers.
final class ServerCore: Sendable {
    struct Route {
        var behaviors: [Behavior]
        var next = 0
        /// The behavior the next request gets (the script's last one repeats).
        var current: Behavior { behaviors[min(next, behaviors.count - 1)] }
    }

    struct State {
        var routes: [String: Route] = [:]
        var requests: [RecordedRequest] = []
        var headRequests: [RecordedRequest] = []
        var sent: [String: [TrafficSample]] = [:]
        var received: [String: [TrafficSample]] = [:]
        var headRoutes: [String: Behavior] = [:]
        var inFlight = 0
        var maxInFlight = 0
        var badRequests = 0
        /// Answers that stalled (ServeOptions.stallAfter) and are still open, by path.
        var stalled: [String: [any Channel]] = [:]
    }

    let state = Mutex(State())

    let connections = ChannelRegistry()

    func register(_ channel: any Channel) -> Int { connections.register(channel) }

    /// Returns the live connections to close, or nil if shutdown already began.
    func beginShutdown() -> [any Channel]? { connections.beginShutdown() }

    func setRoute(_ path: String, _ behaviors: [Behavior]) {
        state.withLock { $0.routes[path] = Route(behaviors: behaviors) }
    }

    /// Body bytes written to (when the write completed) or read from a path's connections, with the time.
    func recordTraffic(_ path: String, sent: Int = 0, received: Int = 0) {
        let now = Date()
        state.withLock {
            if sent > 0 { $0.sent[path, default: []].append(TrafficSample(at: now, bytes: sent)) }
            if received > 0 { $0.received[path, default: []].append(TrafficSample(at: now, bytes: received)) }
        }
    }

    func requestStarted() {
        state.withLock {
            $0.inFlight += 1
            $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
        }
    }

    func requestEnded(count: Int = 1) {
        guard count > 0 else { return }
        state.withLock { $0.inFlight -= count }
    }

    /// An answer to `path` stalled on `channel` (until the client closes it, or `cutStalled`).
    func stalled(_ path: String, on channel: any Channel) {
        state.withLock { $0.stalled[path, default: []].append(channel) }
    }

    func badRequest() {
        state.withLock { $0.badRequests += 1 }
    }

    /// Records the request and picks its behavior (nil: unrouted, answer 404).
    func record(_ request: RecordedRequest) -> Behavior? {
        state.withLock { s -> Behavior? in
            let path = request.path
            if request.method == "HEAD" {
                s.headRequests.append(request)
                if let head = s.headRoutes[path] { return head }
                return s.routes[path]?.current
            }
            s.requests.append(request)
            guard let behavior = s.routes[path]?.current else { return nil }
            s.routes[path]?.next += 1
            return behavior
        }
    }
}
