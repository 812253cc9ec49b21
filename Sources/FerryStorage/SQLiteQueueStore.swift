import FerryModel
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The durable queue: SQLite in WAL mode, so `ferry list` and a second `ferry get` can read and add
/// while an engine writes. Specs and attempts are JSON; everything a listing needs has its own column.
public final class SQLiteQueueStore: QueueStore {
    /// One row of an item's short history.
    public struct Event: Sendable, Equatable {
        public var at: Date
        public var state: TransferState
        public var message: String?
    }

    static let eventsKept = 20
    let pool: DatabasePool

    /// What this process knows each item's row holds, so a save needs no read first: the state last
    /// written (an event is logged when it changes) and how many events the item has (pruned past 20).
    /// Only the engine changes states; other processes only add rows, which this process then reads.
    private struct Known {
        var state: String
        var events: Int
        /// The attempts last written, with their JSON: most saves leave them as they were, and encoding
        /// is the dearest part of a save.
        var attempts: (value: [Attempt], json: String)?
    }
    private let known = Mutex<[Int64: Known]>([:])
    private let encoder = JSONEncoder()

    private let path: String
    /// The engine's claims (journalClaims); nil: each claim is a transaction of its own.
    private let claims = Mutex<ClaimJournal?>(nil)

    /// Opens (creating and migrating as needed) the queue database at `path`.
    public init(path: String) throws(StateError) {
        self.path = path
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Checkpoints every 16 MiB of log rather than 4: a long add rewrites the same last pages of the table
            // and its indexes in each of its transactions, and each checkpoint copied them again.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 4000")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // The queue holds URLs with their credentials and the users' headers: readable by its owner only
            // (SQLite gives the -wal and -shm files the database's mode).
            for suffix in ["", "-wal", "-shm"] { _ = chmod(path + suffix, 0o600) }
            try Self.migrator.migrate(pool)
        } catch {
            throw StateError("cannot open the queue: \(Self.words(error, path: path))")
        }
    }

    /// What went wrong with the database, in words, with what to do where there is something to do.
    public static func words(_ error: Error, path: String) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        let directory = (path as NSString).deletingLastPathComponent
        switch error.resultCode {
        case .SQLITE_FULL:
            return "the disk holding \(directory) is full"
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return "\(path) is damaged (not a queue database); move it aside to start a new queue: mv \(path) \(path).damaged"
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN, .SQLITE_AUTH:
            return "cannot write \(path) (its permissions, or a read-only filesystem)"
        case .SQLITE_IOERR:
            return "input/output error on \(path)"
        default:
            return "\(path): \(error.message ?? error.description)"
        }
    }

    /// Runs a write; its error in words (StateError).
    private func writing<T>(_ body: (Database) throws -> T) throws(StateError) -> T {
        do {
            return try pool.write(body)
        } catch {
            throw StateError(Self.words(error, path: path))
        }
    }

    /// The schema, one migration per release that changed it; never edit a shipped migration.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE transfer (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    position INTEGER NOT NULL,
                    direction TEXT NOT NULL,
                    url TEXT NOT NULL,
                    spec TEXT NOT NULL,
                    state TEXT NOT NULL,
                    fileName TEXT,
                    savedPath TEXT,
                    etag TEXT,
                    lastModified TEXT,
                    totalLength INTEGER,
                    bytesDone INTEGER NOT NULL DEFAULT 0,
                    bytesExpected INTEGER,
                    retries INTEGER NOT NULL DEFAULT 0,
                    attempts TEXT NOT NULL DEFAULT '[]',
                    lastError TEXT,
                    createdAt REAL NOT NULL,
                    updatedAt REAL NOT NULL
                );
                CREATE INDEX transfer_position ON transfer(position);
                CREATE TABLE event (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    transferId INTEGER NOT NULL REFERENCES transfer(id) ON DELETE CASCADE,
                    at REAL NOT NULL,
                    state TEXT NOT NULL,
                    message TEXT
                );
                CREATE INDEX event_transfer ON event(transferId, id);
                """)
        }
        migrator.registerMigration("v2: segments") { db in
            try db.execute(sql: "ALTER TABLE transfer ADD COLUMN segments TEXT")
        }
        migrator.registerMigration("v3: rate limits") { db in
            try db.execute(sql: "ALTER TABLE transfer ADD COLUMN rateLimit INTEGER")
        }
        migrator.registerMigration("v4: batches and identity") { db in
            try db.execute(sql: """
                CREATE TABLE batch (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    createdAt REAL NOT NULL,
                    command TEXT NOT NULL
                );
                ALTER TABLE transfer ADD COLUMN batch INTEGER;
                ALTER TABLE transfer ADD COLUMN identity TEXT;
                """)
            // Items queued before: their identity from their spec (one whose spec cannot be read keeps none).
            let update = try db.makeStatement(sql: "UPDATE transfer SET identity = ? WHERE id = ?")
            try eachSpec(db) { id, spec in try update.execute(arguments: [spec.identity, id]) }
            try db.execute(sql: """
                CREATE INDEX transfer_identity ON transfer(identity);
                CREATE INDEX transfer_batch ON transfer(batch);
                """)
        }
        migrator.registerMigration("v5: host and name columns") { db in
            // What an engine indexes and a filter matches, without reading each item's spec.
            try db.execute(sql: """
                ALTER TABLE transfer ADD COLUMN host TEXT NOT NULL DEFAULT '';
                ALTER TABLE transfer ADD COLUMN name TEXT;
                ALTER TABLE transfer ADD COLUMN response TEXT;
                """)
            let update = try db.makeStatement(sql: "UPDATE transfer SET host = ?, name = ? WHERE id = ?")
            try eachSpec(db) { id, spec in try update.execute(arguments: [spec.host, uploadName(spec), id]) }
        }
        migrator.registerMigration("v6: resumable uploads") { db in
            try db.execute(sql: "ALTER TABLE transfer ADD COLUMN resumable TEXT")
        }
        migrator.registerMigration("v7: failure kinds") { db in
            // The last failure's kind (FailureCause.token) beside its message; rows from before keep NULL and are
            // read from their message's words.
            try db.execute(sql: "ALTER TABLE transfer ADD COLUMN errorKind TEXT")
        }
        migrator.registerMigration("v8: leftovers") { db in
            // The `.part` files of unfinished downloads taken off the queue with their files kept (Leftover).
            try db.execute(sql: "CREATE TABLE leftover (identity TEXT PRIMARY KEY, value TEXT NOT NULL)")
        }
        return migrator
    }

    /// Each row's id and spec, for a migration that fills new columns from them (a spec that cannot be read is
    /// skipped: its columns keep their defaults).
    private static func eachSpec(_ db: Database, _ body: (Int64, TransferSpec) throws -> Void) throws {
        var decoder = RowDecoder()
        for row in try Row.fetchAll(db, sql: "SELECT id, spec, url FROM transfer") {
            guard let spec = try? decoder.spec(row) else { continue }
            try body(row["id"], spec)
        }
    }

    /// An upload's source as lists name it (a download's name is its `fileName`, once known).
    private static func uploadName(_ spec: TransferSpec) -> String? {
        TransferSnapshot.knownName(spec: spec, fileName: nil)
    }

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
                   let spec = try? JSONDecoder().decode(TransferSpec.self, from: Data(text.utf8)) {
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
    private static func byID(_ db: Database, _ select: String, _ ids: [TransferID], _ body: (Row) throws -> Void) throws {
        try whereIn(db, select, column: "id", ids.map(\.rawValue), body)
    }

    /// The rows of `select` (a query without WHERE) whose `column` is one of `values`, one at a time, asked in
    /// chunks below SQLite's limit of bound parameters (the statements of a full chunk and of one value, the
    /// engine loading an item as it starts, are kept; other lengths vary).
    private static func whereIn<Value: DatabaseValueConvertible>(_ db: Database, _ select: String, column: String, _ values: [Value],
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

    public func add(_ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition] {
        try writing { db in
            var position = try Int.fetchOne(db, sql: "SELECT COALESCE(MAX(position), -1) + 1 FROM transfer") ?? 0
            let now = Date().timeIntervalSince1970
            let insert = try db.cachedStatement(sql: """
                INSERT INTO transfer (position, direction, url, spec, state, rateLimit, batch, identity, host, name, createdAt, updatedAt)
                VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)
                """)
            var added: [QueueAddition] = []
            added.reserveCapacity(specs.count)
            // The specs of one command differ in their URLs at most: their JSON (without the URL) is made once.
            var specJSON: (spec: TransferSpec, text: String)?
            let identities = specs.map(\.identity)
            // Which of them the queue holds already, asked for all at once (most adds find none); and those this
            // add queues, for a list that names one transfer twice.
            var queued = reuse ? try Self.stored(db, identities: identities.compactMap { $0 }) : []
            var leftovers = try Self.leftovers(db, identities: identities.compactMap { $0 })
            for (spec, identity) in zip(specs, identities) {
                if reuse, let identity, queued.contains(identity), var found = try Self.reusable(db, identity: identity) {
                    if let batch, found.batch != batch {
                        try db.cachedStatement(sql: "UPDATE transfer SET batch = ? WHERE id = ?").execute(arguments: [batch, found.id.rawValue])
                        found.batch = batch
                    }
                    // Asked again with other options: the item takes them (a limit asked anew is its limit in force).
                    let previous = found.retakes(spec) ? found.spec : nil
                    if let previous {
                        var stored = spec
                        stored.url = Self.specURL
                        let limit = spec.rateLimit != previous.rateLimit ? spec.rateLimit : found.rateLimit
                        try db.cachedStatement(sql: "UPDATE transfer SET spec = ?, rateLimit = ? WHERE id = ?")
                            .execute(arguments: [try json(stored), limit, found.id.rawValue])
                        found.spec = spec
                        found.rateLimit = limit
                    }
                    added.append(QueueAddition(item: found, existing: true, previousSpec: previous))
                    continue
                }
                var stored = spec
                stored.url = Self.specURL
                if specJSON?.spec != stored { specJSON = (stored, try json(stored)) }
                try RowWrite.run(insert, in: db, [.integer(Int64(position)), .text(spec.direction.rawValue), .text(spec.url.absoluteString),
                                                   .text(specJSON?.text), .integer(spec.rateLimit), .integer(batch), .text(identity),
                                                   .text(spec.host), .text(Self.uploadName(spec)), .real(now), .real(now)])
                let id = TransferID(db.lastInsertedRowID)
                if reuse, let identity { queued.insert(identity) }
                var item = StoredTransfer(id: id, position: position, spec: spec)
                item.batch = batch
                // The same transfer taken off the queue with its `.part` file kept: the new item goes on from it.
                if let identity, !leftovers.isEmpty, let leftover = leftovers.removeValue(forKey: identity) {
                    try db.cachedStatement(sql: "DELETE FROM leftover WHERE identity = ?").execute(arguments: [identity])
                    if leftover.adopt(into: &item) {
                        try db.cachedStatement(sql: """
                            UPDATE transfer SET fileName = ?, etag = ?, lastModified = ?, totalLength = ?, bytesDone = ?,
                                bytesExpected = ?, segments = ? WHERE id = ?
                            """).execute(arguments: [item.fileName, item.validators.etag, item.validators.lastModified,
                                                     item.validators.totalLength, item.bytesDone, item.bytesExpected,
                                                     try item.segments.map { try json($0) }, id.rawValue])
                    }
                }
                added.append(QueueAddition(item: item, existing: false))
                position += 1
            }
            return added
        }
    }

    public func unfinished(sameAs identities: [String]) throws -> [(id: TransferID, identity: String)] {
        try pool.read { db in
            var found: [(id: TransferID, identity: String)] = []
            try Self.whereIn(db, "SELECT id, state, identity FROM transfer", column: "identity", identities) { row in
                if row[1] as String? != TransferState.completed.rawValue { found.append((TransferID(row[0]), row[2])) }
            }
            return found.sorted { $0.id < $1.id }
        }
    }

    public func saveSpec(_ id: TransferID, _ spec: TransferSpec) throws {
        var stored = spec
        stored.url = Self.specURL
        let text = try json(stored)
        try writing { db in
            try db.cachedStatement(sql: "UPDATE transfer SET spec = ?, identity = ?, name = ? WHERE id = ?")
                .execute(arguments: [text, spec.identity, Self.uploadName(spec), id.rawValue])
        }
    }

    public func keepLeftovers(_ leftovers: [Leftover]) throws {
        guard !leftovers.isEmpty else { return }
        try writing { db in
            let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO leftover (identity, value) VALUES (?, ?)")
            for leftover in leftovers { try insert.execute(arguments: [leftover.identity, try json(leftover)]) }
        }
    }

    /// The leftovers of `identities` (most adds have none: the table is usually empty).
    private static func leftovers(_ db: Database, identities: [String]) throws -> [String: Leftover] {
        guard try Int.fetchOne(db, sql: "SELECT 1 FROM leftover LIMIT 1") != nil else { return [:] }
        var found: [String: Leftover] = [:]
        try whereIn(db, "SELECT identity, value FROM leftover", column: "identity", identities) { row in
            if let text: String = row[1], let leftover = try? JSONDecoder().decode(Leftover.self, from: Data(text.utf8)) { found[row[0]] = leftover }
        }
        return found
    }

    /// Those of `identities` that items of the queue have.
    private static func stored(_ db: Database, identities: [String]) throws -> Set<String> {
        var found: Set<String> = []
        try whereIn(db, "SELECT identity FROM transfer", column: "identity", identities) { found.insert($0[0]) }
        return found
    }

    /// The item an add of `identity` reuses (StoredTransfer.reusable), if any.
    private static func reusable(_ db: Database, identity: String) throws -> StoredTransfer? {
        let same = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM transfer WHERE identity = ? ORDER BY id DESC"),
                                    arguments: [identity]).map { row in try RowDecoder.decode(row) }
        return StoredTransfer.reusable(among: same)
    }

    /// The highest id given so far (0 for an empty queue).
    public func lastID() throws -> Int64 {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(id), 0) FROM transfer") ?? 0 }
    }

    public func makeBatch(command: String) throws -> Batch {
        try writing { db in
            let now = Date()
            try db.execute(sql: "INSERT INTO batch (createdAt, command) VALUES (?, ?)", arguments: [now.timeIntervalSince1970, command])
            return Batch(id: db.lastInsertedRowID, createdAt: now, command: command)
        }
    }

    public func batches() throws -> [Batch] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM batch ORDER BY id").map { row in
                Batch(id: row["id"], createdAt: Date(timeIntervalSince1970: row["createdAt"]), command: row["command"])
            }
        }
    }

    public func save(_ item: StoredTransfer) throws {
        try save([item])
    }

    /// One transaction for all of them, with statements prepared once per connection. A burst of small
    /// downloads makes thousands of these: each item costs one UPDATE, plus an INSERT when its state changed.
    public func save(_ items: [StoredTransfer]) throws {
        guard !items.isEmpty else { return }
        try writing { db in
            let now = Date().timeIntervalSince1970
            let update = try db.cachedStatement(sql: """
                UPDATE transfer SET state = ?, fileName = ?, savedPath = ?, etag = ?, lastModified = ?, totalLength = ?,
                    bytesDone = ?, bytesExpected = ?, retries = ?, attempts = ?, lastError = ?, errorKind = ?, segments = ?,
                    rateLimit = ?, response = ?, resumable = ?, updatedAt = ?
                WHERE id = ?
                """)
            let event = try db.cachedStatement(sql: "INSERT INTO event (transferId, at, state, message) VALUES (?, ?, ?, ?)")
            var written: [Int64: Known] = [:]
            for item in items {
                let id = item.id.rawValue
                var before = try written[id] ?? known.withLock({ $0[id] }) ?? Self.readKnown(db, id)
                let attempts = try before.attempts.flatMap { $0.value == item.attempts ? $0.json : nil } ?? json(item.attempts)
                try RowWrite.run(update, in: db, [.text(item.state.rawValue), .text(item.fileName), .text(item.savedPath),
                                                  .text(item.validators.etag), .text(item.validators.lastModified),
                                                  .integer(item.validators.totalLength), .integer(item.bytesDone),
                                                  .integer(item.bytesExpected), .integer(Int64(item.retries)), .text(attempts),
                                                  .text(item.lastError), .text(item.failure?.token),
                                                  .text(try item.segments.map { try json($0) }),
                                                  .integer(item.rateLimit), .text(try item.response.map { try json($0) }),
                                                  .text(try item.resumable.map { try json($0) }), .real(now), .integer(id)])
                guard db.changesCount > 0 else { continue }  // removed meanwhile
                before.attempts = (item.attempts, attempts)
                if before.state != item.state.rawValue {
                    try RowWrite.run(event, in: db, [.integer(id), .real(now), .text(item.state.rawValue), .text(item.lastError)])
                    before.state = item.state.rawValue
                    before.events += 1
                    if before.events > Self.eventsKept {
                        try db.cachedStatement(sql: """
                            DELETE FROM event WHERE transferId = ? AND id NOT IN
                                (SELECT id FROM event WHERE transferId = ? ORDER BY id DESC LIMIT ?)
                            """).execute(arguments: [id, id, Self.eventsKept])
                        before.events = Self.eventsKept
                    }
                }
                written[id] = before
            }
            // Known only once the transaction commits (a failed one leaves the rows as they were). Only items that
            // may change again soon are kept (memory follows what moves, not the queue's length).
            known.withLock { known in
                for (id, entry) in written {
                    let state = TransferState(rawValue: entry.state)
                    known[id] = state?.isTerminal == true || state == .paused ? nil : entry
                }
            }
        }
        claims.withLock { $0?.confirm(items) }
    }

    /// An item this process has not written yet (another process added it, or this one before it last started):
    /// read what its row holds, in one statement read through SQLite's C API (once per item and run).
    private static func readKnown(_ db: Database, _ id: Int64) throws -> Known {
        // Statements kept (cachedStatement), as in every query made once per item: parsing one costs more than running it.
        let statement = try db.cachedStatement(sql: "SELECT state, (SELECT COUNT(*) FROM event WHERE transferId = ?1) FROM transfer WHERE id = ?1")
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        defer { sqlite3_reset(raw) }
        var code = sqlite3_bind_int64(raw, 1, id)
        guard code == SQLITE_OK else { throw DatabaseError.of(code, db) }
        code = sqlite3_step(raw)
        switch code {
        case SQLITE_ROW:
            let state = sqlite3_column_text(raw, 0).map { String(cString: $0) } ?? ""
            return Known(state: state, events: Int(sqlite3_column_int64(raw, 1)))
        case SQLITE_DONE:
            return Known(state: "", events: 0)  // removed meanwhile: the update changes nothing either
        default:
            throw DatabaseError.of(code, db)
        }
    }

    public func saveRanks(_ ranks: [(TransferID, Int)]) throws {
        guard !ranks.isEmpty else { return }
        try writing { db in
            let update = try db.cachedStatement(sql: "UPDATE transfer SET position = ? WHERE id = ?")
            for (id, rank) in ranks {
                try update.execute(arguments: [rank, id.rawValue])
            }
        }
    }

    public func checkpoint(_ id: TransferID, bytesDone: Int64) throws {
        try checkpoint([(id, bytesDone)])
    }

    public func checkpoint(_ checkpoints: [(TransferID, Int64)]) throws {
        guard !checkpoints.isEmpty else { return }
        try pool.write { db in
            // Only for items still moving: a late checkpoint never rewrites a finished item's count.
            let statement = try db.cachedStatement(sql: "UPDATE transfer SET bytesDone = ?, updatedAt = ? WHERE id = ? AND state IN ('running', 'queued', 'waiting', 'paused')")
            let now = Date().timeIntervalSince1970
            for (id, bytesDone) in checkpoints {
                try statement.execute(arguments: [bytesDone, now, id.rawValue])
            }
        }
    }

    /// Into the journal when the engine keeps one (journalClaims), else a transaction of its own. When the
    /// journal cannot take a claim (a full disk) this throws and journals no more: the claim, and those after it,
    /// then go into the rows as where there is no journal, each after the batch being written (StoreWriter;
    /// written here at once it could be undone by an older record of that batch, committed after it).
    public func recordClaim(_ id: TransferID, fileName: String, validators: Validators) throws {
        let claim = ClaimJournal.Entry(id, fileName: fileName, validators: validators)
        let journaled = claims.withLock { journal -> Bool? in
            guard let current = journal else { return nil }
            do throws(StateError) {
                try current.append(claim)
                return true
            } catch {
                journal = nil
                return false
            }
        }
        switch journaled {
        case true?: return
        case false?: throw StateError("the claim journal \(claimJournalPath) cannot be written: claims go into the queue itself")
        case nil: try writing { db in try Self.writeClaim(db, claim, replayed: false) }
        }
    }

    /// A claim into its item's row; a replayed one only into a row with no name yet (a row with one has been
    /// written since the claim, with the same name or the one the file was published under and newer
    /// validators, which the claim must not take back).
    private static func writeClaim(_ db: Database, _ claim: ClaimJournal.Entry, replayed: Bool) throws {
        try db.cachedStatement(sql: """
            UPDATE transfer SET fileName = ?, etag = ?, lastModified = ?, totalLength = ?, updatedAt = ?
            WHERE id = ? AND state IN ('running', 'queued', 'waiting', 'paused')
            """ + (replayed ? " AND fileName IS NULL" : "")).execute(arguments: [
                claim.fileName, claim.etag, claim.lastModified, claim.totalLength, Date().timeIntervalSince1970, claim.id,
            ])
    }

    /// Where the claims of this store's engine are journaled (beside the database).
    public var claimJournalPath: String { path + "-claims" }

    /// From now on claims go to the journal (ClaimJournal), not each into a transaction: for the process that
    /// holds the engine lock only. What a crashed engine left in the journal goes into the rows first, in one
    /// transaction.
    public func journalClaims() throws(StateError) {
        let left = ClaimJournal.replay(path: claimJournalPath)
        if !left.isEmpty {
            try writing { db in
                for claim in left { try Self.writeClaim(db, claim, replayed: true) }
            }
        }
        let journal = try ClaimJournal(path: claimJournalPath)
        claims.withLock { $0 = journal }
    }

    public var claimsAreJournaled: Bool { claims.withLock { $0 != nil } }

    /// A resumable upload's place on the server, written at once (not with the next batch): after a crash a
    /// restart asks the server for this upload's offset instead of making a second one.
    public func recordResumable(_ id: TransferID, _ resumable: ResumableUpload?) throws {
        let text = try resumable.map { try json($0) }
        try writing { db in
            try db.cachedStatement(sql: "UPDATE transfer SET resumable = ?, updatedAt = ? WHERE id = ?")
                .execute(arguments: [text, Date().timeIntervalSince1970, id.rawValue])
        }
    }

    public func remove(_ id: TransferID) throws {
        try remove([id])
    }

    public func remove(_ ids: [TransferID]) throws {
        try pool.write { db in
            let events = try db.cachedStatement(sql: "DELETE FROM event WHERE transferId = ?")
            let items = try db.cachedStatement(sql: "DELETE FROM transfer WHERE id = ?")
            for id in ids {
                try events.execute(arguments: [id.rawValue])
                try items.execute(arguments: [id.rawValue])
            }
        }
        known.withLock { known in
            for id in ids { known[id.rawValue] = nil }
        }
        claims.withLock { $0?.forget(ids) }
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

    static let addedMessage = "added"

    /// Every caller runs inside `pool.write`, so the one encoder is never used by two threads at once.
    private func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The URL a row's `spec` JSON holds since an add stopped writing the URL twice: the `url` column is the
    /// spec's URL (rows written before hold it in both).
    static let specURL = URL(string: "ferry:url-column")!

}
