import FerryModel
import Foundation
import GRDB
import GRDBSQLite

/// Trees' walks (WalkStore): the `walk` and `walk_dir` tables.
extension SQLiteQueueStore {
    public func startWalk(_ job: TreeJob, batch: Int64) throws {
        try writing { db in
            try db.execute(sql: "INSERT INTO walk (batch, job) VALUES (?, ?)", arguments: [batch, try json(job)])
            try insertDirectories(db, batch: batch, [WalkDirectory(url: job.root, path: [])])
        }
    }

    public func walks() throws -> [StoredWalk] {
        let decoder = JSONDecoder()
        return try pool.read { db in
            var counts: [Int64: [String: Int]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT batch, state, COUNT(*) FROM walk_dir GROUP BY batch, state") {
                counts[row[0], default: [:]][row[1]] = row[2]
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM walk ORDER BY batch").compactMap { row -> StoredWalk? in
                let batch: Int64 = row["batch"]
                // A job this version cannot read (a later one's) is left as it is.
                guard let job = try? decoder.decode(TreeJob.self, from: Data((row["job"] as String).utf8)) else { return nil }
                let states = counts[batch] ?? [:]
                // A loop's listing was read too (WalkListing.applied).
                var progress = WalkProgress(batch: batch, listed: (states[WalkDirectory.State.listed.rawValue] ?? 0) + (states[WalkDirectory.State.loop.rawValue] ?? 0),
                                            pending: states[WalkDirectory.State.pending.rawValue] ?? 0,
                                            failed: states[WalkDirectory.State.failed.rawValue] ?? 0,
                                            found: row["found"], present: row["present"], leftAlone: row["leftAlone"],
                                            replacing: row["replacing"], held: row["held"])
                progress.leftAloneLines = (try? decoder.decode([String].self, from: Data((row["leftAloneLines"] as String).utf8))) ?? []
                progress.trouble = (try? decoder.decode([String].self, from: Data((row["trouble"] as String).utf8))) ?? []
                return StoredWalk(job: job, method: row["method"], progress: progress)
            }
        }
    }

    public func walkDirectories(batch: Int64, state: WalkDirectory.State) throws -> [WalkDirectory] {
        let decoder = JSONDecoder()
        return try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT url, path, ancestors FROM walk_dir WHERE batch = ? AND state = ? ORDER BY id",
                             arguments: [batch, state.rawValue]).compactMap { row in
                guard let url = URL(string: row[0]),
                      let path = try? decoder.decode([String].self, from: Data((row[1] as String).utf8)),
                      let ancestors = try? decoder.decode([String].self, from: Data((row[2] as String).utf8)) else { return nil }
                return WalkDirectory(url: url, path: path, ancestors: ancestors, state: state)
            }
        }
    }

    public func recordListing(_ listing: WalkListing, reuse: Bool) throws -> [QueueAddition]? {
        // Its statements prepared once (cachedStatement), not at each listing's write: about 1 % of a 2,000-file
        // tree's samples went to preparing them (perf).
        try writing { db in
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT held FROM walk WHERE batch = ?"), arguments: [listing.batch]) == false else { return nil }
            let added = listing.specs.isEmpty ? [] : try insertItems(db, listing.specs, batch: listing.batch, reuse: reuse)
            try insertDirectories(db, batch: listing.batch, listing.children)
            try db.cachedStatement(sql: "UPDATE walk_dir SET state = ? WHERE batch = ? AND key = ?")
                .execute(arguments: [listing.state.rawValue, listing.batch, WalkDirectory.key(listing.directory)])
            // The lines within their caps: the walk's rule (WalkProgress.note) on what is kept.
            let decoder = JSONDecoder()
            var progress = WalkProgress(batch: listing.batch)
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT leftAloneLines, trouble FROM walk WHERE batch = ?"), arguments: [listing.batch]) {
                progress.leftAloneLines = (try? decoder.decode([String].self, from: Data((row[0] as String).utf8))) ?? []
                progress.trouble = (try? decoder.decode([String].self, from: Data((row[1] as String).utf8))) ?? []
            }
            progress.note(leftAlone: listing.leftAloneLines, trouble: listing.trouble)
            try db.cachedStatement(sql: """
                UPDATE walk SET found = found + ?, present = present + ?, leftAlone = leftAlone + ?, replacing = replacing + ?,
                    leftAloneLines = ?, trouble = ? WHERE batch = ?
                """).execute(arguments: [listing.found, listing.present, listing.leftAlone, listing.replacing,
                                        try json(progress.leftAloneLines), try json(progress.trouble), listing.batch])
            return added
        }
    }

    public func setWalkMethod(batch: Int64, _ method: String) throws {
        try writing { db in try db.execute(sql: "UPDATE walk SET method = ? WHERE batch = ?", arguments: [method, batch]) }
    }

    public func setWalkHeld(batch: Int64, _ held: Bool) throws {
        try writing { db in try db.execute(sql: "UPDATE walk SET held = ? WHERE batch = ?", arguments: [held, batch]) }
    }

    public func retryWalk(batch: Int64) throws -> Int {
        try writing { db in
            try db.execute(sql: "UPDATE walk_dir SET state = ? WHERE batch = ? AND state = ?",
                           arguments: [WalkDirectory.State.pending.rawValue, batch, WalkDirectory.State.failed.rawValue])
            let again = db.changesCount
            // Its lines of trouble were of the listings that failed: they are asked again.
            if again > 0 { try db.execute(sql: "UPDATE walk SET trouble = '[]' WHERE batch = ?", arguments: [batch]) }
            return again
        }
    }

    public func removeWalk(batch: Int64) throws {
        try writing { db in
            try db.execute(sql: "DELETE FROM walk_dir WHERE batch = ?", arguments: [batch])
            try db.execute(sql: "DELETE FROM walk WHERE batch = ?", arguments: [batch])
        }
    }

    /// Directories found (one already known is not added again).
    private func insertDirectories(_ db: Database, batch: Int64, _ directories: [WalkDirectory]) throws {
        let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO walk_dir (batch, key, url, path, ancestors, state) VALUES (?, ?, ?, ?, ?, ?)")
        for directory in directories {
            try insert.execute(arguments: [batch, directory.key, directory.url.absoluteString, try json(directory.path),
                                           try json(directory.ancestors), directory.state.rawValue])
        }
    }
}
