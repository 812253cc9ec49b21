import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix

/// The engine's end of the control socket, on SwiftNIO as the RPC is: a listening Unix socket only the user can
/// reach, clients of the same uid only (the peer's credentials), requests read a line at a time, replies and
/// updates written without ever waiting for a client. The state of the connections and every answer live on one
/// serial queue (`queue`); NIO's event loop carries the bytes. A malformed, oversized or unknown request gets
/// an error reply and its connection closes; a connection's next lines are read once the ones before are
/// answered; a subscriber that does not read is sent no updates while its last write is pending (it gets the
/// whole queue once it drains), and is dropped when nothing drains for `stallLimit` (long enough for a UI
/// stopped with Ctrl-Z to come back) or more than `outputLimit` waits for it.
final class ControlServer: @unchecked Sendable {
    /// Touched on `queue` only (a Responder carries one there from elsewhere).
    final class Connection: @unchecked Sendable {
        let channel: any Channel
        let number: Int
        /// Bytes written to the channel that the socket has not taken yet.
        var pending = 0
        var subscribed = false
        /// Updates were skipped while output was pending: send the whole queue when it drains.
        var behind = false
        /// Since when output has been pending without any of it being written.
        var stalledSince: DispatchTime?
        /// A subscriber's view, and the window last sent of it (what the client holds).
        var view = QueueView.everything
        /// A new view was asked for: its window goes out whole once the requests read so far are answered
        /// (views asked for one after another, a filter typed a key at a time, cost one window).
        var wholeDue = false
        var lastSent: QueueSnapshot?
        var lastSentAt = DispatchTime(uptimeNanoseconds: 0)
        /// What waits for the pending output to reach the socket (Responder.afterSending).
        var whenWritten: [@Sendable () -> Void] = []

        init(channel: any Channel, number: Int) {
            self.channel = channel
            self.number = number
        }
    }

    /// Output pending for one client beyond which it is dropped (a client that sends requests and never
    /// reads the replies).
    static let outputLimit = 8 << 20
    static let stallLimit: TimeInterval = 300

    let queue = DispatchQueue(label: "ferry.control")
    private let path: String
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel
    private var connections: [Int: Connection] = [:]
    private var connectionsMade = 0
    private let handle: (ControlRequest, Responder) -> ControlReply?
    private let window: (QueueView) -> QueueSnapshot
    private let encoder = JSONEncoder()
    /// Called on `queue` whenever a client connects or goes.
    var clientsChanged: ((_ clients: Int, _ subscribers: Int) -> Void)?

    /// Listens on `path` with mode 0600 (the state directory is 0700). A socket file left there by an engine that
    /// died is replaced: the caller holds the engine lock, so nobody else can be listening.
    /// - Parameters:
    ///   - handle: answers a request (on `queue`), or returns nil and answers later through the responder (a
    ///     command that takes a while: the socket goes on serving other requests meanwhile).
    ///   - window: the window of a view as it is now (on `queue`).
    init(path: String, handle: @escaping (ControlRequest, Responder) -> ControlReply?,
         window: @escaping (QueueView) -> QueueSnapshot) throws(StateError) {
        // sockaddr_un's path holds 107 bytes and a NUL.
        guard path.utf8.count < 108 else { throw StateError("the state directory's path is too long for a socket: \(path)") }
        self.path = path
        self.handle = handle
        self.window = window
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        let server = Later()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            // Nothing is accepted before `start`: a client waits in the backlog meanwhile.
            .serverChannelOption(.autoRead, value: false)
            // A connection's lines are read when the ones before are answered (ControlConnectionHandler).
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { channel in
                PeerCredentials.of(channel).flatMapThrowing { credentials in
                    // Only processes of the engine's own user (the socket's mode already says so; this is the check
                    // that does not depend on the file system).
                    guard credentials.uid == getuid(), let owner = server.value else { throw ControlRefusal.anotherUser }
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrames(limit: ControlProtocol.maxRequest)))
                    try channel.pipeline.syncOperations.addHandler(ControlConnectionHandler(server: owner))
                }
            }
        let previous = umask(0o077)
        defer { umask(previous) }
        do {
            listener = try bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).wait()
            guard chmod(path, 0o600) == 0 else { throw StateError("cannot listen on \(path): \(String(cString: strerror(errno)))") }
        } catch {
            try? group.syncShutdownGracefully()
            throw error as? StateError ?? StateError("cannot listen on \(path): \(error)")
        }
        server.value = self
    }

    /// Takes connections from now on: called once whoever answers the requests is ready (a request that came
    /// while the engine's host was still being made reached for its server before the host had it, and the
    /// background engine crashed when a client was quick). Until then a client waits in the listen backlog.
    func start() {
        listener.setOption(.autoRead, value: true).whenComplete { _ in }
    }

    var subscriberCount: Int { connections.values.filter(\.subscribed).count }

    /// Stops listening and drops every client. The socket file goes.
    func close() {
        queue.sync {
            listener.close(promise: nil)
            unlink(path)
            for connection in Array(connections.values) { drop(connection) }
        }
        try? group.syncShutdownGracefully()
    }

    // MARK: What the event loop tells (ControlConnectionHandler), on `queue`

    fileprivate func connected(_ channel: any Channel) -> Int {
        connectionsMade += 1
        let connection = Connection(channel: channel, number: connectionsMade)
        connections[connection.number] = connection
        clientsChanged?(connections.count, subscriberCount)
        return connection.number
    }

    /// Lines a connection sent: each answered in turn; the connection's next lines are read afterwards.
    fileprivate func received(_ lines: [Data], from number: Int) {
        guard let connection = connections[number] else { return }
        for line in lines {
            guard answer(line, on: connection) else { return }
        }
        if connection.wholeDue {
            connection.wholeDue = false
            sendWhole(connection)
        }
        if connections[number] === connection { connection.channel.read() }
    }

    fileprivate func tooLong(_ number: Int) {
        guard let connection = connections[number] else { return }
        refuse(connection, id: nil, "request longer than \(ControlProtocol.maxRequest) bytes")
    }

    fileprivate func disconnected(_ number: Int) {
        guard let connection = connections[number] else { return }
        drop(connection)
    }

    /// Answers one request line; false when the connection was closed for it.
    private func answer(_ line: Data, on connection: Connection) -> Bool {
        struct Envelope: Decodable {
            var v: Int?
            var id: Int?
            var verb: String?
        }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: line) else {
            refuse(connection, id: nil, "not a JSON object")
            return false
        }
        guard envelope.v == ControlProtocol.version else {
            refuse(connection, id: envelope.id, "protocol version \(envelope.v.map(String.init) ?? "missing"), this engine speaks \(ControlProtocol.version)")
            return false
        }
        guard let verb = envelope.verb, ControlVerb(rawValue: verb) != nil else {
            refuse(connection, id: envelope.id, "unknown verb '\(TerminalSafe.sanitize(envelope.verb ?? ""))'")
            return false
        }
        let request: ControlRequest
        do {
            request = try JSONDecoder().decode(ControlRequest.self, from: line)
        } catch {
            refuse(connection, id: envelope.id, "malformed \(verb) request")
            return false
        }
        guard var reply = handle(request, Responder(server: self, connection: connection, id: request.id)) else {
            return true  // answered later
        }
        reply.pid = getpid()
        send(ControlMessage(reply: reply), to: connection)
        if request.verb == .subscribe || request.verb == .view, reply.ok, connections[connection.number] === connection {
            connection.view = request.view ?? .everything
            let wasSubscribed = connection.subscribed
            connection.subscribed = true
            connection.wholeDue = true
            if !wasSubscribed { clientsChanged?(connections.count, subscriberCount) }
        }
        return connections[connection.number] === connection
    }

    /// Answers one request later, from any thread: its reply, and meanwhile that the engine is still at it
    /// (`working`, which keeps the client waiting past its time-out). Nothing is sent to a client that went.
    struct Responder: @unchecked Sendable {
        fileprivate weak var server: ControlServer?
        fileprivate weak var connection: Connection?
        let id: Int?

        /// The request's answer.
        func reply(_ reply: ControlReply) {
            var reply = reply
            reply.id = id
            reply.pid = getpid()
            send(reply)
        }

        /// Makes the answer with `make` (on the caller's thread) and sends it, the client told every
        /// `ControlProtocol.workingInterval` meanwhile that the engine is at it.
        func answer(_ make: () -> ControlReply) {
            let heartbeat = server.map { DispatchSource.makeTimerSource(queue: $0.queue) }
            heartbeat?.schedule(deadline: .now() + ControlProtocol.workingInterval, repeating: ControlProtocol.workingInterval)
            heartbeat?.setEventHandler { working() }
            heartbeat?.resume()
            let made = make()
            heartbeat?.cancel()
            reply(made)
        }

        /// Runs `body` on the socket's queue once what is queued there now (an answer sent before it) has reached
        /// the client's socket, or the client went: a stop's reply is out before the engine ends.
        func afterSending(_ body: @escaping @Sendable () -> Void) {
            guard let server else { return body() }
            server.queue.async { [connection] in
                guard let connection, server.connections[connection.number] === connection, connection.pending > 0 else {
                    return body()
                }
                connection.whenWritten.append(body)
            }
        }

        /// The engine is still working on the request: the client waits on.
        func working() {
            var reply = ControlReply(id: id, ok: true)
            reply.working = true
            send(reply)
        }

        private func send(_ reply: ControlReply) {
            guard let server else { return }
            server.queue.async { [connection] in
                guard let connection, server.connections[connection.number] === connection else { return }
                server.send(ControlMessage(reply: reply), to: connection)
            }
        }
    }

    private func refuse(_ connection: Connection, id: Int?, _ error: String) {
        var reply = ControlReply(id: id, ok: false, error: error)
        reply.pid = getpid()
        send(ControlMessage(reply: reply), to: connection)
        // What could be written goes; the rest is dropped with the connection.
        drop(connection)
    }

    /// Sends every subscriber that keeps up what changed in its window (nothing when nothing it shows did;
    /// the total rates at most once a second); one that does not keep up gets its window whole once it drains.
    func sendChanges() {
        let now = DispatchTime.now()
        var windows: [QueueView: QueueSnapshot] = [:]
        for connection in Array(connections.values) where connection.subscribed {
            guard connection.pending == 0 else {
                connection.behind = true
                if let since = connection.stalledSince, now.uptimeNanoseconds - since.uptimeNanoseconds > UInt64(Self.stallLimit * 1e9) {
                    drop(connection)
                }
                continue
            }
            let snapshot = windows[connection.view] ?? window(connection.view)
            windows[connection.view] = snapshot
            guard let last = connection.lastSent else {
                sendWhole(connection, snapshot)
                continue
            }
            let ratesDue = now.uptimeNanoseconds - connection.lastSentAt.uptimeNanoseconds >= 1_000_000_000
            guard let update = ControlUpdate(from: last, to: snapshot, ratesDue: ratesDue) else { continue }
            send(ControlMessage(update: update), to: connection)
            connection.lastSent = snapshot
            connection.lastSentAt = now
        }
    }

    /// A subscriber's window whole (a new subscriber, a new view, one that fell behind).
    private func sendWhole(_ connection: Connection, _ snapshot: QueueSnapshot? = nil) {
        let snapshot = snapshot ?? window(connection.view)
        send(ControlMessage(update: ControlUpdate(full: snapshot)), to: connection)
        connection.lastSent = snapshot
        connection.lastSentAt = .now()
    }

    private func encode(_ message: ControlMessage) -> Data {
        var data = (try? encoder.encode(message)) ?? Data("{}".utf8)
        data.append(0x0A)
        return data
    }

    private func send(_ message: ControlMessage, to connection: Connection) {
        write(encode(message), to: connection)
    }

    /// Hands `data` to the connection's channel; what the socket has not taken yet counts as pending until it has.
    private func write(_ data: Data, to connection: Connection) {
        guard connections[connection.number] === connection else { return }
        if connection.pending + data.count > Self.outputLimit { return drop(connection) }
        if connection.pending == 0 { connection.stalledSince = .now() }
        connection.pending += data.count
        var buffer = connection.channel.allocator.buffer(capacity: data.count)
        buffer.writeBytes(data)
        let count = data.count
        connection.channel.writeAndFlush(buffer).whenComplete { [weak self, weak connection] _ in
            guard let server = self, let connection else { return }
            server.queue.async { server.written(count, on: connection) }
        }
    }

    /// The socket took `count` bytes of what was pending (or the connection went).
    private func written(_ count: Int, on connection: Connection) {
        connection.pending -= count
        connection.stalledSince = connection.pending > 0 ? .now() : nil
        guard connection.pending == 0 else { return }
        let waiting = connection.whenWritten
        connection.whenWritten = []
        waiting.forEach { $0() }
        guard connection.behind, connections[connection.number] === connection else { return }
        connection.behind = false
        sendWhole(connection)
    }

    private func drop(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.number) != nil else { return }
        // What was handed to the channel and could be written goes; the rest goes with the connection.
        connection.channel.close(promise: nil)
        clientsChanged?(connections.count, subscriberCount)
        let waiting = connection.whenWritten
        connection.whenWritten = []
        waiting.forEach { $0() }
    }
}

/// The server, for the connections' initializer made before it exists.
private final class Later: @unchecked Sendable {
    weak var value: ControlServer?
}

/// The credentials of the process at the other end of a Unix socket (SO_PEERCRED's struct ucred).
private struct PeerCredentials: Sendable {
    var pid: pid_t = 0
    var uid: uid_t = 0
    var gid: gid_t = 0

    static func of(_ channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ControlRefusal.noCredentials)
        }
        return provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
    }
}

private enum ControlRefusal: Error {
    case anotherUser, noCredentials
}

/// Finds a connection's lines (without their newline); more than `limit` bytes without one is an error. Each
/// byte is looked at once, however the line comes in pieces. A line is gathered in a buffer of its own, freed
/// once it is answered: NIO's read buffer stays the size of a read (kept, it held a 4 MiB part of an add until
/// the connection closed, after the heap was trimmed: an engine 6 MiB larger after 100,000 adds).
private struct LineFrames: ByteToMessageDecoder {
    typealias InboundOut = Data
    struct TooLong: Error {}
    let limit: Int
    private var partial = Data()

    init(limit: Int) { self.limit = limit }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard buffer.readableBytes > 0 else { return .needMoreData }
        let newline = buffer.readableBytesView.firstIndex(of: 0x0A).map { $0 - buffer.readerIndex }
        let take = newline ?? buffer.readableBytes
        guard partial.count + take <= limit else { throw TooLong() }
        buffer.withUnsafeReadableBytes { bytes in partial.append(contentsOf: bytes.prefix(take)) }
        buffer.moveReaderIndex(forwardBy: newline.map { $0 + 1 } ?? take)
        guard newline != nil else { return .needMoreData }
        let line = partial
        partial = Data()
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A line cut off by the client's close is not a request.
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}

/// One client's connection on the event loop: tells the server (on its queue) that it came, each batch of lines
/// read, and that it went; reads on only when the server has answered the lines before (or a line is not whole).
private final class ControlConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = Data
    private let server: ControlServer
    private var number: Int?
    private var lines: [Data] = []
    private var waiting: [(@Sendable (Int) -> Void)] = []
    /// A request was too long: nothing more is read (the server refuses it and closes).
    private var refused = false

    init(server: ControlServer) { self.server = server }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        server.queue.async { [server] in
            let number = server.connected(channel)
            channel.eventLoop.execute {
                loop.value.number = number
                let waiting = loop.value.waiting
                loop.value.waiting = []
                waiting.forEach { $0(number) }
            }
        }
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lines.append(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !lines.isEmpty else {
            if !refused { context.read() }
            return
        }
        let batch = lines
        lines = []
        whenNumbered { [server] number in server.queue.async { server.received(batch, from: number) } }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is LineFrames.TooLong {
            refused = true
            whenNumbered { [server] number in server.queue.async { server.tooLong(number) } }
        } else if !refused {
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        whenNumbered { [server] number in server.queue.async { server.disconnected(number) } }
    }

    /// Runs `body` with the connection's number, once the server has given it one (on the event loop).
    private func whenNumbered(_ body: @escaping @Sendable (Int) -> Void) {
        if let number { body(number) } else { waiting.append(body) }
    }
}
