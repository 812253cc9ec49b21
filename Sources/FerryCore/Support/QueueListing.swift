import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// `ferry list`: the stored queue as JSON or a table. Header values never appear; URLs lose credentials.
public enum QueueListing {
    struct Entry: Encodable {
        var id: Int64
        var direction: String
        var url: String
        var method: String?
        var destination: String?
        var source: String?
        var state: String
        var bytes: Int64
        var total: Int64?
        var attempts: Int
        var retries: Int
        var lastError: String?
        var headers: [String]
        var batch: Int64?
    }

    static func entry(_ item: StoredTransfer) -> Entry {
        let source: String? = item.spec.upload?.primarySource.map { source in
            if case let .file(path) = source { return path }
            return "-"
        }
        let destination = item.spec.direction == .download
            ? (item.savedPath ?? item.fileName.map { item.spec.directory + "/" + $0 } ?? item.spec.directory)
            : nil
        return Entry(id: item.id.rawValue, direction: item.spec.direction.rawValue,
                     url: TerminalSafe.redactedURL(item.spec.url), method: item.spec.upload?.method,
                     destination: destination.map { TerminalSafe.sanitize($0) },
                     source: source.map { TerminalSafe.sanitize($0) }, state: item.state.rawValue,
                     bytes: item.bytesDone, total: item.total, attempts: item.attempts.count, retries: item.retries,
                     lastError: item.lastError.map { TerminalSafe.sanitize($0) },
                     headers: item.spec.headers.map { $0.name }, batch: item.batch)
    }

    /// One item's line of the table.
    static func line(_ item: StoredTransfer) -> String {
        let item = entry(item)
        let arrow = item.direction == "download" ? "down" : "up  "
        let size = item.total.map { "\(ByteFormat.bytes(item.bytes))/\(ByteFormat.bytes($0))" } ?? ByteFormat.bytes(item.bytes)
        let place = item.destination ?? item.source ?? ""
        let batch = item.batch.map { "batch \($0)" } ?? "-"
        var line = "#\(item.id)\t\(arrow)\t\(item.state)\t\(batch)\t\(size)\t\(item.url)\t\(place)"
        if let error = item.lastError { line += "\t\(error)" }
        return line + "\n"
    }

    /// Writes a listing as its items come (page by page from an engine, row by row from the store): memory
    /// stays flat whatever the queue's length. JSON: one array of entries, as JSONEncoder pretty-prints one.
    public final class Stream {
        private let json: Bool
        private let write: (Data) -> Void
        private var count = 0
        private let encoder = JSONEncoder()

        public init(json: Bool, write: @escaping (Data) -> Void) {
            self.json = json
            self.write = write
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        }

        public func add(_ items: [StoredTransfer]) throws {
            guard !items.isEmpty else { return }
            var out = Data()
            for item in items {
                if json {
                    out.append(contentsOf: (count == 0 ? "[\n" : ",\n").utf8)
                    // Indented as one element of a pretty-printed array.
                    let object = String(decoding: try encoder.encode(entry(item)), as: UTF8.self)
                    out.append(contentsOf: object.split(separator: "\n", omittingEmptySubsequences: false)
                        .map { "  " + $0 }.joined(separator: "\n").utf8)
                } else {
                    out.append(contentsOf: line(item).utf8)
                }
                count += 1
            }
            write(out)
        }

        public func finish() {
            if json {
                write(Data((count == 0 ? "[]\n" : "\n]\n").utf8))
            } else if count == 0 {
                write(Data("the queue is empty\n".utf8))
            }
        }
    }
}

extension QueueListing {
    /// The items of `view`, in queue order, handed to `add` in runs of up to 1,000: rows from the store, one at
    /// a time (memory stays flat whatever the queue's length); with an engine running, what moves (running
    /// items, and those waiting for a retry) as it is this moment, and the engine's unwritten changes written
    /// first.
    public static func items(of view: QueueView, in directory: StateDirectory, _ add: ([StoredTransfer]) throws -> Void) throws {
        var live: [TransferID: StoredTransfer]?
        if let client = ControlClient.connect(directory) {
            var request = ControlRequest(id: 0, verb: .list)
            request.view = QueueView(states: [.running, .waiting])
            let reply = try client.request(request)
            guard reply.ok, let items = reply.items else { throw ControlError(reply.error ?? "the engine did not list the queue") }
            live = Dictionary(items.map { ($0.id, $0) }) { first, _ in first }
        }
        guard FileManager.default.fileExists(atPath: directory.databasePath) else { return }
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
                    try add(pending)
                    pending.removeAll(keepingCapacity: true)
                }
            }
        } catch let error as StateError {
            throw error
        } catch {
            throw StateError("cannot read the queue: \(SQLiteQueueStore.words(error, path: directory.databasePath))")
        }
        try add(pending)
    }
}
