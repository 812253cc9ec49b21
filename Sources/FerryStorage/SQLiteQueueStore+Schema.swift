import FerryModel
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The queue database's schema: its migrations, one per release that changed it.
extension SQLiteQueueStore {
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
        migrator.registerMigration("v9: trees") { db in
            // A tree's batch (get -r, put -r) says where the tree is from; the UI shows it as one row.
            try db.execute(sql: "ALTER TABLE batch ADD COLUMN tree TEXT")
            // A tree's row sums its files' bytes (byteSums) from this index alone, not from 100,000 rows.
            try db.execute(sql: "CREATE INDEX transfer_batch_bytes ON transfer(batch, bytesDone, bytesExpected)")
        }
        migrator.registerMigration("v10: walks") { db in
            // A tree's walk (get -r): its job and where it is, and each directory found with its state; a listing's
            // files are queued in the transaction that marks it listed.
            try db.execute(sql: """
                CREATE TABLE walk (
                    batch INTEGER PRIMARY KEY,
                    job TEXT NOT NULL,
                    method TEXT,
                    held INTEGER NOT NULL DEFAULT 0,
                    found INTEGER NOT NULL DEFAULT 0,
                    present INTEGER NOT NULL DEFAULT 0,
                    leftAlone INTEGER NOT NULL DEFAULT 0,
                    replacing INTEGER NOT NULL DEFAULT 0,
                    leftAloneLines TEXT NOT NULL DEFAULT '[]',
                    trouble TEXT NOT NULL DEFAULT '[]'
                );
                CREATE TABLE walk_dir (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    batch INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    url TEXT NOT NULL,
                    path TEXT NOT NULL,
                    ancestors TEXT NOT NULL,
                    state TEXT NOT NULL
                );
                CREATE UNIQUE INDEX walk_dir_key ON walk_dir(batch, key);
                CREATE INDEX walk_dir_state ON walk_dir(batch, state, id);
                """)
        }
        migrator.registerMigration("v11: batch limits") { db in
            // A batch's own limit (a tree's: its files share it as they come and go).
            try db.execute(sql: "ALTER TABLE batch ADD COLUMN rateLimit INTEGER")
        }
        return migrator
    }

    /// Each row's id and spec, for a migration that fills new columns from them (a spec that cannot be read is
    /// skipped: its columns keep their defaults).
    static func eachSpec(_ db: Database, _ body: (Int64, TransferSpec) throws -> Void) throws {
        var decoder = RowDecoder()
        for row in try Row.fetchAll(db, sql: "SELECT id, spec, url FROM transfer") {
            guard let spec = try? decoder.spec(row) else { continue }
            try body(row["id"], spec)
        }
    }

    /// An upload's source as lists name it (a download's name is its `fileName`, once known).
    static func uploadName(_ spec: TransferSpec) -> String? {
        TransferSnapshot.knownName(spec: spec, fileName: nil)
    }
}
