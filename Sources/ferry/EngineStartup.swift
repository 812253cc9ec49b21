import ArgumentParser
import FerryCore
import Foundation

/// Starting work on a state directory: this process becomes its engine, or, when one is already running
/// there, hands the new items to it through the store and exits.
enum EngineStartup {
    enum Outcome {
        case engine(EngineLock, SQLiteQueueStore, [TransferSpec])
        case handedOff(pid: Int32?, ids: [TransferID])
    }

    /// Items are written to the store before anything else, so a handoff never loses them.
    static func begin(_ common: CommonOptions, specs: [TransferSpec]) throws(StateError) -> Outcome {
        let directory = common.stateDirectory
        try directory.prepare()
        let store = try directory.openStore()
        switch try EngineLock.acquire(directory) {
        case let .acquired(lock):
            return .engine(lock, store, specs)
        case let .heldBy(pid):
            let stored: [StoredTransfer]
            do {
                stored = try store.add(specs)
            } catch {
                throw StateError("cannot add to the queue at \(directory.databasePath): \(error)")
            }
            WakeChannel.poke(directory)
            return .handedOff(pid: pid, ids: stored.map(\.id))
        }
    }

    static func reportHandoff(pid: Int32?, ids: [TransferID]) {
        let who = pid.map { "the running ferry (pid \($0))" } ?? "the running ferry"
        let list = ids.map(\.description).joined(separator: " ")
        FileHandle.standardError.write(Data("ferry: handed \(ids.count) item(s) to \(who): \(list)\n".utf8))
    }
}

/// `get` and `put`: become the engine for the state directory and work until these items are done, or
/// hand them to the engine already running there and return at once.
func runEngine(_ common: CommonOptions, config: Config, specs: [TransferSpec]) async throws {
    switch try EngineStartup.begin(common, specs: specs) {
    case let .handedOff(pid, ids):
        EngineStartup.reportHandoff(pid: pid, ids: ids)
        throw ExitCode.success
    case let .engine(lock, store, specs):
        let exitCode = await HeadlessRun(configuration: common.engineConfiguration(config))
            .run(specs, store: store, directory: common.stateDirectory, lock: lock)
        throw ExitCode(exitCode)
    }
}
