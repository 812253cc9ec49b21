import ArgumentParser
import FerryCore
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the queue (readable while an engine runs).",
        discussion: "Header values are never printed; URLs are shown without credentials."
    )

    @Flag(name: .customLong("json"), help: "Print a JSON array of objects instead of a table.")
    var json = false

    @OptionGroup var common: CommonOptions

    func run() throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        let directory = common.stateDirectory
        // Live from the running engine (byte counts of this moment), else from the store.
        if let client = ControlClient.connect(directory) {
            let reply = try client.request(ControlRequest(id: 0, verb: .list))
            guard reply.ok, let items = reply.items else { throw ControlError(reply.error ?? "the engine did not list the queue") }
            return try show(items)
        }
        guard FileManager.default.fileExists(atPath: directory.databasePath) else {
            print(json ? "[]" : "the queue is empty")
            return
        }
        let items: [StoredTransfer]
        let store = try directory.openStore()
        do {
            items = try store.loadAll()
        } catch {
            throw StateError("cannot read the queue: \(SQLiteQueueStore.words(error, path: directory.databasePath))")
        }
        try show(items)
    }

    private func show(_ items: [StoredTransfer]) throws {
        if json {
            FileHandle.standardOutput.write(try QueueListing.json(items))
            print()
        } else {
            print(QueueListing.table(items), terminator: "")
        }
    }
}
