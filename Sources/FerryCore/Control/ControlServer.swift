import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The engine's end of the control socket: accepts clients of the same uid, reads their requests line by
/// line, and writes replies and updates without ever waiting for a client. Everything runs on one serial
/// queue. A malformed, oversized or unknown request gets an error reply and its connection closes; a
/// subscriber that does not read is sent no updates while its last write is pending (it gets the whole
/// queue once it drains) and is dropped when nothing drains for `stallLimit` (long enough for a UI stopped
/// with Ctrl-Z to come back).
final class ControlServer: @unchecked Sendable {
    /// Touched on `queue` only (a Responder carries one there from elsewhere).
    final class Connection: @unchecked Sendable {
        let fd: Int32
        var input = Data()
        var output = Data()
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
        var readSource: DispatchSourceRead?
        var writeSource: DispatchSourceWrite?
        var writing = false

        init(fd: Int32) { self.fd = fd }
    }

    /// Output pending for one client beyond which it is dropped (a client that sends requests and never
    /// reads the replies).
    static let outputLimit = 8 << 20
    static let stallLimit: TimeInterval = 300

    let queue = DispatchQueue(label: "ferry.control")
    private let listenFD: Int32
    private let path: String
    private var acceptSource: DispatchSourceRead?
    private var connections: [Int32: Connection] = [:]
    private let handle: (ControlRequest, Responder) -> ControlReply?
    private let window: (QueueView) -> QueueSnapshot
    private let encoder = JSONEncoder()
    /// Called on `queue` whenever a client connects or goes.
    var clientsChanged: ((_ clients: Int, _ subscribers: Int) -> Void)?

    /// - Parameters:
    ///   - handle: answers a request (on `queue`), or returns nil and answers later through the responder (a
    ///     command that takes a while: the socket goes on serving other requests meanwhile).
    ///   - window: the window of a view as it is now (on `queue`).
    init(path: String, handle: @escaping (ControlRequest, Responder) -> ControlReply?,
         window: @escaping (QueueView) -> QueueSnapshot) throws(StateError) {
        self.path = path
        self.listenFD = try UnixSocket.listen(path: path)
        self.handle = handle
        self.window = window
    }

    /// Takes connections from now on: called once whoever answers the requests is ready (a request that came
    /// while the engine's host was still being made reached for its server before the host had it, and the
    /// background engine crashed when a client was quick). Until then a client waits in the listen backlog.
    func start() {
        queue.sync {
            guard acceptSource == nil else { return }
            let source = DispatchSource.makeReadSource(fileDescriptor: listenFD, queue: queue)
            source.setEventHandler { [unowned self] in self.acceptAll() }
            source.resume()
            acceptSource = source
        }
    }

    var subscriberCount: Int { connections.values.filter(\.subscribed).count }

    /// Stops listening and drops every client. The socket file goes.
    func close() {
        queue.sync {
            acceptSource?.cancel()
            acceptSource = nil
            Glibc.close(listenFD)
            unlink(path)
            for connection in Array(connections.values) { drop(connection) }
        }
    }

    private func acceptAll() {
        while true {
            guard let fd = UnixSocket.accept(listenFD) else { return }
            // Only processes of the engine's own user (the socket's mode already says so; this is the check
            // that does not depend on the file system).
            guard UnixSocket.peerUID(fd) == getuid() else {
                Glibc.close(fd)
                continue
            }
            let connection = Connection(fd: fd)
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in self.readAvailable(connection) }
            source.resume()
            connection.readSource = source
            connections[fd] = connection
            clientsChanged?(connections.count, subscriberCount)
        }
    }

    private func readAvailable(_ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while connections[connection.fd] === connection {
            let n = read(connection.fd, &buffer, buffer.count)
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) {
                drop(connection)
                return
            }
            if n < 0 { break }
            // Each byte is looked at once: a line is complete when this chunk holds its newline.
            var start = 0
            while start < n, let newline = buffer.withUnsafeBytes({ raw -> Int? in
                memchr(raw.baseAddress! + start, 0x0A, n - start).map { UnsafeRawPointer($0) - raw.baseAddress! }
            }) {
                connection.input.append(contentsOf: buffer[start..<newline])
                let line = connection.input
                connection.input = Data()
                start = newline + 1
                guard answer(line, on: connection) else { return }
            }
            connection.input.append(contentsOf: buffer[start..<n])
            if connection.input.count > ControlProtocol.maxRequest {
                refuse(connection, id: nil, "request longer than \(ControlProtocol.maxRequest) bytes")
                return
            }
        }
        if connection.wholeDue, connections[connection.fd] === connection {
            connection.wholeDue = false
            sendWhole(connection)
        }
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
        if request.verb == .subscribe || request.verb == .view, reply.ok, connections[connection.fd] === connection {
            connection.view = request.view ?? .everything
            let wasSubscribed = connection.subscribed
            connection.subscribed = true
            connection.wholeDue = true
            if !wasSubscribed { clientsChanged?(connections.count, subscriberCount) }
        }
        return connections[connection.fd] === connection
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

        /// Runs `body` on the socket's queue after what is queued there now (an answer sent before it).
        func afterSending(_ body: @escaping @Sendable () -> Void) {
            server?.queue.async(execute: body)
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
                guard let connection, server.connections[connection.fd] === connection else { return }
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
            guard connection.output.isEmpty else {
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

    private func write(_ data: Data, to connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        if connection.output.isEmpty {
            let written = data.withUnsafeBytes { Glibc.send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno != EAGAIN, errno != EINTR {
                drop(connection)
                return
            }
            let rest = data.dropFirst(max(0, written))
            guard !rest.isEmpty else { return }
            connection.output = Data(rest)
            connection.stalledSince = .now()
            startWriting(connection)
        } else {
            connection.output.append(data)
            if connection.output.count > Self.outputLimit { drop(connection) }
        }
    }

    private func startWriting(_ connection: Connection) {
        guard !connection.writing else { return }
        connection.writing = true
        if connection.writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: connection.fd, queue: queue)
            source.setEventHandler { [unowned self] in self.writePending(connection) }
            connection.writeSource = source
        }
        connection.writeSource?.resume()
    }

    private func writePending(_ connection: Connection) {
        while !connection.output.isEmpty {
            let written = connection.output.withUnsafeBytes { Glibc.send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EAGAIN || errno == EINTR { return }
                drop(connection)
                return
            }
            connection.output.removeFirst(written)
            connection.stalledSince = .now()
        }
        connection.stalledSince = nil
        connection.writing = false
        connection.writeSource?.suspend()
        if connection.behind {
            connection.behind = false
            sendWhole(connection)
        }
    }

    private func drop(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        // The descriptor closes once every source on it has let go (their cancel handlers, on this queue).
        let sources: [any DispatchSourceProtocol] = [connection.readSource, connection.writeSource].compactMap { $0 }
        let closer = Closer(fd: connection.fd, sources: sources.count)
        for source in sources { source.setCancelHandler { closer.sourceGone() } }
        if let source = connection.writeSource, !connection.writing { source.resume() }  // a suspended source must not be released
        sources.forEach { $0.cancel() }
        if sources.isEmpty { Glibc.close(connection.fd) }
        clientsChanged?(connections.count, subscriberCount)
    }

    /// Closes a descriptor after the last of its dispatch sources is cancelled.
    private final class Closer: @unchecked Sendable {
        private let fd: Int32
        private var left: Int

        init(fd: Int32, sources: Int) {
            self.fd = fd
            self.left = sources
        }

        /// On the server's queue.
        func sourceGone() {
            left -= 1
            if left == 0 { Glibc.close(fd) }
        }
    }
}
