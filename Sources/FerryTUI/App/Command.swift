import FerryCore

/// What the reducer asks of the engine; the app executes these against its QueueControl.
public enum Command: Sendable, Equatable {
    case pause(TransferID)
    case resume(TransferID)
    case pauseAll
    case resumeAll
    case cancel(TransferID)
    case retry(TransferID)
    case remove(TransferID, deletePartial: Bool)
    case move(TransferID, QueueMove)
    /// The app selects the new item once the engine has given it an id.
    case add(TransferSpec)
    case setConcurrency(Int)
    /// Bandwidth limits in bytes per second; nil is none.
    case setItemLimit(TransferID, Int64?)
    case setGlobalLimits(download: Int64?, upload: Int64?)
    /// The UI goes; the transfers go on in the engine.
    case quit
    /// The engine stops its transfers (their `.part` files stay) and exits; the UI goes too.
    case stopEngine
}
