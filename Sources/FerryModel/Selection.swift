import Foundation

/// Which items a command acts on: the ids named, or every item that is in one of `states`, in `batch` and
/// matches `filter` (a view's text: QueueView), but those in `except` (`all`: no condition). One rule for the
/// shell verbs, the socket and the stored queue; a screen's marks of a whole view (M) are such a selection.
public struct Selection: Sendable, Codable, Equatable {
    public var ids: [Int64]?
    public var all: Bool?
    public var states: [TransferState]?
    public var batch: Int64?
    /// The text a view's filter matches (name, URL, host, `#id`).
    public var filter: String?
    /// Items left out of what the conditions choose.
    public var except: [Int64]?
    /// The conditions choose among the items with ids up to this one only: those there when the selection was
    /// made (a view marked in the UI), not items added since.
    public var upTo: Int64?

    public init(ids: [Int64]? = nil, all: Bool = false, states: [TransferState]? = nil, batch: Int64? = nil,
                filter: String? = nil, except: [Int64]? = nil, upTo: Int64? = nil) {
        self.ids = ids.flatMap { $0.isEmpty ? nil : $0 }
        self.all = all ? true : nil
        self.states = states.flatMap { $0.isEmpty ? nil : $0 }
        self.batch = batch
        self.filter = filter.flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
        self.except = except.flatMap { $0.isEmpty ? nil : $0 }
        self.upTo = upTo
    }

    /// The items a view shows (its states, batch and filter), but `except`, among those up to `upTo`.
    public init(view: QueueView, except: [Int64] = [], upTo: Int64? = nil) {
        self.init(all: view.states == nil && view.batch == nil && view.filter == nil, states: view.states,
                  batch: view.batch, filter: view.filter, except: except, upTo: upTo)
    }

    /// Names no item at all (a usage error before anything is asked).
    public var isEmpty: Bool { ids == nil && all != true && states == nil && batch == nil && filter == nil }

    /// The batch this selection names as a whole (`Selection(batch:)`: a tree's row, its GID), items joining it
    /// later included; nil when it names items (ids, states, a filter, some left out).
    public var wholeBatch: Int64? {
        guard ids == nil, all != true, states == nil, filter == nil, except == nil, upTo == nil else { return nil }
        return batch
    }

    /// The chosen items among `items` (id, state, batch), in the order given; ids that name no item are an
    /// error naming them, and then nothing is chosen. `text` says whether an item matches `filter` (the
    /// caller knows the names and URLs; nil: every item does).
    public func choose(among items: [(id: TransferID, state: TransferState, batch: Int64?)],
                       text: ((TransferID) -> Bool)? = nil) -> Result<[TransferID], UsageError> {
        if let ids {
            let known = Set(items.map(\.id.rawValue))
            let unknown = ids.filter { !known.contains($0) }
            guard unknown.isEmpty else { return .failure(UsageError("no item " + unknown.map { "#\($0)" }.joined(separator: ", "))) }
            var seen = Set<Int64>()
            return .success(ids.filter { seen.insert($0).inserted }.map(TransferID.init))
        }
        // The same rule as a view's (QueueView): states and batch.
        let matcher = QueueView(states: states, batch: batch).matcher
        let left = Set(except ?? [])
        let text = filter == nil ? nil : text
        return .success(items.filter { item in
            item.id.rawValue <= upTo ?? .max
                && matcher.matches(id: item.id, state: item.state, batch: item.batch, name: { nil }, url: { "" })
                && !left.contains(item.id.rawValue) && text?(item.id) ?? true
        }.map(\.id))
    }

    /// `failed,completed`, in the words a list shows (`done`, `retrying`) or the states' own; an unknown word
    /// is an error listing the words.
    public static func states(_ text: String) throws(UsageError) -> [TransferState] {
        var states: [TransferState] = []
        for word in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !word.isEmpty {
            if let state = TransferState(named: word) {
                states.append(state)
            } else {
                throw UsageError("not a state: '\(TerminalSafe.sanitize(word))' (states: \(TransferState.names))")
            }
        }
        guard !states.isEmpty else { throw UsageError("--state needs a state (for example failed, or failed,cancelled)") }
        return states
    }
}

/// What a command did: the items it changed, and those it left as they were (the command did not apply to
/// their state), with that state.
public struct CommandOutcome: Sendable, Codable, Equatable {
    public struct Left: Sendable, Codable, Equatable {
        public var id: TransferID
        public var state: TransferState
        public init(id: TransferID, state: TransferState) {
            self.id = id
            self.state = state
        }
    }

    public var changed: [TransferID] = []
    public var left: [Left] = []

    public init() {}
}

extension TransferState {
    /// The state a word names: the word a list shows (`label`: done, retrying) or the state's own (completed,
    /// waiting), so that what `ferry list` prints is what `--state` takes.
    public init?(named word: String) {
        guard let state = Self.allCases.first(where: { $0.label == word || $0.rawValue == word }) else { return nil }
        self = state
    }

    /// Every state's words, for help and errors: `queued, running, retrying (waiting), ..., done (completed), ...`.
    public static var names: String {
        allCases.map { $0.label == $0.rawValue ? $0.label : "\($0.label) (\($0.rawValue))" }.joined(separator: ", ")
    }

    /// The state as a list shows it, one word: `ferry list`'s column and the UI's counts (done, retrying, ...).
    public var label: String {
        switch self {
        case .completed: return "done"
        case .waiting: return "retrying"
        default: return rawValue
        }
    }

    /// The state in words for a sentence ("#2 is done").
    public var word: String {
        switch self {
        case .completed: return "done"
        case .waiting: return "waiting to retry"
        default: return rawValue
        }
    }
}

extension CommandOutcome {
    /// `retried 3 (#4 #9 #12); #2 is done, left as it is`: what a command changed and what it left, in words
    /// (a shell verb prints it; the UI says it after an action on marked items).
    public func sentence(for command: QueueCommand) -> String {
        if case let .setRateLimit(selection, rate) = command, let batch = selection.wholeBatch {
            // The batch's own limit, not its items': said of the batch.
            let count = changed.count
            return "batch \(batch): " + (rate.map { "limited to \(RateText.describe($0)), shared by its \(count) item\(count == 1 ? "" : "s")" }
                                              ?? "no longer limited")
        }
        let done: String
        switch command {
        case .remove: done = "removed"
        case let .setRateLimit(_, rate): done = rate == nil ? "unlimited" : "limited"
        default: done = command.stateChange?.pastTense ?? command.name
        }
        var parts: [String] = []
        if changed.isEmpty {
            parts.append(left.isEmpty ? "no item \(Self.describe(command.selection)); nothing \(done)" : "nothing \(done)")
        } else {
            parts.append("\(done) \(changed.count) (\(TransferID.list(changed)))")
        }
        let byState = Dictionary(grouping: left, by: \.state)
        for state in TransferState.allCases {
            guard let left = byState[state] else { continue }
            let ids = TransferID.list(left.map(\.id))
            parts.append(left.count == 1 ? "\(ids) is \(state.word), left as it is" : "\(ids) are \(state.word), left as they are")
        }
        return parts.joined(separator: "; ")
    }

    /// The items a selection asked for, for "no item ...".
    private static func describe(_ selection: Selection?) -> String {
        var words: [String] = []
        if let states = selection?.states { words.append("is " + states.map(\.word).joined(separator: " or ")) }
        if let batch = selection?.batch { words.append("in batch \(batch)") }
        return words.isEmpty ? "in the queue" : words.joined(separator: " and ")
    }
}

extension TransferID {
    /// `#4 #9 #12`, three or more in a row as one run (`#1-#2000`: an add of an `-i` file is one line, not
    /// two thousand ids), the first 10 of those and how many items more.
    public static func list(_ ids: [TransferID]) -> String {
        var runs: [(first: TransferID, last: TransferID, count: Int)] = []
        for id in ids {
            if let run = runs.last, id.rawValue == run.last.rawValue + 1 {
                runs[runs.count - 1] = (run.first, id, run.count + 1)
            } else {
                runs.append((id, id, 1))
            }
        }
        let parts = runs.flatMap { run -> [(text: String, count: Int)] in
            run.count >= 3 ? [("\(run.first)-\(run.last)", run.count)]
                : (0..<run.count).map { ("\(TransferID(run.first.rawValue + Int64($0)))", 1) }
        }
        let shown = parts.prefix(10)
        let more = ids.count - shown.map(\.count).reduce(0, +)
        let text = shown.map(\.text).joined(separator: " ")
        return more > 0 ? "\(text) and \(more) more" : text
    }
}
