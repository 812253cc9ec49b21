import FerryCore

/// What the reducer asks for: a command to the queue (QueueCommand, the one vocabulary every front end
/// speaks), an add whose new item the app then selects, or the UI's own end.
public enum Command: Sendable, Equatable {
    case queue(QueueCommand)
    /// A command on many items (the marked ones, every failed one): once the engine has carried it out, its
    /// answer, what it changed and what it left in the words a shell verb prints, replaces the message.
    case queueSaying(QueueCommand)
    /// One add (one batch); the app selects the last new item once the engine has given it an id.
    case add([TransferSpec])
    /// The UI goes; the transfers go on in the engine.
    case quit
    /// The engine stops its transfers (their `.part` files stay) and exits; the UI goes too.
    case stopEngine
    /// The prompts' questions to the file system (FileEffects; the answer comes back as a FileAnswer): Tab's
    /// completion of `text`, a folder to save into (the download URL typed before it: `url`), a file to upload.
    case completePath(String, directoriesOnly: Bool)
    case checkFolder(String, url: String)
    case checkUploadFile(String)

    // The queue commands the keys make, by name.
    static func pause(_ id: TransferID) -> Command { .queue(.pause(Selection(ids: [id.rawValue]))) }
    static func resume(_ id: TransferID) -> Command { .queue(.resume(Selection(ids: [id.rawValue]))) }
    static let pauseAll = Command.queue(.pause(Selection(all: true)))
    static let resumeAll = Command.queue(.resume(Selection(all: true)))
    static func cancel(_ id: TransferID) -> Command { .queue(.cancel(Selection(ids: [id.rawValue]))) }
    static func retry(_ id: TransferID) -> Command { .queue(.retry(Selection(ids: [id.rawValue]))) }
    static func remove(_ id: TransferID, deletePartial: Bool) -> Command {
        .queue(.remove(Selection(ids: [id.rawValue]), deletePart: deletePartial))
    }
    static func move(_ id: TransferID, _ direction: QueueMove) -> Command { .queue(.move(Selection(ids: [id.rawValue]), direction)) }
    static func setConcurrency(_ count: Int) -> Command { .queue(.setConcurrency(count)) }
    /// Bandwidth limits in bytes per second; nil is none.
    static func setItemLimit(_ id: TransferID, _ rate: Int64?) -> Command { .queue(.setRateLimit(Selection(ids: [id.rawValue]), rate)) }
    static func setGlobalLimits(download: Int64?, upload: Int64?) -> Command {
        .queue(.setGlobalLimits(download: download, upload: upload))
    }
}
