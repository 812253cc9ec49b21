import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A plain HTTP/1.1 forward proxy on 127.0.0.1 (ephemeral port) for tests, as curl and URLSession use one:
///
/// - An absolute-form request (`GET http://127.0.0.1:8080/a HTTP/1.1`, any method, a body framed by
///   Content-Length or chunked) goes on to the origin in origin-form (`GET /a HTTP/1.1`) with
///   `Connection: close`; after that head, bytes are relayed as they are, both ways, so the origin's
///   answer (with its `Connection: close`) streams back and ends the client's connection.
/// - `CONNECT host:port` is answered `200 Connection Established` and becomes a raw TCP tunnel (https
///   through the proxy).
///
/// One origin connection per client connection, no keep-alive; when either side closes, the other is
/// closed once what was read from the first has been written to it (a client that half-closes after its
/// request therefore gets no answer: curl and URLSession do not). Relaying follows the slower side
/// (a side is read only while the other can take more), so a large body is never held whole:
/// `maxBufferedBytes` tells how much was held at most.
///
/// Only 127.0.0.1, localhost and ::1 are reachable: a request for any other host is answered
/// 403 and never connected to.
public final class TestForwardProxy: Sendable {
    public let port: Int
    let core: ProxyCore
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel

    /// Binds 127.0.0.1:0 and starts proxying.
    public init() throws {
        let core = ProxyCore()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                core.register(channel, accepted: true)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ProxyFrontHandler(core: core))
                }
            }
        (serverChannel, port) = try bindLoopback(bootstrap, group: group)
        self.core = core
        self.group = group
    }

    deinit {
        shutdown()
    }

    /// `http://127.0.0.1:port`: what to give a client as its proxy.
    public var url: URL {
        URL(string: "http://127.0.0.1:\(port)")!
    }

    /// Each request relayed or tunneled, in arrival order, as its method and target:
    /// "GET http://127.0.0.1:1234/a", "CONNECT 127.0.0.1:5678".
    public var requests: [String] {
        core.state.withLock { $0.requests }
    }

    /// Requests answered with an error instead (403 for a host that is not this machine, 400 for what is
    /// not a proxy request, 502 when the origin could not be reached), in the same form.
    public var refusedRequests: [String] {
        core.state.withLock { $0.refused }
    }

    /// Client connections accepted so far.
    public var connectionsAccepted: Int {
        core.connections.connectionsAccepted
    }

    /// The most bytes the proxy held at once: read from one side and not yet written to the other.
    public var maxBufferedBytes: Int {
        core.state.withLock { $0.maxBuffered }
    }

    /// Times the proxy stopped reading from one side because the other could not take more: the event a test
    /// of its backpressure waits for.
    public var readsHeld: Int {
        core.state.withLock { $0.readsHeld }
    }

    /// Idempotent: closes the listener and all client and origin connections, then the event loop.
    /// Must not be called from the proxy's own event loop thread.
    public func shutdown() {
        guard let channels = core.beginShutdown() else { return }
        try? serverChannel.close().wait()
        let closes = channels.map { $0.close() }
        try? EventLoopFuture.andAllComplete(closes, on: group.next()).wait()
        try? group.syncShutdownGracefully()
    }
}

/// State shared between the public API and the handlers.
final class ProxyCore: Sendable {
    struct State {
        var requests: [String] = []
        var refused: [String] = []
        var buffered = 0
        var maxBuffered = 0
        /// Times a side stopped reading because the other could not take more (backpressure).
        var readsHeld = 0
    }

    let state = Mutex(State())

    let connections = ChannelRegistry()

    func register(_ channel: any Channel, accepted: Bool) { connections.register(channel, accepted: accepted) }

    func beginShutdown() -> [any Channel]? { connections.beginShutdown() }

    func record(_ request: String, refused: Bool = false) {
        state.withLock {
            if refused { $0.refused.append(request) } else { $0.requests.append(request) }
        }
    }

    func buffered(_ delta: Int) {
        state.withLock {
            $0.buffered += delta
            $0.maxBuffered = max($0.maxBuffered, $0.buffered)
        }
    }
}

/// The first handler of a client connection: reads the request head, checks the target, connects to the
/// origin (holding the client's reads meanwhile), then hands the connection to a `RelayHandler` pair and
/// only passes everything through.
final class ProxyFrontHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxHeadSize = 64 * 1024
    static let allowedHosts: Set<String> = ["127.0.0.1", "localhost", "::1"]

    private enum Phase {
        case readingHead
        case connecting
        case relaying
        case refused
    }

    private let core: ProxyCore
    private var phase = Phase.readingHead
    /// What arrived and is not yet sent on: the head while it is incomplete, then any body bytes read before
    /// the origin connection was up.
    private var pending: ByteBuffer?

    init(core: ProxyCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch phase {
        case .relaying:
            context.fireChannelRead(data)
        case .refused:
            break  // drained and dropped until the client closes
        case .readingHead, .connecting:
            var incoming = unwrapInboundIn(data)
            if pending == nil {
                pending = incoming
            } else {
                pending!.writeBuffer(&incoming)
            }
            if phase == .readingHead { parseHead(context: context) }
        }
    }

    func read(context: ChannelHandlerContext) {
        // While the origin connection is being made, the client is not read (its body waits in its socket).
        if phase != .connecting { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    // MARK: The request head

    private func parseHead(context: ChannelHandlerContext) {
        guard var buffer = pending else { return }
        let crlf2: [UInt8] = [13, 10, 13, 10]
        guard let end = buffer.readableBytesView.firstRange(of: crlf2) else {
            if buffer.readableBytes > Self.maxHeadSize {
                refuse(context: context, request: "(head over \(Self.maxHeadSize) bytes)", status: "431 Request Header Fields Too Large")
            }
            return
        }
        let headLength = end.upperBound - buffer.readableBytesView.startIndex
        let head = buffer.readString(length: headLength) ?? ""
        pending = buffer.readableBytes > 0 ? buffer : nil

        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let requestLine = lines.isEmpty ? "" : lines.removeFirst()
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard parts.count == 3 else {
            refuse(context: context, request: requestLine, status: "400 Bad Request")
            return
        }
        let (method, target, version) = (parts[0], parts[1], parts[2])
        let request = "\(method) \(target)"

        if method == "CONNECT" {
            guard let (host, port) = Self.hostAndPort(target[...], defaultPort: nil) else {
                refuse(context: context, request: request, status: "400 Bad Request")
                return
            }
            guard Self.allowedHosts.contains(host) else {
                refuse(context: context, request: request, status: "403 Forbidden")
                return
            }
            core.record(request)
            connect(context: context, request: request, host: host, port: port) { context, _ in
                let reply = "HTTP/1.1 200 Connection Established\r\n\r\n"
                context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(string: reply)), promise: nil)
            }
            return
        }

        // Absolute-form: http://authority[/path][?query]
        let scheme = "http://"
        guard target.lowercased().hasPrefix(scheme) else {
            refuse(context: context, request: request, status: "400 Bad Request")
            return
        }
        let rest = target.dropFirst(scheme.count)
        let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        guard let (host, port) = Self.hostAndPort(rest[..<pathStart], defaultPort: 80) else {
            refuse(context: context, request: request, status: "400 Bad Request")
            return
        }
        guard Self.allowedHosts.contains(host) else {
            refuse(context: context, request: request, status: "403 Forbidden")
            return
        }
        var path = String(rest[pathStart...])
        if !path.hasPrefix("/") { path = "/" + path }

        let dropped: Set<String> = ["connection", "proxy-connection", "keep-alive", "proxy-authorization"]
        var originHead = "\(method) \(path) \(version)\r\n"
        var hasHost = false
        for line in lines {
            let name = line.prefix { $0 != ":" }.trimmingCharacters(in: .whitespaces).lowercased()
            if dropped.contains(name) { continue }
            if name == "host" { hasHost = true }
            originHead += line + "\r\n"
        }
        if !hasHost { originHead += "Host: \(rest[..<pathStart])\r\n" }
        originHead += "Connection: close\r\n\r\n"

        core.record(request)
        connect(context: context, request: request, host: host, port: port) { _, origin in
            origin.writeAndFlush(origin.allocator.buffer(string: originHead), promise: nil)
        }
    }

    /// "host:port", "[::1]:port" or (with a default port) "host" -> lowercased host without brackets, port.
    static func hostAndPort(_ authority: Substring, defaultPort: Int?) -> (String, Int)? {
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        let port: Int
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        guard !host.isEmpty else { return nil }
        return (host.lowercased(), port)
    }

    // MARK: Connecting and relaying

    /// Connects to the origin on this event loop; then `start` sends what goes first (the 200 for CONNECT,
    /// the rewritten head otherwise), `pending` follows to the origin, and the relay takes over.
    private func connect(
        context: ChannelHandlerContext, request: String, host: String, port: Int,
        start: @escaping (ChannelHandlerContext, any Channel) -> Void
    ) {
        phase = .connecting
        let core = self.core
        ClientBootstrap(group: context.eventLoop)
            .connectTimeout(.seconds(10))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                core.register(channel, accepted: false)
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .connect(host: host, port: port)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .failure:
                    self.refuse(context: context, request: request, status: "502 Bad Gateway", alreadyRecorded: true)
                case .success(let origin):
                    guard context.channel.isActive else {
                        origin.close(promise: nil)
                        return
                    }
                    self.startRelay(context: context, origin: origin, start: start)
                }
            }
    }

    private func startRelay(
        context: ChannelHandlerContext, origin: any Channel, start: (ChannelHandlerContext, any Channel) -> Void
    ) {
        let (clientSide, originSide) = RelayHandler.pair(core: core)
        do {
            // Both channels are on this event loop.
            try origin.pipeline.syncOperations.addHandler(originSide)
            try context.pipeline.syncOperations.addHandler(clientSide)
        } catch {
            origin.close(promise: nil)
            context.close(promise: nil)
            return
        }
        start(context, origin)
        if let body = pending {
            pending = nil
            origin.writeAndFlush(body, promise: nil)
        }
        phase = .relaying
        context.channel.read()  // reads were held while connecting; the relay decides from here on
    }

    /// Answers `status` with a short text body and closes: output first, then (once the client has sent
    /// everything and closes, or after 2 s) the whole connection, so that a client still sending a body
    /// reads the answer instead of a reset.
    private func refuse(
        context: ChannelHandlerContext, request: String, status: String, alreadyRecorded: Bool = false
    ) {
        if alreadyRecorded {
            core.state.withLock {
                if let i = $0.requests.lastIndex(of: request) { $0.requests.remove(at: i) }
                $0.refused.append(request)
            }
        } else {
            core.record(request, refused: true)
        }
        phase = .refused
        pending = nil
        let body = "test proxy: \(status)\n"
        let text = "HTTP/1.1 \(status)\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n" + body
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in
            context.close(mode: .output, promise: nil)
            context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(2)) { context.close(promise: nil) }
        }
        context.read()
    }
}

/// One side of a relay between a client connection and its origin connection (both on one event loop):
/// what one side reads is written to the other, a side is read only while the other is writable, and when
/// one side closes the other is closed once everything already read has been written to it.
final class RelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let core: ProxyCore
    private var partner: RelayHandler?
    private var context: ChannelHandlerContext?
    private var readHeld = false

    private init(core: ProxyCore) {
        self.core = core
    }

    static func pair(core: ProxyCore) -> (RelayHandler, RelayHandler) {
        let a = RelayHandler(core: core)
        let b = RelayHandler(core: core)
        a.partner = b
        b.partner = a
        return (a, b)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner?.partnerWrite(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.partnerFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.partnerClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)  // channelInactive follows and ends the other side
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.partnerBecameWritable() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? false {
            context.read()
        } else {
            // Counted once the other side is there and full (not while an origin is still being reached).
            if !readHeld, partner?.context != nil { core.state.withLock { $0.readsHeld += 1 } }
            readHeld = true
        }
    }

    // MARK: Called by the partner

    private var isWritable: Bool {
        context?.channel.isWritable ?? false
    }

    private func partnerWrite(_ buffer: ByteBuffer) {
        guard let context else { return }
        let count = buffer.readableBytes
        core.buffered(count)
        let written = context.eventLoop.makePromise(of: Void.self)
        let core = self.core
        written.futureResult.whenComplete { _ in core.buffered(-count) }
        context.write(wrapOutboundOut(buffer), promise: written)
    }

    private func partnerFlush() {
        context?.flush()
    }

    private func partnerBecameWritable() {
        if readHeld, let context {
            readHeld = false
            context.read()
        }
    }

    private func partnerClosed() {
        guard let context else { return }
        // An empty write completes after every earlier one: close once all of them reached the socket.
        let drained = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: drained)
        drained.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
