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
    struct Known {
        var state: String
        var events: Int
        /// The attempts last written, with their JSON: most saves leave them as they were, and encoding
        /// is the dearest part of a save.
        var attempts: (value: [Attempt], json: String)?
    }
    let known = Mutex<[Int64: Known]>([:])
    let encoder = JSONEncoder()

    let path: String
    /// The engine's claims (journalClaims); nil: each claim is a transaction of its own.
    let claims = Mutex<ClaimJournal?>(nil)

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
    func writing<T>(_ body: (Database) throws -> T) throws(StateError) -> T {
        do {
            return try pool.write(body)
        } catch {
            throw StateError(Self.words(error, path: path))
        }
    }

    static let addedMessage = "added"

    /// Every caller runs inside `pool.write`, so the one encoder is never used by two threads at once.
    func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// A spec as a row keeps it (`transfer.spec`): a download's written by SpecJSON, any other by JSONEncoder.
    func specJSON(_ spec: TransferSpec) throws -> String {
        try SpecJSON.encodeDownload(spec) ?? json(spec)
    }

    /// The URL a row's `spec` JSON holds since an add stopped writing the URL twice: the `url` column is the
    /// spec's URL (rows written before hold it in both).
    static let specURL = URL(string: "ferry:url-column")!

}
