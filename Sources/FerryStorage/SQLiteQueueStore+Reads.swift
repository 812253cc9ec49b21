import FerryModel
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Reading the queue: the index rows, items by id, the texts and sort keys a view needs, every item in order,
/// an item's history.
extension SQLiteQueueStore {
    public func forEachIndexRow(_ body: (QueueIndexRow) throws -> Void) throws {
        try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: """
                SELECT id, position, state, batch, host, fileName,
                    CASE WHEN fileName IS NOT NULL AND state != 'completed' THEN spec END AS claimSpec
                FROM transfer ORDER BY position, id
                """)
            while let row = try rows.next() {
                var item = QueueIndexRow(id: TransferID(row[0]), position: row[1], state: TransferState(rawValue: row[2]) ?? .queued,
                                         batch: row[3], host: row[4])
                if let name: String = row[5], let text: String = row[6],
                   let spec = try? SpecJSON.decode(text) {
                    item.claim = (spec.directory, name)
                }
                try body(item)
            }
        }
    }

    public func load(_ ids: [TransferID]) throws -> [StoredTransfer] {
        guard !ids.isEmpty else { return [] }
        return try pool.read { db in
            var items: [StoredTransfer] = []
            items.reserveCapacity(ids.count)
            var decoder = RowDecoder()
            try Self.byID(db, "SELECT * FROM transfer", ids) { items.append(try decoder.decode($0)) }
            return items
        }
    }

    /// The rows of `select` (a query without WHERE) for these ids, one at a time.
    static func byID(_ db: Database, _ select: String, _ ids: [TransferID], _ body: (Row) throws -> Void) throws {
        try whereIn(db, select, column: "id", ids.map(\.rawValue), body)
    }

    /// The rows of `select` (a query without WHERE) whose `column` is one of `values`, one at a time, asked in
    /// chunks below SQLite's limit of bound parameters (the statements of a full chunk and of one value, the
    /// engine loading an item as it starts, are kept; other lengths vary).
    static func whereIn<Value: DatabaseValueConvertible>(_ db: Database, _ select: String, column: String, _ values: [Value],
                                                                 _ body: (Row) throws -> Void) throws {
        let chunkSize = 500
        for start in stride(from: 0, to: values.count, by: chunkSize) {
            let chunk = values[start..<min(values.count, start + chunkSize)]
            let sql = "\(select) WHERE \(column) IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))"
            let statement = try chunk.count == chunkSize || chunk.count == 1 ? db.cachedStatement(sql: sql) : db.makeStatement(sql: sql)
            let rows = try Row.fetchCursor(statement, arguments: StatementArguments(Array(chunk)))
            while let row = try rows.next() { try body(row) }
        }
    }

    public func forEachText(of ids: [TransferID], _ body: (TransferID, String, String?) throws -> Void) throws {
        try pool.read { db in
            try Self.byID(db, "SELECT id, url, COALESCE(name, fileName) FROM transfer", ids) { row in
                try body(TransferID(row[0]), row[1], row[2])
            }
        }
    }

    public func forEachSortKey(of ids: [TransferID], _ body: (TransferID, String, String?, Int64, Int64?) throws -> Void) throws {
        try pool.read { db in
            try Self.byID(db, "SELECT id, url, COALESCE(name, fileName), bytesDone, bytesExpected FROM transfer", ids) { row in
                try body(TransferID(row[0]), row[1], row[2], row[3], row[4])
            }
        }
    }

    public func forEachText(after id: TransferID, _ body: (TransferID, String, String?) throws -> Void) throws {
        try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT id, url, COALESCE(name, fileName) FROM transfer WHERE id > ?",
                                           arguments: [id.rawValue])
            while let row = try rows.next() { try body(TransferID(row[0]), row[1], row[2]) }
        }
    }

    public func loadAll() throws -> [StoredTransfer] {
        try loadAdded(after: TransferID(0))  // rowids start at 1
    }

    public func loadAdded(after id: TransferID) throws -> [StoredTransfer] {
        try pool.read { db in
            var decoder = RowDecoder()
            return try Row.fetchAll(db, sql: "SELECT * FROM transfer WHERE id > ? ORDER BY position, id", arguments: [id.rawValue])
                .map { row in try decoder.decode(row) }
        }
    }


    /// Every item in queue order, one row at a time (a cursor: memory stays flat whatever the queue's length).
    public func forEach(_ body: (StoredTransfer) throws -> Void) throws {
        try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT * FROM transfer ORDER BY position, id")
            var decoder = RowDecoder()
            while let row = try rows.next() { try body(try decoder.decode(row)) }
        }
    }

    /// The item's recent state changes, oldest first. Its addition is its row's `createdAt` (an add writes no
    /// event row: a million rows less for a million URLs), said first while no older change has been dropped.
    public func history(_ id: TransferID) throws -> [Event] {
        try pool.read { db in
            var events = try Row.fetchAll(db, sql: "SELECT at, state, message FROM event WHERE transferId = ? ORDER BY id",
                                          arguments: [id.rawValue]).map { row in
                Event(at: Date(timeIntervalSince1970: row["at"]),
                      state: TransferState(rawValue: row["state"]) ?? .queued, message: row["message"])
            }
            // Rows written before kept an "added" event of their own.
            if events.first?.message != Self.addedMessage, events.count < Self.eventsKept,
               let createdAt = try Double.fetchOne(db, sql: "SELECT createdAt FROM transfer WHERE id = ?", arguments: [id.rawValue]) {
                events.insert(Event(at: Date(timeIntervalSince1970: createdAt), state: .queued, message: Self.addedMessage), at: 0)
            }
            return events
        }
    }
}
