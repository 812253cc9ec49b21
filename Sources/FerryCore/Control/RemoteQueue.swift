import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import Synchronization

/// An engine behind its control socket, as a QueueControl: snapshots are the client's copy of the queue
/// (kept in step by the engine's updates), and commands (adds too) go out in order on a queue of their own, so
/// a front end never waits for the engine.
public final class RemoteQueue: QueueControl {
    private let client: ControlClient
    private let outbox = DispatchQueue(label: "ferry.remote-commands")
    private let stopping = Atomic<Bool>(false)

    /// - Parameters:
    ///   - onChange: after each update (on the client's thread).
    ///   - onClose: the engine went away: why, and whether this front end had asked it to stop.
    ///   - view: the rows first shown (the window grows or moves with the front end's `setView`).
    public init(client: ControlClient, view: QueueView = QueueView(offset: 0, limit: 200), onChange: @escaping @Sendable () -> Void,
                onClose: @escaping @Sendable (_ reason: String, _ asked: Bool) -> Void) throws(ControlError) {
        self.client = client
        try client.subscribe(view: view, onUpdate: { _ in onChange() }, onClose: { [weak self] reason in
            onClose(reason, self?.stopping.load(ordering: .relaxed) ?? false)
        })
    }

    public func snapshot() -> QueueSnapshot { client.snapshot }

    public func enqueue(_ specs: [TransferSpec], added: @escaping @Sendable ([TransferID]?) -> Void) {
        // After the commands before it.
        outbox.async { [client] in added((try? QueueCommand.add(.init(specs: specs)).perform(on: .remote(client)))?.added?.map(\.id)) }
    }

    public func send(_ command: QueueCommand, answered: @escaping @Sendable (CommandResult?) -> Void) {
        outbox.async { [client] in answered(try? command.perform(on: .remote(client))) }
    }

    public func setView(_ view: QueueView) {
        outbox.async { [client] in try? client.setView(view) }
    }

    /// Leaves the engine running: the commands sent so far go out first.
    public func detach() {
        outbox.sync {}
        client.close()
    }

    public func stopEngine() {
        stopping.store(true, ordering: .relaxed)
        outbox.sync { _ = try? client.request(ControlRequest(id: 0, verb: .stop)) }
    }
}
