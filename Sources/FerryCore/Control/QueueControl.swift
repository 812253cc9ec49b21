import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// What a front end needs of an engine: its queue as snapshots, and a way to send it commands (QueueCommand).
/// The engine in this process (TransferManager) and one behind a control socket (RemoteQueue) both answer it,
/// so the UI does not know, and never opens a socket itself.
public protocol QueueControl: AnyObject, Sendable {
    func snapshot() -> QueueSnapshot
    /// Queues transfers (one add, after the commands sent before it) without waiting; `added` gets their ids, or
    /// nil when the engine could not be reached or refused them, on no particular thread.
    func enqueue(_ specs: [TransferSpec], added: @escaping @Sendable ([TransferID]?) -> Void)
    /// Sends a command without waiting for it (commands are carried out in the order sent); `answered` gets what
    /// it changed and left (nil: the engine refused it or could not be reached), on no particular thread.
    func send(_ command: QueueCommand, answered: @escaping @Sendable (CommandResult?) -> Void)
    /// The rows the front end shows: an engine behind its socket sends that window of the queue (and
    /// `snapshot()` is that window); the engine in this process always answers with the whole queue.
    func setView(_ view: QueueView)
    /// The front end goes; the transfers go on (a remote engine) or stop (this process's engine).
    func detach()
    /// Stops the engine and its transfers (their `.part` files stay).
    func stopEngine()
}

extension TransferManager: QueueControl {
    public func enqueue(_ specs: [TransferSpec], added: @escaping @Sendable ([TransferID]?) -> Void) {
        added((try? perform(.add(.init(specs: specs))))?.added?.map(\.id))
    }
    public func send(_ command: QueueCommand, answered: @escaping @Sendable (CommandResult?) -> Void) {
        answered(try? perform(command))
    }
    public func setView(_ view: QueueView) {}
    public func detach() { shutdown(timeout: 5) }
    public func stopEngine() { shutdown(timeout: 5) }
}

extension QueueControl {
    /// Sends a command without waiting for it or for its answer.
    public func send(_ command: QueueCommand) { send(command) { _ in } }
}
