import FerryModel
import Foundation
import GRDB
import GRDBSQLite

// The queue's rows to and from SQLite (SQLiteQueueStore): writes bound through SQLite's C API, reads decoded with
// the spec text of a run of rows decoded once.

/// One execution of an INSERT or UPDATE with its values bound through SQLite's C API: GRDB's StatementArguments
/// box each value in an existential and check it against the statement per row, a fifth of queueing a long list
/// and a third of a save's own work.
enum RowWrite {
    enum Value {
        case integer(Int64?)
        case real(Double)
        case text(String?)
    }

    /// SQLite copies the bytes before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    static func run(_ statement: Statement, in db: Database, _ values: [Value]) throws {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case let .integer(number?): code = sqlite3_bind_int64(raw, index, number)
            case let .real(number): code = sqlite3_bind_double(raw, index, number)
            case let .text(text?):
                let length = Int32(text.utf8.count)
                code = text.withCString { sqlite3_bind_text(raw, index, $0, length, transient) }
            case .integer(nil), .text(nil): code = sqlite3_bind_null(raw, index)
            }
            guard code == SQLITE_OK else { throw DatabaseError.of(code, db) }
        }
        let code = sqlite3_step(raw)
        sqlite3_reset(raw)
        guard code == SQLITE_DONE else { throw DatabaseError.of(code, db) }
    }

}

/// An item's attempts as the `attempts` column holds them: JSON that JSONDecoder reads as `[Attempt]`, written by
/// hand. JSONEncoder took a third of a save's work (each start and end of an attempt is written), 11 µs an item.
enum AttemptsJSON {
    static func encode(_ attempts: [Attempt]) -> String {
        var out = "["
        for (index, attempt) in attempts.enumerated() {
            if index > 0 { out += "," }
            out += "{\"number\":\(attempt.number),\"startedAt\":" + number(attempt.startedAt)
            if let ended = attempt.endedAt { out += ",\"endedAt\":" + number(ended) }
            out += ",\"fromOffset\":\(attempt.fromOffset)"
            if let value = attempt.restartedFrom { out += ",\"restartedFrom\":\(value)" }
            if let value = attempt.serverHad { out += ",\"serverHad\":\(value)" }
            if let value = attempt.status { out += ",\"status\":\(value)" }
            if let value = attempt.error { out += ",\"error\":" + JSONText.string(value) }
            if let value = attempt.hostKey { out += ",\"hostKey\":" + JSONText.string(value) }
            out += "}"
        }
        return out + "]"
    }

    /// A date as JSONEncoder's default writes it (seconds since 2001) in the shortest form that reads back the
    /// same; a value JSON has no number for (never a clock's) as 0.
    private static func number(_ date: Date) -> String {
        let value = date.timeIntervalSinceReferenceDate
        return value.isFinite ? value.description : "0"
    }
}

extension DatabaseError {
    /// A result code from a call to SQLite's C API on `db`'s connection, with the connection's message.
    static func of(_ code: Int32, _ db: Database) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) })
    }
}

/// Reads rows into StoredTransfers. The rows of one command share their spec's JSON (the URL is its own column):
/// one decoder reading many rows decodes it once for a run of them.
struct RowDecoder {
    private var last: (text: String, spec: TransferSpec)?

    static func decode(_ row: Row) throws -> StoredTransfer {
        var decoder = RowDecoder()
        return try decoder.decode(row)
    }

    /// A row's spec: its JSON (`spec`) with the `url` column's URL.
    mutating func spec(_ row: Row) throws -> TransferSpec {
        let text: String = row["spec"]
        var spec: TransferSpec
        if let last, last.text == text {
            spec = last.spec
        } else {
            spec = try SpecJSON.decode(text)
            last = (text, spec)
        }
        if let url = URL(string: row["url"]) { spec.url = url }
        return spec
    }

    mutating func decode(_ row: Row) throws -> StoredTransfer {
        let spec = try spec(row)
        var item = StoredTransfer(id: TransferID(row["id"]), position: row["position"], spec: spec,
                                  state: TransferState(rawValue: row["state"]) ?? .queued)
        item.fileName = row["fileName"]
        item.savedPath = row["savedPath"]
        item.validators = Validators(etag: row["etag"], lastModified: row["lastModified"], totalLength: row["totalLength"])
        item.bytesDone = row["bytesDone"]
        item.bytesExpected = row["bytesExpected"]
        item.retries = row["retries"]
        let attempts: String = row["attempts"]
        item.attempts = attempts == "[]" ? [] : (try? JSONDecoder().decode([Attempt].self, from: Data(attempts.utf8))) ?? []
        item.lastError = row["lastError"]
        item.failure = (row["errorKind"] as String?).flatMap(FailureCause.init(token:))
        item.rateLimit = row["rateLimit"]
        item.batch = row["batch"]
        if let response: String = row["response"] {
            item.response = try? JSONDecoder().decode(ServerResponse.self, from: Data(response.utf8))
        }
        if let resumable: String = row["resumable"] {
            // Unreadable, the upload starts over (a location is never guessed).
            item.resumable = try? JSONDecoder().decode(ResumableUpload.self, from: Data(resumable.utf8))
        }
        if let segments: String = row["segments"] {
            // Never guessed: without its ranges, what the preallocated `.part` file holds is unknown (holes of
            // zeros), so the item must start over, not resume as one stream and publish the holes.
            do {
                item.segments = try JSONDecoder().decode([SegmentState].self, from: Data(segments.utf8))
            } catch {
                item.unreadable = "its saved ranges"
            }
        }
        return item
    }
}
