import Foundation

/// What a front end asks of the queue: the one vocabulary of the UI, the shell verbs and the control socket
/// (and of any front end to come). Carried out by `perform(on:)` against an engine in this process, an engine
/// behind its socket, or the stored queue when no engine runs; the item rules are Transfer's everywhere.
public enum QueueCommand: Sendable, Codable, Equatable {
    /// Stop running or waiting items; their `.part` files stay.
    case pause(Selection)
    /// Queue paused items again; they continue from their `.part` files.
    case resume(Selection)
    /// Stop items and any retry; the `.part` files stay for `retry`.
    case cancel(Selection)
    /// Queue failed or cancelled items again with a fresh retry budget.
    case retry(Selection)
    /// Take items off the queue (a finished file is never touched; `deletePart` deletes `.part` files).
    case remove(Selection, deletePart: Bool)
    /// One item one step, or to an end.
    case move(TransferID, QueueMove)
    /// Queue transfers (one batch; reusing the same transfers already queued unless `force`).
    case add(Addition)
    /// Transfers at once.
    case setConcurrency(Int)
    /// Items' own bandwidth limits, bytes per second (nil: none).
    case setRateLimit(Selection, Int64?)
    /// The global limits, bytes per second (nil: none).
    case setGlobalLimits(download: Int64?, upload: Int64?)

    public struct Addition: Sendable, Codable, Equatable {
        public var specs: [TransferSpec]
        /// The batch to add to (a command sent in parts); nil: a new batch for `typed`.
        public var batch: Int64?
        /// What the user typed, for a new batch.
        public var typed: String
        public var force: Bool

        public init(specs: [TransferSpec], batch: Int64? = nil, typed: String = "", force: Bool = false) {
            self.specs = specs
            self.batch = batch
            self.typed = typed
            self.force = force
        }
    }

    /// The verb as the user says it ("retry"), for messages.
    public var name: String {
        switch self {
        case .pause: return "pause"
        case .resume: return "resume"
        case .cancel: return "cancel"
        case .retry: return "retry"
        case .remove: return "remove"
        case .move: return "move"
        case .add: return "add"
        case .setConcurrency: return "jobs"
        case .setRateLimit: return "limit"
        case .setGlobalLimits: return "limits"
        }
    }

    /// The items a per-item command names.
    public var selection: Selection? {
        switch self {
        case let .pause(selection), let .resume(selection), let .cancel(selection), let .retry(selection),
             let .remove(selection, _), let .setRateLimit(selection, _):
            return selection
        case let .move(id, _): return Selection(ids: [id.rawValue])
        case .add, .setConcurrency, .setGlobalLimits: return nil
        }
    }
}

/// What a command did: the items it changed and those it left as they were (with their state); for `add`,
/// what became of each spec and the batch.
public struct CommandResult: Sendable, Codable, Equatable {
    public var outcome = CommandOutcome()
    public var added: [AddedItem]?
    public var batch: Int64?

    public init() {}
}
