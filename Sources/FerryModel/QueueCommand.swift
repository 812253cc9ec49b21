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
    /// Items one step, or to an end, together (QueueMove.apply).
    case move(Selection, QueueMove)
    /// One item to a place among the items in some states (aria2's changePosition in its waiting list).
    case place(TransferID, Placement)
    /// Queue transfers (one batch; reusing the same transfers already queued unless `force`).
    case add(Addition)
    /// Walk a tree and download it (`get -r`): a new tree's batch that its files join as the engine lists its
    /// directories (TreeJob); the result names the batch.
    case walk(TreeJob)
    /// Transfers at once.
    case setConcurrency(Int)
    /// Items' own bandwidth limits, bytes per second (nil: none).
    case setRateLimit(Selection, Int64?)
    /// The global limits, bytes per second (nil: none).
    case setGlobalLimits(download: Int64?, upload: Int64?)
    /// A download not running nor done gets another file name (aria2's changeOption `out`): its `.part` file, if
    /// it has one, is renamed with it; a name taken is refused.
    case rename(TransferID, String)

    public struct Addition: Sendable, Codable, Equatable {
        public var specs: [TransferSpec]
        /// The batch to add to (a command sent in parts); nil: a new batch for `typed`.
        public var batch: Int64?
        /// What the user typed, for a new batch.
        public var typed: String
        /// Always new items, never the same transfer's item found again (TransferSpec.identity).
        public var force: Bool
        /// With `force`: an unfinished item of the same transfer is replaced, its `.part` file deleted, so that
        /// the new one starts afresh under the same name (`get --force`). Without (aria2's addUri), the old one
        /// stays and the new one takes the next free name.
        public var replaces: Bool
        /// New items are queued paused (they start on a resume).
        public var paused: Bool
        /// New items go to this place (aria2's addUri `position`); none starts before it is there.
        public var placement: Placement?
        /// A new batch is a tree's, from here (Batch.tree): the UI shows it as one row.
        public var tree: String?

        public init(specs: [TransferSpec], batch: Int64? = nil, typed: String = "", force: Bool = false, replaces: Bool = false,
                    paused: Bool = false, placement: Placement? = nil, tree: String? = nil) {
            self.tree = tree
            self.specs = specs
            self.batch = batch
            self.typed = typed
            self.force = force
            self.replaces = force && replaces
            self.paused = paused
            self.placement = placement
        }

        // On the wire, specs that differ from the first only in their URL (the lines of one `-i` file) are the
        // first spec and every URL: a spec's JSON once, not a million times each way.
        private enum CodingKeys: String, CodingKey { case specs, template, urls, batch, typed, force, replaces, paused, placement, tree }

        /// The specs differ from the first in their URL at most: they travel as one spec and the URLs.
        public static func travelAsURLs(_ specs: some Collection<TransferSpec>) -> Bool {
            guard let first = specs.first else { return true }
            return specs.allSatisfy { $0.differsOnlyInURL(from: first) }
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let template = try container.decodeIfPresent(TransferSpec.self, forKey: .template) {
                specs = try container.decode([URL].self, forKey: .urls).map { url in
                    var spec = template
                    spec.url = url
                    return spec
                }
            } else {
                specs = try container.decode([TransferSpec].self, forKey: .specs)
            }
            batch = try container.decodeIfPresent(Int64.self, forKey: .batch)
            typed = try container.decode(String.self, forKey: .typed)
            force = try container.decode(Bool.self, forKey: .force)
            replaces = try container.decodeIfPresent(Bool.self, forKey: .replaces) ?? false
            paused = try container.decodeIfPresent(Bool.self, forKey: .paused) ?? false
            placement = try container.decodeIfPresent(Placement.self, forKey: .placement)
            tree = try container.decodeIfPresent(String.self, forKey: .tree)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            if specs.count > 1, let first = specs.first, Self.travelAsURLs(specs) {
                try container.encode(first, forKey: .template)
                try container.encode(specs.map(\.url), forKey: .urls)
            } else {
                try container.encode(specs, forKey: .specs)
            }
            try container.encodeIfPresent(batch, forKey: .batch)
            try container.encode(typed, forKey: .typed)
            try container.encode(force, forKey: .force)
            if replaces { try container.encode(replaces, forKey: .replaces) }
            if paused { try container.encode(paused, forKey: .paused) }
            try container.encodeIfPresent(placement, forKey: .placement)
            try container.encodeIfPresent(tree, forKey: .tree)
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
        case .place: return "place"
        case .add: return "add"
        case .walk: return "get -r"
        case .setConcurrency: return "jobs"
        case .setRateLimit: return "limit"
        case .setGlobalLimits: return "limits"
        case .rename: return "rename"
        }
    }

    /// The command that makes `change` on `selection`.
    public static func changing(_ change: StateChange, _ selection: Selection) -> QueueCommand {
        switch change {
        case .pause: return .pause(selection)
        case .resume: return .resume(selection)
        case .cancel: return .cancel(selection)
        case .retry: return .retry(selection)
        }
    }

    /// The change of state a per-item command makes (pause, resume, cancel, retry); nil for the others.
    public var stateChange: StateChange? {
        switch self {
        case .pause: return .pause
        case .resume: return .resume
        case .cancel: return .cancel
        case .retry: return .retry
        case .remove, .move, .place, .add, .walk, .setConcurrency, .setRateLimit, .setGlobalLimits, .rename: return nil
        }
    }

    /// The items a per-item command names.
    public var selection: Selection? {
        switch self {
        case let .pause(selection), let .resume(selection), let .cancel(selection), let .retry(selection),
             let .remove(selection, _), let .setRateLimit(selection, _), let .move(selection, _):
            return selection
        case let .place(id, _), let .rename(id, _): return Selection(ids: [id.rawValue])
        case .add, .walk, .setConcurrency, .setGlobalLimits: return nil
        }
    }
}

/// A place for an item among the items in some states, counted from 0 in queue order: from the start, from
/// where the item is, or from the end (aria2's POS_SET, POS_CUR, POS_END), kept within the list.
public struct Placement: Sendable, Codable, Equatable {
    public enum Origin: String, Sendable, Codable { case start, current, end }
    public var origin: Origin
    public var offset: Int
    public var among: Set<TransferState>

    public init(_ origin: Origin, _ offset: Int, among: Set<TransferState>) {
        self.origin = origin
        self.offset = offset
        self.among = among
    }

    /// The place wanted for an item at `at` of `count` (not yet kept within the list). The offset is clamped
    /// before any sum, so that none overflows (Int.min or Int.max from a client).
    public func target(at: Int, count: Int) -> Int {
        let step = min(max(offset, -count), count)
        switch origin {
        case .start: return step
        case .current: return at + step
        case .end: return count - 1 + step
        }
    }
}

/// A command that changes items' states: the states it applies to and its words. The one copy of the rule:
/// the engine's Transfer, the UI's reducer, aria2's RPC and the verbs' sentences read it here.
public enum StateChange: String, Sendable, CaseIterable {
    case pause, resume, cancel, retry

    /// The states of the items it changes; it leaves the others as they are.
    public var appliesTo: Set<TransferState> {
        switch self {
        case .pause: return [.queued, .running, .waiting]
        case .resume: return [.paused]
        case .cancel: return [.queued, .running, .waiting, .paused]
        case .retry: return [.failed, .cancelled]
        }
    }

    public func applies(to state: TransferState) -> Bool { appliesTo.contains(state) }

    /// "paused", for sentences (`paused 3 (#1 #2 #5)`).
    public var pastTense: String {
        switch self {
        case .pause: return "paused"
        case .resume: return "resumed"
        case .cancel: return "cancelled"
        case .retry: return "retried"
        }
    }
}

/// What a command did: the items it changed and those it left as they were (with their state); for `add`,
/// what became of each spec and the batch.
public struct CommandResult: Sendable, Codable, Equatable {
    public var outcome = CommandOutcome()
    public var added: [AddedItem]?
    public var batch: Int64?
    /// `place`: the place the item has now among the items of its placement's states.
    public var placed: Int?

    public init() {}

    // On the wire, a run of new items with consecutive ids is `[first id, count]`: an add of a million URLs
    // answers with a few numbers, not a million objects.
    private enum CodingKeys: String, CodingKey { case outcome, added, batch, placed }

    private enum AddedRun: Codable {
        case run(first: Int64, count: Int64)
        case item(AddedItem)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let pair = try? container.decode([Int64].self) {
                guard pair.count == 2, pair[1] > 0 else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "a run of added items is [first id, count]")
                }
                self = .run(first: pair[0], count: pair[1])
            } else {
                self = .item(try container.decode(AddedItem.self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case let .run(first, count): try container.encode([first, count])
            case let .item(item): try container.encode(item)
            }
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decode(CommandOutcome.self, forKey: .outcome)
        batch = try container.decodeIfPresent(Int64.self, forKey: .batch)
        placed = try container.decodeIfPresent(Int.self, forKey: .placed)
        added = try container.decodeIfPresent([AddedRun].self, forKey: .added).map { runs in
            runs.flatMap { run -> [AddedItem] in
                switch run {
                case let .run(first, count): return (first..<first + count).map { AddedItem(id: TransferID($0), how: .added) }
                case let .item(item): return [item]
                }
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome, forKey: .outcome)
        try container.encodeIfPresent(batch, forKey: .batch)
        try container.encodeIfPresent(placed, forKey: .placed)
        guard let added else { return }
        var runs: [AddedRun] = []
        for item in added {
            let plain = item == AddedItem(id: item.id, how: .added)
            if plain, case let .run(first, count) = runs.last, first + count == item.id.rawValue {
                runs[runs.count - 1] = .run(first: first, count: count + 1)
            } else {
                runs.append(plain ? .run(first: item.id.rawValue, count: 1) : .item(item))
            }
        }
        try container.encode(runs, forKey: .added)
    }
}
