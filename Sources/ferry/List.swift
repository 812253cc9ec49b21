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

    /// Rows asked of a running engine at a time.
    static let page = 5_000

    func run() throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        let directory = common.stateDirectory
        let view = QueueView(states: try states.map { (text: String) throws(UsageError) in try Selection.states(text) }, batch: batch)
        let stream = QueueListing.Stream(json: json) { FileHandle.standardOutput.write($0) }
        // Live from the running engine (byte counts of this moment), page by page; else from the store, row by row.
        if let client = ControlClient.connect(directory) {
            var page = view
            page.limit = Self.page
            while true {
                var request = ControlRequest(id: 0, verb: .list)
                request.view = page
                let reply = try client.request(request)
                guard reply.ok, let items = reply.items else { throw ControlError(reply.error ?? "the engine did not list the queue") }
                try stream.add(items)
                page.offset += items.count
                if items.isEmpty || page.offset >= reply.total ?? 0 { break }
            }
            return stream.finish()
        }
        guard FileManager.default.fileExists(atPath: directory.databasePath) else { return stream.finish() }
        let store = try directory.openStore()
        let matcher = view.matcher
        var pending: [StoredTransfer] = []
        do {
            try store.forEach { item in
                guard matcher.matches(id: item.id, state: item.state, batch: item.batch,
                                      name: { TransferSnapshot.knownName(spec: item.spec, fileName: item.fileName) },
                                      url: { item.spec.url.absoluteString }) else { return }
                pending.append(item)
                if pending.count >= 1_000 {
                    try stream.add(pending)
                    pending.removeAll(keepingCapacity: true)
                }
            }
        } catch let error as StateError {
            throw error
        } catch {
            throw StateError("cannot read the queue: \(SQLiteQueueStore.words(error, path: directory.databasePath))")
        }
        try stream.add(pending)
        stream.finish()
    }
}
