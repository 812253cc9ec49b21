import ArgumentParser
import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Item ids as `ferry list` prints them (`#3` or `3`), or `--all`.
struct ItemSelection: ParsableArguments {
    @Argument(help: "Item ids as `ferry list` prints them (#3 or 3).")
    var ids: [String] = []

    @Flag(name: .customLong("all"), help: "Every item in the queue.")
    var all = false

    func parsed() throws(UsageError) -> [Int64] {
        guard all != !ids.isEmpty else { throw UsageError(all ? "give ids or --all, not both" : "no item given (ids as `ferry list` prints them, or --all)") }
        var parsed: [Int64] = []
        for text in ids { parsed += try Self.parse(id: text) }
        return parsed
    }

    static func parse(id text: String) throws(UsageError) -> [Int64] {
        let digits = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard let id = Int64(digits), id > 0 else { throw UsageError("not an item id: '\(TerminalSafe.sanitize(text))'") }
        return [id]
    }
}

extension QueueMove: ExpressibleByArgument {}

/// pause, resume, cancel, retry: ids or --all, through QueueVerb.
protocol ItemVerbCommand: ParsableCommand {
    static var verb: ControlVerb { get }
    var selection: ItemSelection { get }
    var common: CommonOptions { get }
}

extension ItemVerbCommand {
    func run() throws { try QueueVerb.run(Self.verb, ids: selection.parsed(), all: selection.all, common) }
}

struct Pause: ItemVerbCommand {
    static let configuration = CommandConfiguration(abstract: "Pause items (their .part files stay).")
    static let verb = ControlVerb.pause
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: CommonOptions
}

struct Resume: ItemVerbCommand {
    static let configuration = CommandConfiguration(abstract: "Queue paused items again; they continue where they stopped.")
    static let verb = ControlVerb.resume
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: CommonOptions
}

struct Cancel: ItemVerbCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel items (their .part files stay for retry).")
    static let verb = ControlVerb.cancel
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: CommonOptions
}

struct Retry: ItemVerbCommand {
    static let configuration = CommandConfiguration(abstract: "Queue failed or cancelled items again with a fresh retry budget.")
    static let verb = ControlVerb.retry
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: CommonOptions
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Take items off the queue (a finished file is never touched).")
    @OptionGroup var selection: ItemSelection
    @Flag(name: .customLong("delete-part"), help: "Also delete their .part files.")
    var deletePart = false
    @OptionGroup var common: CommonOptions
    func run() throws { try QueueVerb.run(.remove, ids: selection.parsed(), all: selection.all, common, deletePart: deletePart) }
}

struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Move an item in the queue: up, down, top or bottom.")
    @Argument(help: "The item's id.") var id: String
    @Argument(help: "up, down, top or bottom.") var direction: QueueMove
    @OptionGroup var common: CommonOptions
    func run() throws {
        try QueueVerb.run(.move, ids: ItemSelection.parse(id: id), all: false, common, move: direction)
    }
}

struct Jobs: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Set how many transfers the running engine runs at once.")
    @Argument(help: "Transfers at once (1 to 256).") var count: Int
    @OptionGroup var common: CommonOptions
    func validate() throws {
        guard ConcurrencyCaps.range.contains(count) else { throw ValidationError("transfers at once: 1 to 256, got \(count)") }
    }
    func run() throws {
        guard let client = ControlClient.connect(common.stateDirectory) else {
            throw ControlError("no engine is running; -j or [transfers] concurrency sets it for the next one")
        }
        var request = ControlRequest(id: 0, verb: .jobs)
        request.count = count
        try QueueVerb.send(request, client)
        print("\(count) at once")
    }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stop the running engine; running items keep their .part files and resume next time.")
    @OptionGroup var common: CommonOptions
    func run() throws {
        guard let client = ControlClient.connect(common.stateDirectory) else {
            print("no engine is running")
            return
        }
        let reply = try QueueVerb.send(ControlRequest(id: 0, verb: .stop), client)
        // Gone once its socket closes (it stops its transfers first, at most a few seconds).
        while ControlClient.connect(common.stateDirectory) != nil { usleep(100_000) }
        print("stopped the engine\(reply.pid.map { " (pid \($0))" } ?? "")")
    }
}

/// pause, resume, cancel, retry, remove and move: through the running engine, or on the stored queue when
/// none runs (the lock is held meanwhile, so no engine starts halfway).
enum QueueVerb {
    static func run(_ verb: ControlVerb, ids: [Int64], all: Bool, _ common: CommonOptions,
                    deletePart: Bool = false, move: QueueMove? = nil) throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        switch try EngineStartup.begin(common.stateDirectory) {
        case let .running(client):
            var request = ControlRequest(id: 0, verb: verb)
            request.ids = ids.isEmpty ? nil : ids
            request.all = all ? true : nil
            request.deletePart = deletePart ? true : nil
            request.move = move
            try send(request, client)
        case let .engine(lock, store):
            defer { lock.release() }
            try StoredQueueCommands.apply(verb, ids: ids, all: all, store: store, deletePart: deletePart, move: move)
        }
        let what = all ? "every item" : ids.map { "#\($0)" }.joined(separator: " ")
        print("\(verb == .move ? "moved \(move!.rawValue):" : Self.pastTense[verb] ?? verb.rawValue) \(what)")
    }

    private static let pastTense: [ControlVerb: String] = [
        .pause: "paused", .resume: "resumed", .cancel: "cancelled", .retry: "queued again", .remove: "removed",
    ]

    /// A refused request is a usage error (exit 2: an unknown id, a bad value); a broken connection is not.
    @discardableResult
    static func send(_ request: ControlRequest, _ client: ControlClient) throws -> ControlReply {
        let reply = try client.request(request)
        guard reply.ok else { throw UsageError(reply.error ?? "the engine refused \(request.verb.rawValue)") }
        return reply
    }
}
