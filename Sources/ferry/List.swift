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
        let view = QueueView(states: try states.map { (text: String) throws(UsageError) in try Selection.states(text) }, batch: batch)
        let stream = QueueListing.Stream(json: json) { FileHandle.standardOutput.write($0) }
        // Rows from the store, one at a time (memory stays flat whatever the queue's length); with an engine
        // running, what moves (running items, and those waiting for a retry) as it is this moment, and the
        // engine's unwritten changes written first.
        var live: [TransferID: StoredTransfer]?
        if let client = ControlClient.connect(directory) {
            var request = ControlRequest(id: 0, verb: .list)
            request.view = QueueView(states: [.running, .waiting])
            let reply = try client.request(request)
            guard reply.ok, let items = reply.items else { throw ControlError(reply.error ?? "the engine did not list the queue") }
            live = Dictionary(items.map { ($0.id, $0) }) { first, _ in first }
        }
        guard FileManager.default.fileExists(atPath: directory.databasePath) else { return stream.finish() }
        let store = try directory.openStore()
        let matcher = view.matcher
        var pending: [StoredTransfer] = []
        do {
            try store.forEach { row in
                var item = live?[row.id] ?? row
                // A row left running by an engine that stopped, or saved running a moment ago: queued unless
                // the engine says it moves.
                if let live, live[row.id] == nil, item.state == .running || item.state == .waiting { item.state = .queued }
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
