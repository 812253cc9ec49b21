import FerryModel
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Writing the queue: adds (with reuse and leftovers), saves, ranks, checkpoints, claims, resumable uploads,
/// removals, batches.
extension SQLiteQueueStore {
    public func add(_ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition] {
        try writing { db in try insertItems(db, specs, batch: batch, reuse: reuse) }
    }

    /// `add` inside a write (a walk's listing adds its files in its own transaction).
    func insertItems(_ db: Database, _ specs: [TransferSpec], batch: Int64?, reuse: Bool) throws -> [QueueAddition] {
        var position = try Int.fetchOne(db.cachedStatement(sql: "SELECT COALESCE(MAX(position), -1) + 1 FROM transfer")) ?? 0
        let now = Date().timeIntervalSince1970
        let insert = try db.cachedStatement(sql: """
            INSERT INTO transfer (position, direction, url, spec, state, rateLimit, batch, identity, host, name, bytesExpected, createdAt, updatedAt)
            VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var added: [QueueAddition] = []
        added.reserveCapacity(specs.count)
        // The specs of one command differ in their URLs at most: their JSON (without the URL) is made once.
        var specText: (spec: TransferSpec, text: String)?
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
                        .execute(arguments: [try specJSON(stored), limit, found.id.rawValue])
                    found.spec = spec
                    found.rateLimit = limit
                }
                added.append(QueueAddition(item: found, existing: true, previousSpec: previous))
                continue
            }
            var stored = spec
            stored.url = Self.specURL
            if specText?.spec != stored { specText = (stored, try specJSON(stored)) }
            try RowWrite.run(insert, in: db, [.integer(Int64(position)), .text(spec.direction.rawValue), .text(spec.url.absoluteString),
                                               .text(specText?.text), .integer(spec.rateLimit), .integer(batch), .text(identity),
                                               .text(spec.host), .text(Self.uploadName(spec)), .integer(spec.mirror?.size), .real(now), .real(now)])
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
        let text = try specJSON(stored)
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
    static func leftovers(_ db: Database, identities: [String]) throws -> [String: Leftover] {
        guard try Int.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM leftover LIMIT 1")) != nil else { return [:] }
        var found: [String: Leftover] = [:]
        try whereIn(db, "SELECT identity, value FROM leftover", column: "identity", identities) { row in
            if let text: String = row[1], let leftover = try? JSONDecoder().decode(Leftover.self, from: Data(text.utf8)) { found[row[0]] = leftover }
        }
        return found
    }

    /// Those of `identities` that items of the queue have.
    static func stored(_ db: Database, identities: [String]) throws -> Set<String> {
        var found: Set<String> = []
        try whereIn(db, "SELECT identity FROM transfer", column: "identity", identities) { found.insert($0[0]) }
        return found
    }

    /// The item an add of `identity` reuses (StoredTransfer.reusable), if any.
    static func reusable(_ db: Database, identity: String) throws -> StoredTransfer? {
        let same = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM transfer WHERE identity = ? ORDER BY id DESC"),
                                    arguments: [identity]).map { row in try RowDecoder.decode(row) }
        return StoredTransfer.reusable(among: same)
    }

    /// The highest id given so far (0 for an empty queue).
    public func lastID() throws -> Int64 {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(id), 0) FROM transfer") ?? 0 }
    }

    public func makeBatch(command: String, tree: String?) throws -> Batch {
        try writing { db in
            let now = Date()
            try db.execute(sql: "INSERT INTO batch (createdAt, command, tree) VALUES (?, ?, ?)", arguments: [now.timeIntervalSince1970, command, tree])
            return Batch(id: db.lastInsertedRowID, createdAt: now, command: command, tree: tree)
        }
    }

    @discardableResult
    public func saveBatchLimit(_ batch: Int64, _ rate: Int64?) throws -> Bool {
        try writing { db in
            try db.execute(sql: "UPDATE batch SET rateLimit = ? WHERE id = ?", arguments: [rate, batch])
            return db.changesCount > 0
        }
    }

    public func byteSums(batch: Int64, only ids: [TransferID]?) throws -> ByteSums {
        let sums = "SELECT COALESCE(SUM(bytesDone), 0), COALESCE(SUM(bytesExpected), 0), COUNT(*) - COUNT(bytesExpected) FROM transfer"
        return try pool.read { db in
            let row: Row?
            if let ids {
                guard !ids.isEmpty else { return ByteSums() }
                // Found by id (the ids are integers, written into the statement: the loaded items, a few).
                row = try Row.fetchOne(db, sql: "\(sums) WHERE batch = ? AND id IN (\(ids.map { String($0.rawValue) }.joined(separator: ",")))",
                                       arguments: [batch])
            } else {
                // Read from the index transfer_batch_bytes alone: 100,000 items in 20 ms.
                row = try Row.fetchOne(db, sql: "\(sums) INDEXED BY transfer_batch_bytes WHERE batch = ?", arguments: [batch])
            }
            return ByteSums(done: row?[0] ?? 0, expected: row?[1] ?? 0, unknown: row?[2] ?? 0)
        }
    }

    public func batches() throws -> [Batch] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM batch ORDER BY id").map { row in
                Batch(id: row["id"], createdAt: Date(timeIntervalSince1970: row["createdAt"]), command: row["command"], tree: row["tree"],
                      rateLimit: row["rateLimit"])
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
                let attempts = before.attempts.flatMap { $0.value == item.attempts ? $0.json : nil } ?? AttemptsJSON.encode(item.attempts)
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
    static func readKnown(_ db: Database, _ id: Int64) throws -> Known {
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
    static func writeClaim(_ db: Database, _ claim: ClaimJournal.Entry, replayed: Bool) throws {
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
}
