import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A client of a running engine's control socket: requests with their replies, and, once subscribed, a
/// copy of the queue kept in step with the engine's updates. A thread of its own reads what the engine
/// sends; requests may be made from any thread. The connection ends with `close()` or when the client is
/// released (the engine then sees a client go).
public final class ControlClient: Sendable {
    private let connection: Connection

    private init(connection: Connection) {
        self.connection = connection
    }

    deinit { connection.close() }

    /// A connection to the engine working on `directory`; nil when none listens there.
    public static func connect(_ directory: StateDirectory) -> ControlClient? {
        guard let fd = UnixSocket.connect(path: directory.socketPath) else { return nil }
        let connection = Connection(fd: fd)
        // The thread keeps the connection (not the client) until the engine's side closes.
        let thread = Thread { [connection] in connection.readLoop() }
        thread.name = "ferry.control-client"
        thread.start()
        return ControlClient(connection: connection)
    }

    /// The queue as the last update left it.
    public var snapshot: QueueSnapshot { connection.snapshot }

    /// Sends `request` (its id is set here) and waits for the reply.
    public func request(_ request: ControlRequest) throws(ControlError) -> ControlReply {
        try connection.request(request)
    }

    /// Queues `specs` with the engine in one new batch for `command`, in as many requests as it takes
    /// (each well under the engine's request limit, so no list is too long). With `force`, always new items (an
    /// unfinished one of the same transfer replaced, its `.part` deleted: `get --force`);
    /// otherwise a transfer already in the queue is reused. What became of each spec, in order, and the batch.
    /// A refusal (a full disk...) is a ControlError in the engine's words; parts sent before it stay queued.
    public func add(_ specs: [TransferSpec], command: String, force: Bool, tree: String? = nil) throws -> (batch: Int64, items: [AddedItem]) {
        var batch: Int64?
        var items: [AddedItem] = []
        items.reserveCapacity(specs.count)
        // The first part makes the batch. Then a part is on its way while the one before is answered: the engine
        // queues one while this process encodes the next.
        var sent: [(count: Int, command: QueueCommand, reply: Connection.PendingReply)] = []
        func receive() throws {
            let first = sent.removeFirst()
            let result = try first.command.result(of: connection.reply(to: first.reply))
            guard let added = result.added, added.count == first.count else {
                throw ControlError("the engine did not queue the items", refused: true)
            }
            batch = result.batch
            items += added
        }
        for part in Self.parts(of: specs) {
            let addition = QueueCommand.Addition(specs: Array(specs[part]), batch: batch, typed: batch == nil ? command : "", force: force,
                                                 replaces: force, tree: batch == nil ? tree : nil)
            let command = QueueCommand.add(addition)
            sent.append((part.count, command, try connection.send(ControlRequest(id: 0, command: command))))
            if batch == nil || sent.count > 1 { try receive() }
        }
        while !sent.isEmpty { try receive() }
        return (batch ?? 0, items)
    }

    /// `specs` cut into runs of at most ControlProtocol.addPartItems whose JSON stays under
    /// ControlProtocol.addPart (a spec's size is judged from the first one's and each URL's length: the specs of
    /// one command differ in their URLs, and when they differ in nothing else a part carries only the URLs).
    static func parts(of specs: [TransferSpec]) -> [Range<Int>] {
        guard let first = specs.first else { return [] }
        let overhead = QueueCommand.Addition.travelAsURLs(specs) ? 4 : ((try? JSONEncoder().encode(first))?.count ?? 4096) - first.url.absoluteString.utf8.count
        var parts: [Range<Int>] = []
        var start = 0
        var size = 0
        for (index, spec) in specs.enumerated() {
            // A URL's JSON may escape its slashes: counted twice.
            let cost = overhead + 2 * spec.url.absoluteString.utf8.count
            if index > start, size + cost > ControlProtocol.addPart || index - start == ControlProtocol.addPartItems {
                parts.append(start..<index)
                start = index
                size = 0
            }
            size += cost
        }
        parts.append(start..<specs.count)
        return parts
    }

    /// Asks for updates: `onUpdate` gets the whole queue after each one (on the client's thread), `onClose`
    /// why the connection ended.
    /// `view`: the rows the client shows (nil: the whole queue); `snapshot` then holds its window.
    public func subscribe(view: QueueView? = nil, onUpdate: @escaping @Sendable (QueueSnapshot) -> Void,
                          onClose: @escaping @Sendable (String) -> Void) throws(ControlError) {
        try connection.subscribe(view: view, onUpdate: onUpdate, onClose: onClose)
    }

    /// The first update of a subscription to `view` (its window, the counts and the engine's settings); the
    /// connection closes after it.
    public func snapshotOnce(view: QueueView, timeout: TimeInterval = 10) throws(ControlError) -> QueueSnapshot {
        let answer = Mutex<Result<QueueSnapshot, ControlError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        @Sendable func settle(_ result: Result<QueueSnapshot, ControlError>) {
            let first = answer.withLock { state -> Bool in
                guard state == nil else { return false }
                state = result
                return true
            }
            if first { done.signal() }
        }
        defer { close() }
        try subscribe(view: view, onUpdate: { settle(.success($0)) },
                      onClose: { settle(.failure(ControlError("the engine closed the connection: \($0)"))) })
        guard done.wait(timeout: .now() + timeout) == .success, let result = answer.withLock({ $0 }) else {
            throw ControlError("the engine did not answer within \(Int(timeout)) s")
        }
        return try result.get()
    }

    /// A subscriber's new view (scrolled, filtered): its window comes whole, then its changes.
    public func setView(_ view: QueueView) throws(ControlError) {
        var request = ControlRequest(id: 0, verb: .view)
        request.view = view
        let reply = try self.request(request)
        guard reply.ok else { throw ControlError(reply.error ?? "the engine refused the view", refused: true) }
    }

    /// Ends the connection.
    public func close() { connection.close() }
}

/// The socket of a ControlClient and what its reader thread shares with the callers.
final class Connection: Sendable {
    private struct State {
        var waiting: [Int: DispatchSemaphore] = [:]
        var replies: [Int: ControlReply] = [:]
        /// Requests the engine said it is still working on since their waiter last looked.
        var working: Set<Int> = []
        var closed: String?
        var snapshot = QueueSnapshot(version: 0, items: [], totals: QueueTotals(), maxConcurrent: 0, maxPerHost: 0)
        var onUpdate: (@Sendable (QueueSnapshot) -> Void)?
        var onClose: (@Sendable (String) -> Void)?
    }

    private let fd: Int32
    private let state = Mutex(State())
    private let writeLock = Mutex(())
    private let nextID = Atomic<Int>(0)
    /// How long a request waits for its reply.
    static let replyTimeout: TimeInterval = 15
    /// How long a request waits in all while the engine says it is still working on it (a pause of 1,000,000
    /// items takes under a minute).
    static let workingLimit: TimeInterval = 900

    init(fd: Int32) {
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    var snapshot: QueueSnapshot { state.withLock { $0.snapshot } }

    /// A request sent, its reply still to come.
    struct PendingReply {
        let id: Int
        let signal: DispatchSemaphore
    }

    func request(_ request: ControlRequest) throws(ControlError) -> ControlReply {
        try reply(to: send(request))
    }

    /// Sends `request` (its id is set here); `reply(to:)` waits for the answer.
    func send(_ request: ControlRequest) throws(ControlError) -> PendingReply {
        var request = request
        request.id = nextID.add(1, ordering: .relaxed).newValue
        let signal = DispatchSemaphore(value: 0)
        let gone = state.withLock { s -> String? in
            if s.closed == nil { s.waiting[request.id] = signal }
            return s.closed
        }
        if let gone { throw ControlError(gone) }
        guard var line = try? JSONEncoder().encode(request) else { throw ControlError("cannot encode the request") }
        line.append(0x0A)
        let sent = writeLock.withLock { _ in writeAll(line) }
        guard sent else {
            _ = state.withLock { $0.waiting.removeValue(forKey: request.id) }
            throw ControlError("the engine closed the connection")
        }
        return PendingReply(id: request.id, signal: signal)
    }

    /// The reply to a request sent, waited for at most `replyTimeout` after the engine last said anything of it
    /// (it says it is still working on a long command every `ControlProtocol.workingInterval`).
    func reply(to pending: PendingReply) throws(ControlError) -> ControlReply {
        let began = DispatchTime.now()
        while true {
            let timedOut = pending.signal.wait(timeout: .now() + Self.replyTimeout) == .timedOut
            let (reply, closed, working) = state.withLock { s in
                let working = s.working.remove(pending.id) != nil
                let reply = s.replies.removeValue(forKey: pending.id)
                if reply != nil || s.closed != nil || (timedOut && !working) { s.waiting[pending.id] = nil }
                return (reply, s.closed, working)
            }
            if let reply { return reply }
            if let closed { throw ControlError(closed) }
            if timedOut, !working { throw ControlError("the engine did not answer in \(Int(Self.replyTimeout)) s") }
            // Told it is still at work (or woken by an earlier such word): wait on, within reason (an engine stuck
            // in a command would otherwise keep its client waiting for ever).
            if DispatchTime.now().uptimeNanoseconds - began.uptimeNanoseconds > UInt64(Self.workingLimit * 1e9) {
                state.withLock { _ = $0.waiting.removeValue(forKey: pending.id) }
                throw ControlError("the engine has been at it for \(Int(Self.workingLimit / 60)) minutes without an answer")
            }
        }
    }

    func subscribe(view: QueueView?, onUpdate: @escaping @Sendable (QueueSnapshot) -> Void,
                   onClose: @escaping @Sendable (String) -> Void) throws(ControlError) {
        state.withLock {
            $0.onUpdate = onUpdate
            $0.onClose = onClose
        }
        var subscribe = ControlRequest(id: 0, verb: .subscribe)
        subscribe.view = view
        let reply = try request(subscribe)
        guard reply.ok else { throw ControlError(reply.error ?? "the engine refused the subscription") }
    }

    /// Wakes the reader with an end of file; the descriptor closes when the reader lets go of this object.
    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func writeAll(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }

    func readLoop() {
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        let decoder = JSONDecoder()
        var reason = "the engine closed the connection"
        reading: while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            pending.append(contentsOf: buffer[0..<n])
            var start = pending.startIndex
            while let newline = pending[start...].firstIndex(of: 0x0A) {
                let line = pending[start..<newline]
                start = newline + 1
                guard let message = try? decoder.decode(ControlMessage.self, from: line) else {
                    reason = "the engine sent something that is not a message"
                    break reading
                }
                receive(message)
            }
            pending.removeSubrange(pending.startIndex..<start)
        }
        let (waiters, onClose) = state.withLock { s -> ([DispatchSemaphore], (@Sendable (String) -> Void)?) in
            s.closed = reason
            defer { s.waiting = [:] }
            return (Array(s.waiting.values), s.onClose)
        }
        waiters.forEach { $0.signal() }
        onClose?(reason)
    }

    private func receive(_ message: ControlMessage) {
        if let reply = message.reply {
            let waiter = state.withLock { s -> DispatchSemaphore? in
                guard let id = reply.id, let waiter = s.waiting[id] else { return nil }
                if reply.working == true { s.working.insert(id) } else { s.replies[id] = reply }
                return waiter
            }
            waiter?.signal()
        }
        if let update = message.update {
            let (snapshot, onUpdate) = state.withLock { s in
                s.snapshot = s.snapshot.applying(update)
                return (s.snapshot, s.onUpdate)
            }
            onUpdate?(snapshot)
        }
    }
}
