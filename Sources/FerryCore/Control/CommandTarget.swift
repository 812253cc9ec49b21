import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// Where a QueueCommand is carried out: the engine in this process, an engine behind its control socket, or
/// the stored queue when no engine runs (the caller holds the engine lock).
public enum CommandTarget {
    case engine(TransferManager)
    case remote(ControlClient)
    case store(any QueueStore)
}

extension QueueCommand {
    /// Carries the command out on `target`: the one way every front end changes the queue. An unknown id or a
    /// bad value is a UsageError (or, from a remote engine, a refused ControlError), and then nothing changes.
    public func perform(on target: CommandTarget) throws -> CommandResult {
        switch target {
        case let .engine(manager):
            return try manager.perform(self)
        case let .store(store):
            return try StoredQueueCommands.perform(self, store: store)
        case let .remote(client):
            return try result(of: client.request(ControlRequest(id: 0, command: self)))
        }
    }

    /// What a remote engine's reply to this command says it did (a refusal is a ControlError in its words).
    func result(of reply: ControlReply) throws(ControlError) -> CommandResult {
        guard reply.ok else { throw ControlError(reply.error ?? "the engine refused \(name)", refused: true) }
        return reply.result ?? CommandResult()
    }
}
