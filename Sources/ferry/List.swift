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

    @Option(name: .customLong("state"), help: ArgumentHelp("Only the items in these states, comma-separated (queued, running, waiting, paused, completed or done, failed, cancelled).", valueName: "states"))
    var states: String?

    @Option(name: .customLong("batch"), help: ArgumentHelp("Only the items of this batch.", valueName: "id"))
    var batch: Int64?

    @OptionGroup var common: CommonOptions

    func run() throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        let directory = common.stateDirectory
        let selection = Selection(states: try states.map { (text: String) throws(UsageError) in try Selection.states(text) }, batch: batch)
        // Live from the running engine (byte counts of this moment), else from the store.
        if let client = ControlClient.connect(directory) {
            var request = ControlRequest(id: 0, verb: .list)
            request.selection = selection.isEmpty ? nil : selection
            let reply = try client.request(request)
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
        guard !selection.isEmpty else { return try show(items) }
        let chosen = Set(try selection.choose(among: items.map { ($0.id, $0.state, $0.batch) }).get())
        try show(items.filter { chosen.contains($0.id) })
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
