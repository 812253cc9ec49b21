import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// A WebSocket client for tests (SwiftNIO's upgrader): sends text messages, keeps every text message received.
final class WebSocketTestClient: Sendable {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let channel: any Channel
    private let inbox: Inbox
    /// Whether the server closed the connection.
    var closed: Bool { !channel.isActive }

    final class Inbox: Sendable {
        let messages = Mutex<[String]>([])
        let upgraded = Mutex(false)
    }

    /// `origin`: the page a browser would say the connection comes from (none: a client that is not a browser).
    init(port: Int, path: String = "/jsonrpc", origin: String? = nil) throws {
        let inbox = Inbox()
        self.inbox = inbox
        let bootstrap = ClientBootstrap(group: group).channelInitializer { channel in
            let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: 4 << 20) { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    inbox.upgraded.withLock { $0 = true }
                    try channel.pipeline.syncOperations.addHandler(Collector(inbox: inbox))
                }
            }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers(
                    withClientUpgrade: (upgraders: [upgrader], completionHandler: { context in
                        context.pipeline.removeHandler(name: "opening", promise: nil)
                    }))
                try channel.pipeline.syncOperations.addHandler(Opening(path: path, port: port, origin: origin), name: "opening")
            }
        }
        channel = try bootstrap.connect(host: "127.0.0.1", port: port).wait()
        let deadline = Date().addingTimeInterval(10)
        // Until upgraded, or refused (the server answers and closes).
        while !inbox.upgraded.withLock({ $0 }), channel.isActive, Date() < deadline { usleep(5_000) }
    }

    var upgraded: Bool { inbox.upgraded.withLock { $0 } }
    var messages: [String] { inbox.messages.withLock { $0 } }

    func send(_ text: String) {
        var buffer = channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer), promise: nil)
    }

    func sendBinary(_ bytes: [UInt8]) {
        let buffer = channel.allocator.buffer(bytes: bytes)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: buffer), promise: nil)
    }

    /// Waits until a message received satisfies `condition` (nil after `seconds`).
    func waitFor(within seconds: Double = 30, _ condition: (String) -> Bool) async -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let found = messages.first(where: condition) { return found }
            try? await Task.sleep(for: .milliseconds(10))
        }
        // Once more after the deadline: a task the busy pool resumed late must look before it gives up.
        return messages.first(where: condition)
    }

    /// Reads nothing more from the server (a client that stopped reading).
    func stopReading() {
        try? channel.setOption(.autoRead, value: false).wait()
    }

    func close() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// Sends the opening GET that the upgrader turns into a WebSocket handshake.
    private final class Opening: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundOut = HTTPClientRequestPart
        let path: String
        let port: Int
        let origin: String?
        init(path: String, port: Int, origin: String?) {
            self.path = path
            self.port = port
            self.origin = origin
        }

        func channelActive(context: ChannelHandlerContext) {
            var headers = HTTPHeaders()
            headers.add(name: "Host", value: "127.0.0.1:\(port)")
            headers.add(name: "Content-Length", value: "0")
            if let origin { headers.add(name: "Origin", value: origin) }
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            context.fireChannelActive()
        }
    }

    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        let inbox: Inbox
        init(inbox: Inbox) { self.inbox = inbox }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            guard frame.opcode == .text else { return }
            let text = String(decoding: frame.unmaskedData.readableBytesView, as: UTF8.self)
            inbox.messages.withLock { $0.append(text) }
        }
    }
}
