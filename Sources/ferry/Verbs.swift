import ArgumentParser
import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Item ids as `ferry list` prints them (`#3` or `3`), or `--all`, or the items in some states and/or one batch.
struct ItemSelection: ParsableArguments {
    @Argument(help: "Item ids as `ferry list` prints them (#3 or 3).", completion: .custom { words, _, _ in ItemCompletion.ids(words) })
    var ids: [String] = []

    @Flag(name: .customLong("all"), help: "Every item in the queue.")
    var all = false

    @Option(name: .customLong("state"), help: ArgumentHelp("The items in these states, comma-separated: \(TransferState.names).", valueName: "states"))
    var states: String?

    @Option(name: .customLong("batch"), help: ArgumentHelp("The items of this batch (the command that queued them; `ferry list` shows it).", valueName: "id"))
    var batch: Int64?

    func parsed() throws(UsageError) -> Selection {
        let filtered = all || states != nil || batch != nil
        guard ids.isEmpty || !filtered else { throw UsageError("give ids, or --all, --state and --batch, not both") }
        guard !ids.isEmpty || filtered else {
            throw UsageError("no item given (ids as `ferry list` prints them, --all, --state STATES or --batch ID)")
        }
        var parsed: [Int64] = []
        for text in ids { parsed += try Self.parse(id: text) }
        return Selection(ids: parsed, all: all, states: try states.map { (text: String) throws(UsageError) in try Selection.states(text) },
                         batch: batch)
    }

    static func parse(id text: String) throws(UsageError) -> [Int64] {
        let digits = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard let id = Int64(digits), id > 0 else { throw UsageError("not an item id: '\(TerminalSafe.sanitize(text))'") }
        return [id]
    }
}

extension QueueMove: ExpressibleByArgument {}

/// pause, resume, cancel, retry: ids, --all, --state or --batch, through QueueVerb.
protocol ItemVerbCommand: ParsableCommand {
    static func command(_ selection: Selection) -> QueueCommand
    var selection: ItemSelection { get }
    var common: StateOptions { get }
}

extension ItemVerbCommand {
    func run() throws { try QueueVerb.run(Self.command(selection.parsed()), common) }
}

struct Pause: ItemVerbCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause items (their .part files stay).")
    static func command(_ selection: Selection) -> QueueCommand { .pause(selection) }
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: StateOptions
}

struct Resume: ItemVerbCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Queue paused items again; they continue where they stopped.")
    static func command(_ selection: Selection) -> QueueCommand { .resume(selection) }
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: StateOptions
}

struct Cancel: ItemVerbCommand {
    static let configuration = CommandConfiguration(commandName: "cancel", abstract: "Cancel items (their .part files stay for retry).")
    static func command(_ selection: Selection) -> QueueCommand { .cancel(selection) }
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: StateOptions
}

struct Retry: ItemVerbCommand {
    static let configuration = CommandConfiguration(commandName: "retry", abstract: "Queue failed or cancelled items again with a fresh retry budget.")
    static func command(_ selection: Selection) -> QueueCommand { .retry(selection) }
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: StateOptions
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Take items off the queue (a finished file is never touched).")
    @OptionGroup var selection: ItemSelection
    @Flag(name: .customLong("delete-part"), help: "Also delete their .part files.")
    var deletePart = false
    @OptionGroup var common: StateOptions
    func run() throws { try QueueVerb.run(.remove(selection.parsed(), deletePart: deletePart), common) }
}

/// `ferry limit RATE ...`: items' own limits, or with `--batch N` alone the batch's (a tree's: one rate its files
/// share), as `l` does in the UI.
struct Limit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limit",
        abstract: "Set items' bandwidth limit (with --batch alone: the batch's own, shared by its items, as a tree's is).")
    @Argument(help: ArgumentHelp("The rate, e.g. 500K, 2M, 1.5MiB (K, M = 1024; KB, MB = 1000); off or 0 for none.", valueName: "rate"))
    var rate: String
    @OptionGroup var selection: ItemSelection
    @OptionGroup var common: StateOptions

    func run() throws {
        let parsed: Int64?
        do throws(UsageError) {
            parsed = try RateText.parse(rate)
        } catch {
            throw UsageError("limit: \(error.description)")
        }
        try QueueVerb.run(.setRateLimit(selection.parsed(), parsed), common)
    }
}

struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "move", abstract: "Move an item in the queue: up, down, top or bottom.")
    @Argument(help: "The item's id.", completion: .custom { words, _, _ in ItemCompletion.ids(words) }) var id: String
    @Argument(help: "up, down, top or bottom.") var direction: QueueMove
    @OptionGroup var common: StateOptions
    func run() throws {
        try QueueVerb.run(.move(Selection(ids: ItemSelection.parse(id: id)), direction), common)
    }
}

struct Jobs: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "jobs", abstract: "Show or set how many transfers the running engine runs at once.")
    @Argument(help: "Transfers at once (1 to 256); without it, the value in force is printed.") var count: Int?
    @OptionGroup var common: StateOptions
    func validate() throws {
        if let count, !ConcurrencyCaps.range.contains(count) { throw ValidationError("transfers at once: 1 to 256, got \(count)") }
    }
    func run() throws {
        let config = try common.loadConfig()
        let live = LiveSettings.load(common.stateDirectory.liveSettingsPath).settings
        guard let client = ControlClient.connect(common.stateDirectory) else {
            guard count == nil else { throw ControlError("no engine is running; -j or [transfers] concurrency sets it for the next one") }
            let next = live.concurrency ?? config.concurrency
            print("no engine is running; the next one runs \(next) at once (\(Self.source(of: next, live: live, config: config)); -j for one run)")
            return
        }
        guard let count else {
            let value = try client.snapshotOnce(view: QueueView(limit: 0)).maxConcurrent
            print("\(value) at once (\(Self.source(of: value, live: live, config: config)))")
            return
        }
        try QueueVerb.perform(.setConcurrency(count), on: .remote(client))
        print("\(count) at once")
    }
}

extension Jobs {
    /// Where the value in force came from, in words: a change while an engine ran (kept for the next), the
    /// config file, or `-j` of the engine's start.
    static func source(of value: Int, live: LiveSettings, config: Config) -> String {
        if live.concurrency == value {
            let when = live.concurrencyChangedAt.map { " on " + ISO8601DateFormatter.string(from: $0, timeZone: .current, formatOptions: [.withFullDate, .withTime, .withColonSeparatorInTime, .withSpaceBetweenDateAndTime]) } ?? ""
            return "set with +, -, ferry jobs or aria2's RPC\(when), kept for the next engine; \(configured(config))"
        }
        if config.concurrency == value { return config.concurrency == Config().concurrency ? "the default" : "the config's [transfers] concurrency" }
        return "-j of the engine's start; \(configured(config))"
    }

    /// What the config holds, in words: "the config says 6", or the default's value when it holds that (there
    /// may be no config file at all: it said "the config says 4" with none).
    static func configured(_ config: Config) -> String {
        config.concurrency == Config().concurrency ? "the default is \(config.concurrency)" : "the config says \(config.concurrency)"
    }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop the running engine; running items keep their .part files and resume next time.")
    @OptionGroup var common: StateOptions
    func run() throws {
        guard let client = ControlClient.connect(common.stateDirectory) else {
            print("no engine is running")
            return
        }
        let reply = try client.request(ControlRequest(id: 0, verb: .stop))
        guard reply.ok else { throw UsageError(reply.error ?? "the engine refused to stop") }
        // Gone once its socket closes (it stops its transfers first, at most a few seconds).
        while ControlClient.connect(common.stateDirectory) != nil { usleep(100_000) }
        print("stopped the engine\(reply.pid.map { " (pid \($0))" } ?? "")")
    }
}

/// Shell completion of item ids (`ferry pause <Tab>`): the ids of the queue's unfinished items, the first
/// 1,000 in queue order (a queue of a million is not read whole for a Tab), from the queue that `--state-dir`
/// on the line being typed, or the environment, names; nothing when there is none.
enum ItemCompletion {
    static func ids(_ words: [String]) -> [String] {
        var option: String?
        if let at = words.firstIndex(of: "--state-dir"), words.indices.contains(at + 1) { option = words[at + 1] }
        var ids: [String] = []
        struct Enough: Error {}
        let unfinished: [TransferState] = [.running, .waiting, .queued, .paused, .failed, .cancelled]
        try? QueueListing.items(of: QueueView(states: unfinished), in: StateDirectory(option: option)) { items in
            ids += items.map { String($0.id.rawValue) }
            if ids.count >= 1_000 { throw Enough() }
        }
        return Array(ids.prefix(1_000))
    }
}

/// A queue command from the shell: through the running engine, or on the stored queue when none runs (the
/// lock is held meanwhile, so no engine starts halfway). Prints what it changed and what it left.
enum QueueVerb {
    static func run(_ command: QueueCommand, _ common: StateOptions) throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        let result: CommandResult
        switch try EngineStartup.begin(common.stateDirectory) {
        case let .running(client):
            result = try perform(command, on: .remote(client))
        case let .engine(lock, store):
            defer { lock.release() }
            result = try perform(command, on: .store(store))
        }
        if case let .move(selection, direction) = command, let id = selection.ids?.first.map(TransferID.init) {
            print(result.outcome.changed.isEmpty ? "\(id) is at the \(direction == .up || direction == .top ? "top" : "bottom") already"
                                                 : "moved \(direction.rawValue): \(id)")
        } else {
            print(result.outcome.sentence(for: command))
        }
    }

    @discardableResult
    static func perform(_ command: QueueCommand, on target: CommandTarget) throws -> CommandResult {
        try refusalIsUsage { try command.perform(on: target) }
    }

    /// A command the engine refused is a usage error (exit 2: an unknown id, a bad value, a full disk), in the
    /// engine's words; a broken connection is not.
    static func refusalIsUsage<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ControlError where error.refused {
            throw UsageError(error.description)
        }
    }

}

struct RPC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rpc",
        abstract: "Show where the engine answers aria2's JSON-RPC ([rpc] in the config) and its secret.")
    @OptionGroup var common: StateOptions
    func run() throws {
        let config = try common.loadConfig()
        try common.stateDirectory.prepare()
        let secret = try config.rpc.secret(stateDirectory: common.stateDirectory.path)
        let url = "http://\(config.rpc.listen.contains(":") ? "[\(config.rpc.listen)]" : config.rpc.listen):\(config.rpc.port)/jsonrpc"
        print(Self.listening(config: config, url: url, directory: common.stateDirectory))
        print("secret: \(secret) (clients send token:\(secret); kept in \(config.rpc.secret == nil ? common.stateDirectory.path + "/rpc-secret" : "the config"))")
        print("an addUri without dir saves into \(TerminalSafe.sanitize(config.unattendedDownloadDirectory())) ([transfers] download_dir)")
    }

    /// Whether a listener answers at `url` now, in words: the running engine's own account of its RPC (it
    /// said "the background engine answers it" when no engine ran, when the running one had started with the
    /// RPC off, and when it could not bind the port, which another state directory's engine held: aria2p then
    /// got `Unauthorized` from that one).
    static func listening(config: Config, url: String, directory: StateDirectory) -> String {
        let restart = "`ferry stop`, then any ferry command starts an engine that answers it"
        guard let client = ControlClient.connect(directory) else {
            return config.rpc.enable
                ? "aria2 JSON-RPC: \(url), answered while the background engine runs; none runs now (ferry, ferry get --detach or ferry engine starts one)"
                : "aria2 JSON-RPC is off ([rpc] enable = true in the config turns it on, at \(url))"
        }
        client.close()
        let pid = EngineLock.holderPID(directory)
        guard let listener = RPCListener.read(stateDirectory: directory.path), pid == nil || listener.pid == pid else {
            // A headless get/put or `ferry run` is the engine, or one from before the listener was kept.
            return "aria2 JSON-RPC: \(url) is not answered: the running engine\(pid.map { " (pid \($0))" } ?? "") is a headless run or started without it; \(restart)"
        }
        if let answering = listener.url {
            return "aria2 JSON-RPC: \(answering) (the background engine, pid \(listener.pid), answers it)"
        }
        if let failure = listener.failure {
            return "aria2 JSON-RPC: \(url) is not answered by this queue's engine (pid \(listener.pid)): \(TerminalSafe.sanitize(failure)); "
                + "whatever answers there (another state directory's engine?) has a secret of its own"
        }
        return config.rpc.enable
            ? "aria2 JSON-RPC: \(url) is not answered: the running engine (pid \(listener.pid)) started with it off; \(restart)"
            : "aria2 JSON-RPC is off ([rpc] enable = true in the config turns it on, at \(url); \(restart))"
    }
}
