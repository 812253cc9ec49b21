import ArgumentParser
import FerryCore
import Foundation

/// `--detach` of `get` and `put`.
struct DetachOption: ParsableArguments {
    @Flag(name: .customLong("detach"), help: "Queue the items with the engine (starting one in the background if none runs), print their ids and return at once.")
    var detach = false
}

/// `--tui` of `get` and `put`: the full-screen UI on the whole queue instead of the command's own readout.
struct TUIOption: ParsableArguments {
    @Flag(name: .customLong("tui"), help: "Open the full-screen UI on the whole queue (default in a terminal: a progress readout of these transfers that ends when they do).")
    var tui = false
}

/// `--force` of `get` and `put`.
struct ForceOption: ParsableArguments {
    @Flag(name: .customLong("force"), help: "Queue a new copy even when the same transfer is already in the queue or done: an unfinished one is replaced (its partial file deleted); beside a done download, the copy gets a new name.")
    var force = false
}

/// What the user typed, kept with the batch the command queues (credentials in URLs left out).
func typedCommand() -> String {
    (["ferry"] + CommandLine.arguments.dropFirst().map { word in
        guard word.contains("@"), let url = URL(string: word), url.user != nil else { return word }
        return TerminalSafe.redactedURL(url)
    }).joined(separator: " ")
}

/// `get` and `put` without the UI: this process becomes the engine and works until its items are done, or,
/// when an engine runs, hands them to it and follows them to the end (or, with --detach, returns at once).
/// Either way only this command's items run: the rest of the queue stays as it is. A transfer already in
/// the queue is reused (one line says so) unless `force`.
/// `readout`: progress as a readout redrawn in place in the terminal (LiveReadout.wanted), not lines.
/// As `submit`, for a tree whose walk did not see all of it (`incomplete`: a listing or a directory failed): the
/// command ends with 1 even when every item it queued succeeded.
/// `tree`: where the tree is from (its batch is shown as one row: Batch.tree).
func submit(_ common: CommonOptions, config: Config, specs: [TransferSpec], detach: Bool, force: Bool, readout: Bool,
            incomplete: Bool, tree: String) async throws {
    do {
        try await submit(common, config: config, specs: specs, detach: detach, force: force, readout: readout, tree: tree)
    } catch let exit as ExitCode where incomplete && exit == .success {
        throw ExitCode(1)
    }
    if incomplete { throw ExitCode(1) }
}

func submit(_ common: CommonOptions, config: Config, specs: [TransferSpec], detach: Bool, force: Bool, readout: Bool = false,
            tree: String? = nil) async throws {
    let readsStandardInput = specs.contains { $0.upload?.primarySource == .standardInput }
    if detach {
        guard !readsStandardInput else { throw UsageError("--detach cannot hand over an upload from standard input: this process reads it") }
        let (client, started) = try EngineStartup.attaching(common)
        let added = try add(specs, to: client, force: force, tree: tree)
        // An engine started for this command took -j; one already running keeps its own.
        if !started, let jobs = common.jobs { printError(jobsNotApplied(jobs)) }
        if !started, let retries = common.retries { printError(retriesNotApplied(retries)) }
        Reporter().added(added.items)
        print(added.items.map(\.id.description).joined(separator: " "))
        return
    }
    switch try EngineStartup.begin(common.stateDirectory) {
    case let .engine(lock, store):
        let status = await common.headlessRun(config)
            .run(specs, store: store, directory: common.stateDirectory, lock: lock, force: force, readout: readout, tree: tree)
        throw ExitCode(status)
    case let .running(client):
        if readsStandardInput {
            // Standard input is this process's: the upload runs here, on a queue of its own.
            client.close()
            let status = await common.headlessRun(config)
                .run(specs, store: InMemoryQueueStore(), directory: nil, lock: nil, readout: readout)
            throw ExitCode(status)
        }
        let asked = Date()
        let added = try add(specs, to: client, force: force, tree: tree)
        Reporter().added(added.items)
        // A download already done is said and its path printed; the engine has nothing to do for it.
        for item in added.items where item.how == .alreadyDone {
            if let path = item.savedPath { print(path) }
        }
        let ids = added.items.filter { $0.how != .alreadyDone }.map(\.id)
        guard !ids.isEmpty else { throw ExitCode.success }
        var said = ["handed \(ids.count) \(ids.count == 1 ? "item" : "items") to the running engine: \(TransferID.list(ids))"]
        if let jobs = common.jobs { said.append(jobsNotApplied(jobs)) }
        if let retries = common.retries { said.append(retriesNotApplied(retries)) }
        throw ExitCode(await Follow.run(client, ids: Set(ids), directory: common.stateDirectory, since: asked, saying: said,
                                        readout: readout))
    }
}

/// `get -r`: the engine walks the tree (started in the background when none runs and --detach is given); this
/// command follows its batch, files joining as the walk finds them, to the end: the walk's report, the files'
/// lines, exit 1 when a file failed or a directory could not be listed. Without an engine this process is the
/// engine, working on this tree alone (as `submit`). With --detach the walk is handed over and the command
/// returns at once, saying the batch.
func submit(_ common: CommonOptions, config: Config, walk job: TreeJob, detach: Bool, readout: Bool) async throws {
    let tree = TerminalSafe.redactedURL(job.root)
    if detach {
        let (client, started) = try EngineStartup.attaching(common)
        let batch = try walk(job, with: client)
        if !started, let jobs = common.jobs { printError(jobsNotApplied(jobs)) }
        printError("walking \(tree) into \(TerminalSafe.sanitize(job.directory)) as batch \(batch): `ferry list --batch \(batch)` shows its files")
        print(batch)
        return
    }
    switch try EngineStartup.begin(common.stateDirectory) {
    case let .engine(lock, store):
        printError("listing \(tree)")
        let status = await common.headlessRun(config)
            .run([], walk: job, store: store, directory: common.stateDirectory, lock: lock, readout: readout)
        throw ExitCode(status)
    case let .running(client):
        let asked = Date()
        let batch = try walk(job, with: client)
        var said = ["listing \(tree) in the running engine, batch \(batch)"]
        if let jobs = common.jobs { said.append(jobsNotApplied(jobs)) }
        if let retries = common.retries { said.append(retriesNotApplied(retries)) }
        throw ExitCode(await Follow.run(client, ids: [], tree: batch, directory: common.stateDirectory, since: asked, saying: said,
                                        readout: readout))
    }
}

/// Hands a tree's walk to the engine behind `client`: its batch.
func walk(_ job: TreeJob, with client: ControlClient) throws -> Int64 {
    let result = try QueueVerb.refusalIsUsage { try QueueCommand.walk(job).perform(on: .remote(client)) }
    guard let batch = result.batch else { throw ControlError("the engine did not say the tree's batch") }
    return batch
}

/// What a `get`/`put` says of its -j when a running engine took its items (the engine's value is the queue's:
/// `ferry jobs` changes it for every item).
func jobsNotApplied(_ jobs: Int) -> String {
    "-j \(jobs) not applied: the running engine keeps its own number of transfers at once (ferry jobs \(jobs) sets it)"
}

/// What a `get`/`put` says of its --retries when a running engine took its items (the engine's rules are its
/// own, from its start: its config's [retry] attempts).
func retriesNotApplied(_ retries: Int) -> String {
    "--retries \(retries) not applied: the running engine keeps its own retry rules (its start's --retries, or [retry] attempts)"
}

/// Queues `specs` with the engine behind `client` as one batch (in parts, whatever their number). An engine
/// that went away part-way kept the parts it took: the message says where they are.
func add(_ specs: [TransferSpec], to client: ControlClient, force: Bool = false, tree: String? = nil) throws -> (batch: Int64, items: [AddedItem]) {
    do {
        return try QueueVerb.refusalIsUsage { try client.add(specs, command: typedCommand(), force: force, tree: tree) }
    } catch let error as ControlError where !error.refused && specs.count > 1 && !force {
        throw ControlError(error.description + "; the items it took before are queued (ferry list shows them), "
                           + "and the same command again adds only the rest")
    }
}
