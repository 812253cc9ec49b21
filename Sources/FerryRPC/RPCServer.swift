import FerryCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// aria2's RPC endpoint over HTTP: `POST /jsonrpc` on `host:port`, answered by `Aria2RPC` (SwiftNIO's
/// HTTP/1 server). Bodies are capped; the calls run on a queue of their own, never on the event loop, and
/// the engine never waits for a client (NIO writes what a slow client has not read yet as it reads, and a
/// request is read only after the answer to the one before). No CORS headers unless `allowOrigin` is set.
public final class RPCServer: Sendable {
    /// The largest request body accepted (a batch of a few thousand calls).
    public static let maxBody = 1 << 20
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// Listens on `host:port` (port 0: any free one, `port` says which).
    public init(rpc: Aria2RPC, host: String, port: Int, allowOrigin: String?) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let calls = DispatchQueue(label: "ferry.rpc")
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RPCHTTPHandler(rpc: rpc, calls: calls, allowOrigin: allowOrigin))
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
final class RPCHTTPHandler: ChannelInboundHandler {
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
            let (reply, shutdown) = rpc.answer(request)
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.send(.ok, reply, type: "application/json-rpc", head: head, context: context)
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
