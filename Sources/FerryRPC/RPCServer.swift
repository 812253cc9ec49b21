import FerryCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// aria2's RPC endpoint: `POST /jsonrpc` on `host:port`, and WebSocket on the same path (SwiftNIO's HTTP/1
/// server and WebSocket upgrader), answered by `Aria2RPC`; WebSocket clients also get aria2's notifications
/// (`Aria2Notifier`). Bodies and frames are capped; the calls run on a queue of their own, never on the event
/// loop, and the engine never waits for a client (an HTTP request is read only after the answer to the one
/// before; a WebSocket client that stops reading is dropped). No CORS headers unless `allowOrigin` is set.
public final class RPCServer: Sendable {
    /// The largest request body (or WebSocket message) accepted: a batch of a few thousand calls.
    public static let maxBody = 1 << 20
    /// A WebSocket client with this much unread is dropped (it stopped reading).
    static let writeLimit = 4 << 20
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// Whether a request may be answered, by the page it comes from: one with no Origin (aria2p, curl, scripts:
    /// not a browser's), the RPC's own origin, or the one `allowOrigin` names (`*`: any). A browser sends
    /// WebSocket upgrades and plain POSTs to any address without asking first, and aria2 takes them from any
    /// page (only the secret guards the queue); ferry refuses pages of other origins.
    static func allows(_ head: HTTPRequestHead, allowOrigin: String?) -> Bool {
        guard let origin = head.headers.first(name: "origin") else { return true }
        if let allowOrigin, allowOrigin == "*" || allowOrigin == origin { return true }
        if let host = head.headers.first(name: "host"), origin == "http://" + host || origin == "https://" + host { return true }
        return false
    }

    /// Listens on `host:port` (port 0: any free one, `port` says which).
    public init(rpc: Aria2RPC, notifier: Aria2Notifier? = nil, host: String, port: Int, allowOrigin: String?) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let calls = DispatchQueue(label: "ferry.rpc")
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: Self.maxBody,
            shouldUpgrade: { channel, head in
                let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                // A page of an origin not allowed gets no WebSocket (the HTTP handler then refuses it in words).
                let upgrades = path == "/jsonrpc" && Self.allows(head, allowOrigin: allowOrigin)
                return channel.eventLoop.makeSucceededFuture(upgrades ? HTTPHeaders() : nil)
            },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1024,
                                                    maxAccumulatedFrameSize: Self.maxBody))
                    try channel.pipeline.syncOperations.addHandler(RPCWebSocketHandler(rpc: rpc, calls: calls, notifier: notifier))
                }
            })
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: Self.writeLimit))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let http = RPCHTTPHandler(rpc: rpc, calls: calls, allowOrigin: allowOrigin)
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { context in
                            context.pipeline.removeHandler(name: RPCHTTPHandler.name, promise: nil)
                        }),
                        withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(http, name: RPCHTTPHandler.name)
                }
            }
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
        self.group = group
        self.port = channel.localAddress?.port ?? port
    }

    /// Stops listening and closes the connections.
    public func close() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// One HTTP connection: a request's body is gathered (up to `RPCServer.maxBody`), answered, and only then is
/// the next request read.
final class RPCHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    /// Its name in the pipeline (it goes when a connection becomes a WebSocket).
    static let name = "ferry.rpc.http"
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let rpc: Aria2RPC
    private let calls: DispatchQueue
    private let allowOrigin: String?
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var tooLarge = false

    init(rpc: Aria2RPC, calls: DispatchQueue, allowOrigin: String?) {
        self.rpc = rpc
        self.calls = calls
        self.allowOrigin = allowOrigin
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            self.head = head
            body.clear()
            tooLarge = head.headers.first(name: "content-length").flatMap(Int.init).map { $0 > RPCServer.maxBody } ?? false
        case var .body(part):
            guard !tooLarge else { return }
            if body.readableBytes + part.readableBytes > RPCServer.maxBody {
                tooLarge = true
                body.clear()
            } else {
                body.writeBuffer(&part)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        guard path == "/jsonrpc" else {
            return send(.notFound, Data("only /jsonrpc is served\n".utf8), type: "text/plain", head: head, context: context)
        }
        guard RPCServer.allows(head, allowOrigin: allowOrigin) else {
            let origin = TerminalSafe.sanitize(head.headers.first(name: "origin") ?? "")
            let error = Aria2RPC.error(id: NSNull(), .init("a page of \(origin) may not use this RPC: [rpc] allow_origin names the one that may"))
            let data = (try? JSONSerialization.data(withJSONObject: error)) ?? Data()
            return send(.forbidden, data, type: "application/json-rpc", head: head, context: context, close: true)
        }
        if head.method == .OPTIONS, allowOrigin != nil {
            return send(.noContent, Data(), type: nil, head: head, context: context)
        }
        guard head.method == .POST else {
            return send(.methodNotAllowed, Data("POST a JSON-RPC request to /jsonrpc\n".utf8), type: "text/plain", head: head,
                        context: context, extra: [("Allow", "POST")])
        }
        guard !tooLarge else {
            let error = Aria2RPC.error(id: NSNull(), .init("the request is larger than \(RPCServer.maxBody) bytes", code: -32600))
            let data = (try? JSONSerialization.data(withJSONObject: error)) ?? Data()
            return send(.payloadTooLarge, data, type: "application/json-rpc", head: head, context: context, close: true)
        }
        let request = Data(body.readableBytesView)
        body.clear()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let rpc = self.rpc
        calls.async {
            let (reply, status, shutdown) = rpc.answer(request)
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.send(HTTPResponseStatus(statusCode: status), reply, type: "application/json-rpc", head: head, context: context)
                if shutdown { rpc.shutdownAnswered() }
            }
        }
    }

    private func send(_ status: HTTPResponseStatus, _ data: Data, type: String?, head: HTTPRequestHead,
                      context: ChannelHandlerContext, extra: [(String, String)] = [], close: Bool = false) {
        var headers = HTTPHeaders()
        if let type { headers.add(name: "Content-Type", value: type) }
        headers.add(name: "Content-Length", value: "\(data.count)")
        if let allowOrigin {
            headers.add(name: "Access-Control-Allow-Origin", value: allowOrigin)
            headers.add(name: "Access-Control-Allow-Methods", value: "POST, OPTIONS")
            headers.add(name: "Access-Control-Allow-Headers", value: "Content-Type")
        }
        for (name, value) in extra { headers.add(name: name, value: value) }
        let keepAlive = head.isKeepAlive && !close
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: data)))), promise: nil)
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            done.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}

/// A WebSocket connection: each text message is a call or a batch, answered in a text message; the
/// notifier pushes aria2's notifications to it.
final class RPCWebSocketHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let rpc: Aria2RPC
    private let calls: DispatchQueue
    private let notifier: Aria2Notifier?

    init(rpc: Aria2RPC, calls: DispatchQueue, notifier: Aria2Notifier?) {
        self.rpc = rpc
        self.calls = calls
        self.notifier = notifier
    }

    func handlerAdded(context: ChannelHandlerContext) {
        notifier?.add(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        notifier?.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let request = Data(frame.unmaskedData.readableBytesView)
            let channel = context.channel
            let rpc = self.rpc
            calls.async {
                let (reply, _, shutdown) = rpc.answer(request)
                var buffer = channel.allocator.buffer(capacity: reply.count)
                buffer.writeBytes(reply)
                channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: buffer), promise: nil)
                if shutdown { rpc.shutdownAnswered() }
            }
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: ByteBuffer())))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case .binary:
            // JSON-RPC is text: a binary message ends the connection (1003, unsupported data).
            var reason = context.channel.allocator.buffer(capacity: 2)
            reason.write(webSocketErrorCode: .unacceptableData)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: reason)))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
