import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// An engine that others can reach: the TransferManager of a state directory plus its control socket.
/// Every engine (a background one, a headless `ferry run` or `get --no-tui`) is one; clients (the UI, the
/// shell verbs, a following `get`) talk to it through the socket. It answers requests, and pushes
/// subscribers the queue's changes at most every `ControlProtocol.updateInterval`, nothing while nothing changes.
public final class EngineHost: @unchecked Sendable {
    public let manager: TransferManager
    private var server: ControlServer!
    private let onStop: @Sendable () -> Void
    // On the server's queue:
    private var lastVersion: UInt64?
    private var timer: DispatchSourceTimer?
    private var quietTicks = 0
    private var subscribers = 0
    /// `subscribers`, for `nudge` to read from anywhere.
    private let subscriberCount = Atomic<Int>(0)
    private let clientCount = Atomic<Int>(0)
    private let lastClientGone = Mutex<DispatchTime>(.now())
    /// Where commands are carried out, one at a time in the order they came (off the socket's queue).
    private let commands = DispatchQueue(label: "ferry.commands")

    /// Listens on the state directory's socket. `onStop` runs (off the socket's queue) when a client asks
    /// the engine to stop; it should shut the manager down and end the process.
    public init(manager: TransferManager, directory: StateDirectory, onStop: @escaping @Sendable () -> Void) throws(StateError) {
        self.manager = manager
        self.onStop = onStop
        server = try ControlServer(path: directory.socketPath, handle: { [unowned self] in self.handle($0, $1) },
                                   window: { [unowned manager] in manager.snapshot($0) })
        server.clientsChanged = { [unowned self] clients, subscribers in
            self.clientCount.store(clients, ordering: .relaxed)
            if clients == 0 { self.lastClientGone.withLock { $0 = .now() } }
            self.subscribers = subscribers
            self.subscriberCount.store(subscribers, ordering: .relaxed)
            if subscribers > 0 { self.startUpdates() }
        }
        server.start()
    }

    /// Clients connected now.
    public var clients: Int { clientCount.load(ordering: .relaxed) }

    /// Seconds since the last client went (0 while any is connected).
    public var secondsWithoutClients: TimeInterval {
        guard clients == 0 else { return 0 }
        return Double(DispatchTime.now().uptimeNanoseconds - lastClientGone.withLock { $0 }.uptimeNanoseconds) / 1e9
    }

    /// Something changed in the engine (its event callback): updates may be due.
    /// With nobody subscribed there is nothing to do, and no hop to the server's queue to find that out (a
    /// headless run of 1,000 small files woke it 430 times; a subscriber that comes gets updates from its
    /// subscription on).
    public func nudge() {
        guard subscriberCount.load(ordering: .relaxed) > 0 else { return }
        server.queue.async { [self] in if subscribers > 0 { startUpdates() } }
    }

    /// Stops listening; clients see the connection close.
    public func close() {
        // Commands under way are answered first (a cancel that ends a headless run's last item is answered
        // before the run closes the socket).
        commands.sync {}
        server.queue.sync {
            timer?.cancel()
            timer = nil
        }
        server.close()
    }

    // MARK: Updates (on the server's queue)

    private func startUpdates() {
        quietTicks = 0
        guard timer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: server.queue)
        timer.schedule(deadline: .now() + ControlProtocol.updateInterval, repeating: ControlProtocol.updateInterval,
                       leeway: .milliseconds(20))
        timer.setEventHandler { [unowned self] in self.tick() }
        timer.resume()
        self.timer = timer
    }

    private func tick() {
        guard subscribers > 0 else { return stopUpdates() }
        let version = manager.version
        if version == lastVersion {
            // Nothing moves: the timer sleeps until the engine's next event (nudge).
            quietTicks += 1
            if quietTicks >= 5, !manager.moving { stopUpdates() }
            return
        }
        quietTicks = 0
        lastVersion = version
        server.sendChanges()
    }

    private func stopUpdates() {
        timer?.cancel()
        timer = nil
    }

    // MARK: Requests (on the server's queue)

    /// Answers a request; a command is carried out on `commands`, in the order commands came, and answered
    /// from there (nil here), so the socket goes on serving lists and windows while a command over a long
    /// selection works (a pause of 1,000,000 items took the socket's queue for over 15 s: its client and a
    /// `list` beside it both said the engine did not answer). A list is answered off the socket's queue too.
    /// Their clients hear `working` meanwhile.
    private func handle(_ request: ControlRequest, _ responder: ControlServer.Responder) -> ControlReply? {
        let reply = ControlReply(id: request.id, ok: true)
        switch request.verb {
        case .list:
            // Off the socket's queue too: the records wait for the engine's unwritten changes (after a remove of
            // a million items, longer than a client waits without a word).
            DispatchQueue.global().async { [manager] in
                responder.answer {
                    var reply = ControlReply(id: request.id, ok: true)
                    (reply.items, reply.total) = manager.records(request.view ?? .everything)
                    reply.rates = manager.rates(of: reply.items?.map(\.id) ?? [])
                        .map { ItemRate(id: $0.key.rawValue, bytesPerSecond: $0.value) }.sorted { $0.id < $1.id }
                    return reply
                }
            }
            return nil
        case .subscribe, .view:
            break
        case .command:
            guard let command = request.command else { return failure(request, "command needs a command") }
            commands.async { [self] in
                responder.answer { carryOut(command, request) }
                // A part of an add decodes and encodes megabytes of JSON; the heap it used goes back to the system
                // once the reply is out (glibc keeps freed memory otherwise: 1,000,000 lines added left the engine
                // at 178 MiB, most of it free heap).
                if case .add = command { responder.afterSending { Self.trimHeap() } }
            }
            return nil
        case .stop:
            // After the reply has gone out.
            responder.afterSending { [onStop] in DispatchQueue.global().async { onStop() } }
        }
        if subscribers > 0 { startUpdates() }
        return reply
    }

    /// A command carried out (on `commands`).
    private func carryOut(_ command: QueueCommand, _ request: ControlRequest) -> ControlReply {
        var reply = ControlReply(id: request.id, ok: true)
        do {
            reply.result = try manager.perform(command)
        } catch {
            return failure(request, String(describing: error))
        }
        // Subscribers see the change now (the socket's monitor does not hear adds: TransferMonitor.hearsAdds).
        nudge()
        return reply
    }

    /// glibc's malloc_trim (not in Swift's Glibc module): the heap's free memory back to the system.
    private static func trimHeap() {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)(0)
    }

    private func failure(_ request: ControlRequest, _ message: String) -> ControlReply {
        ControlReply(id: request.id, ok: false, error: message)
    }
}
