import FerryCore

/// What the reducer asks of the engine; the app executes these against `TransferManager`.
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
    case quit
}
