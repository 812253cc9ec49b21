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
        /// A running item's rate (RateEstimator, as every surface shows it), whole bytes per second.
        var bytesPerSecond: Int64?
        var total: Int64?
        var attempts: Int
        var retries: Int
        var lastError: String?
        /// The last failure's kind (FailureKind's raw value) and, for `http`, its status.
        var errorKind: String?
        var httpStatus: Int?
        var headers: [String]
        var batch: Int64?
        /// An item of a tree (`get -r`, `put -r`): its path below the tree's start (Batch.path).
        var path: String?
        /// A resumable upload: its protocol (ietf, tus), where the server keeps it (no credentials) and the
        /// offset the server last confirmed.
        var resumable: String?
        var location: String?
        var confirmed: Int64?
    }

    /// `tree`: where the item's tree is from, when its batch is a tree's.
    static func entry(_ item: StoredTransfer, rate: Double? = nil, tree: String? = nil) -> Entry {
        let source: String? = item.spec.upload?.primarySource.map { source in
            if case let .file(path) = source { return path }
            return "-"
        }
        let failure = ItemFailure(message: item.lastError, cause: item.failure)?.cause
        let destination = item.spec.direction == .download
            ? (item.savedPath ?? item.fileName.map { item.spec.directory + "/" + $0 } ?? item.spec.directory)
            : nil
        return Entry(id: item.id.rawValue, direction: item.spec.direction.rawValue,
                     url: TerminalSafe.redactedURL(item.spec.url), method: item.spec.upload?.urlMethod,
                     destination: destination.map { TerminalSafe.sanitize($0) },
                     source: source.map { TerminalSafe.sanitize($0) }, state: item.state.rawValue,
                     bytes: item.bytesDone, bytesPerSecond: rate.map { Int64($0.rounded()) }, total: item.total, attempts: item.attempts.count, retries: item.retries,
                     lastError: item.lastError.map { TerminalSafe.sanitize($0) },
                     errorKind: failure?.kind.rawValue, httpStatus: failure?.status,
                     headers: item.spec.headers.map { $0.name }, batch: item.batch,
                     path: tree.flatMap { Batch.path(of: item.spec, inTree: $0) }.map { TerminalSafe.sanitize($0) },
                     resumable: item.resumable?.kind.rawValue, location: item.resumable?.displayLocation,
                     confirmed: item.resumable?.location == nil ? nil : item.resumable?.confirmedOffset)
    }

    /// The table's columns: id, direction, state (the words the UI uses), batch and size aligned, then the URL,
    /// the file, and the last error. `idWidth`: the widest id's (`#1034`).
    struct Table {
        var idWidth: Int
        static let stateWidth = TransferState.allCases.map(\.label.count).max() ?? 9
        static let batchWidth = 5
        static let sizeWidth = 19

        var header: String {
            pad("ID", idWidth) + "  " + pad("DIR", 4) + "  " + pad("STATE", Self.stateWidth) + "  "
                + pad("BATCH", Self.batchWidth, right: true) + "  " + pad("SIZE", Self.sizeWidth, right: true) + "  URL  FILE\n"
        }

        func line(_ stored: StoredTransfer) -> String {
            let item = entry(stored)
            let size = item.total.map { ByteFormat.progress(item.bytes, of: $0) } ?? ByteFormat.bytes(item.bytes)
            var line = pad("#\(item.id)", idWidth) + "  " + pad(item.direction == "download" ? "down" : "up", 4) + "  "
                + pad(stored.state.label, Self.stateWidth) + "  " + pad(item.batch.map(String.init) ?? "-", Self.batchWidth, right: true)
                + "  " + pad(size, Self.sizeWidth, right: true) + "  " + item.url + "  " + (item.destination ?? item.source ?? "")
            if let error = item.lastError { line += "  (" + error + ")" }
            return line + "\n"
        }

        private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
            let fill = String(repeating: " ", count: max(0, width - text.count))
            return right ? fill + text : text + fill
        }
    }

    /// An entry as one element of a pretty-printed array with sorted keys, as JSONEncoder writes it (written
    /// by hand: JSONEncoder took half of listing a long queue).
    static func json(_ entry: Entry) -> String {
        var out = "  {\n"
        func field(_ key: String, _ value: String, last: Bool = false) {
            out += "    \""
            out += key
            out += "\" : "
            out += value
            out += last ? "\n" : ",\n"
        }
        field("attempts", String(entry.attempts))
        if let batch = entry.batch { field("batch", String(batch)) }
        field("bytes", String(entry.bytes))
        if let rate = entry.bytesPerSecond { field("bytesPerSecond", String(rate)) }
        if let confirmed = entry.confirmed { field("confirmed", String(confirmed)) }
        if let destination = entry.destination { field("destination", JSONText.string(destination)) }
        field("direction", JSONText.string(entry.direction))
        if let kind = entry.errorKind { field("errorKind", JSONText.string(kind)) }
        field("headers", entry.headers.isEmpty
            ? "[\n\n    ]" : "[\n" + entry.headers.map { "      " + JSONText.string($0) }.joined(separator: ",\n") + "\n    ]")
        if let status = entry.httpStatus { field("httpStatus", String(status)) }
        field("id", String(entry.id))
        if let lastError = entry.lastError { field("lastError", JSONText.string(lastError)) }
        if let location = entry.location { field("location", JSONText.string(location)) }
        if let method = entry.method { field("method", JSONText.string(method)) }
        if let path = entry.path { field("path", JSONText.string(path)) }
        if let resumable = entry.resumable { field("resumable", JSONText.string(resumable)) }
        field("retries", String(entry.retries))
        if let source = entry.source { field("source", JSONText.string(source)) }
        field("state", JSONText.string(entry.state))
        if let total = entry.total { field("total", String(total)) }
        field("url", JSONText.string(entry.url), last: true)
        return out + "  }"
    }

    /// Writes a listing as its items come (page by page from an engine, row by row from the store): memory
    /// stays flat whatever the queue's length. JSON: one array of entries, as JSONEncoder pretty-prints one.
    public final class Stream {
        private let json: Bool
        private let table: Table
        private var header: Bool
        private let write: (Data) -> Void
        private let empty: String
        private var count = 0
        /// The running items' rates (from the engine, before the rows come).
        public var rates: [TransferID: Double] = [:]
        /// Where each tree is from, by batch (Batch.tree): its items are listed with their paths in it.
        public var trees: [Int64: String] = [:]

        /// - Parameters:
        ///   - header: the table starts with a line naming its columns (when stdout is a terminal).
        ///   - lastID: the highest id in the queue, for the width of the id column.
        ///   - empty: the table's line when nothing is listed (what was asked for, when it was not everything).
        public init(json: Bool, header: Bool = false, lastID: Int64 = 999, empty: String = "the queue is empty",
                    write: @escaping (Data) -> Void) {
            self.empty = empty
            self.json = json
            self.header = header && !json
            self.table = Table(idWidth: max(3, "#\(lastID)".count))
            self.write = write
        }

        public func add(_ items: [StoredTransfer]) {
            guard !items.isEmpty else { return }
            var out = ""
            for item in items {
                if json {
                    out += count == 0 ? "[\n" : ",\n"
                    out += QueueListing.json(entry(item, rate: item.state == .running ? rates[item.id] : nil, tree: item.batch.flatMap { trees[$0] }))
                } else {
                    if header {
                        out += table.header
                        header = false
                    }
                    out += table.line(item)
                }
                count += 1
            }
            write(Data(out.utf8))
        }

        public func finish() {
            if json {
                write(Data((count == 0 ? "[]\n" : "\n]\n").utf8))
            } else if count == 0 {
                write(Data((empty + "\n").utf8))
            }
        }
    }
}

extension QueueListing {
    /// What a listing shows beside the items, read from the store of `directory` in one opening: where each tree is
    /// from (by batch: Batch.tree), the highest id (the width of a table's id column; 0 for none), and the walks of
    /// trees under way (as the store keeps them: each listing's outcome is written as it is kept), oldest first.
    public struct Surroundings {
        public var trees: [Int64: String] = [:]
        public var lastID: Int64 = 0
        public var walksUnderWay: [WalkProgress] = []
    }

    public static func surroundings(in directory: StateDirectory) -> Surroundings {
        var found = Surroundings()
        guard FileManager.default.fileExists(atPath: directory.databasePath), let store = try? directory.openStore() else { return found }
        for batch in (try? store.batches()) ?? [] { if let tree = batch.tree { found.trees[batch.id] = tree } }
        found.lastID = (try? store.lastID()) ?? 0
        found.walksUnderWay = ((try? store.walks()) ?? []).map(\.progress).filter { !$0.ended }
        return found
    }

    /// The items of `view`, in queue order, handed to `add` in runs of up to 1,000: rows from the store, one at
    /// a time (memory stays flat whatever the queue's length); with an engine running, what moves (running
    /// items, and those waiting for a retry) as it is this moment, and the engine's unwritten changes written
    /// first. Without one, nothing is running or waiting: such rows are an engine's that stopped, and queued.
    /// `rates`: told the running items' rates first (an engine's; none without one).
    public static func items(of view: QueueView, in directory: StateDirectory, rates: (([TransferID: Double]) -> Void)? = nil,
                             _ add: ([StoredTransfer]) throws -> Void) throws {
        var live: [TransferID: StoredTransfer]?
        if let client = ControlClient.connect(directory) {
            var request = ControlRequest(id: 0, verb: .list)
            request.view = QueueView(states: [.running, .waiting])
            let reply = try client.request(request)
            guard reply.ok, let items = reply.items else { throw ControlError(reply.error ?? "the engine did not list the queue") }
            live = Dictionary(items.map { ($0.id, $0) }) { first, _ in first }
            rates?(Dictionary((reply.rates ?? []).map { (TransferID($0.id), $0.bytesPerSecond) }) { first, _ in first })
        }
        guard FileManager.default.fileExists(atPath: directory.databasePath) else { return }
        let store = try directory.openStore()
        let matcher = view.matcher
        var pending: [StoredTransfer] = []
        do {
            try store.forEach { row in
                var item = live?[row.id] ?? row
                // A row left running by an engine that stopped (a kill -9, a crash) or saved running a moment
                // ago: queued unless a running engine says it moves (with none, nothing moves; the next engine
                // takes the row up again as a queued one).
                if live?[row.id] == nil { item.state = item.state.atRest }
                guard matcher.matches(id: item.id, state: item.state, batch: item.batch, spec: item.spec, fileName: item.fileName) else { return }
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
