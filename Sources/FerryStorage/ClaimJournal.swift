import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a running engine's download claims go first: one line appended to a file beside the queue database
/// (one write(2), no transaction) before the `.part` file is created, so that after a `kill -9` a restart finds
/// the `.part` (or the finished file) under its name. The rows follow with the engine's next batch of records;
/// a claim leaves the journal once a committed batch holds it (`confirm`), and the journal is emptied whenever
/// nothing in it is waiting. An engine that starts replays whatever a crashed one left (`replay`) into the
/// rows before it reads them.
///
/// Why not a transaction per claim, as before: that commit was a fifth of the CPU of 1,000 small downloads and
/// ran on the delegate queue, waiting behind any batch being written (docs/performance.md). A line written
/// with write(2) survives the death of the process as a committed SQLite transaction in WAL mode with
/// `synchronous = NORMAL` does; neither survives a power cut before the kernel writes it out.
///
/// Used under SQLiteQueueStore's lock only (hence unchecked).
final class ClaimJournal: @unchecked Sendable {
    struct Entry: Codable, Equatable {
        var id: Int64
        var fileName: String
        var etag: String?
        var lastModified: String?
        var totalLength: Int64?

        init(_ id: TransferID, fileName: String, validators: Validators) {
            self.id = id.rawValue
            self.fileName = fileName
            etag = validators.etag
            lastModified = validators.lastModified
            totalLength = validators.totalLength
        }

        /// The entry as one line of JSON (nil fields left out), written by hand: JSONEncoder was 3 % of the CPU of
        /// 1,000 small downloads, one claim each. `replay` reads it back with JSONDecoder.
        var line: [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(64 + fileName.utf8.count + (etag?.utf8.count ?? 0) + (lastModified?.utf8.count ?? 0))
            out += #"{"id":"#.utf8
            out += String(id).utf8
            out += #","fileName":"#.utf8
            Self.appendString(fileName, to: &out)
            if let etag {
                out += #","etag":"#.utf8
                Self.appendString(etag, to: &out)
            }
            if let lastModified {
                out += #","lastModified":"#.utf8
                Self.appendString(lastModified, to: &out)
            }
            if let totalLength {
                out += #","totalLength":"#.utf8
                out += String(totalLength).utf8
            }
            out += "}\n".utf8
            return out
        }

        /// A JSON string: quoted, with the quote, the backslash and the control characters escaped, the rest as
        /// its UTF-8.
        private static func appendString(_ string: String, to out: inout [UInt8]) {
            out.append(UInt8(ascii: "\""))
            for byte in string.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    out.append(UInt8(ascii: "\\"))
                    out.append(byte)
                case 0..<0x20:
                    out += #"\u00"#.utf8
                    let low = byte & 0xf
                    out.append(UInt8(ascii: "0") + (byte >> 4))
                    out.append(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + (low - 10))
                default:
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }

    let path: String
    private var fd: Int32
    /// Claims in the journal that no committed batch holds yet, the newest per item.
    private var waiting: [Int64: Entry] = [:]
    /// Lines in the file (the confirmed ones too, until it is emptied or rewritten).
    private var lines = 0
    /// Bytes in the file: a write that fails is cut back to it (a torn line would swallow the next claim's).
    private var size: off_t = 0

    /// A file with more lines than this, and more than twice the claims still waiting, is rewritten with the
    /// waiting ones only (so rewrites cost as much as the appends they follow, however many wait).
    static let rewriteAfter = 4_096

    /// Opens (creating) the journal at `path` for appending; what it held must have been replayed first.
    init(path: String) throws(StateError) {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StateError("cannot open \(path): \(String(cString: strerror(errno)))") }
        if ftruncate(fd, 0) != 0 { throw StateError("cannot empty \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close(fd) }

    /// The claims a journal at `path` holds, in the order they were made; lines that cannot be read (the end of
    /// a write cut short) are skipped. None when there is no journal.
    static func replay(path: String) -> [Entry] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let decoder = JSONDecoder()
        return data.split(separator: UInt8(ascii: "\n")).compactMap { try? decoder.decode(Entry.self, from: Data($0)) }
    }

    /// Appends a claim; durable against the death of the process once this returns.
    func append(_ entry: Entry) throws(StateError) {
        try write(entry.line)
        waiting[entry.id] = entry
        lines += 1
    }

    /// A batch of rows committed: a row with a name holds its item's claim or what came of it (a name, once an
    /// item has one, is never taken away: a later row has the same name or the one the file was published
    /// under, and validators as new or newer), so that claim waits no more, whatever its validators became (a
    /// body of no stated length gets its size at the end). A record taken before the claim has no name and
    /// confirms nothing. An empty journal is emptied on disk too; a long one with claims still waiting is
    /// rewritten with those.
    func confirm(_ committed: [StoredTransfer]) {
        guard !waiting.isEmpty else { return }
        for item in committed where item.fileName != nil { waiting[item.id.rawValue] = nil }
        compact()
    }

    /// Items removed from the queue: their claims no longer matter.
    func forget(_ ids: [TransferID]) {
        guard !waiting.isEmpty else { return }
        for id in ids { waiting[id.rawValue] = nil }
        compact()
    }

    private func compact() {
        if waiting.isEmpty {
            if lines > 0, ftruncate(fd, 0) == 0 {
                lines = 0
                size = 0
            }
        } else if lines > Self.rewriteAfter, lines > 2 * waiting.count {
            rewrite()
        }
    }

    /// The waiting claims alone, written to a new file that then takes the journal's place (rename is atomic:
    /// a crash meanwhile leaves the old journal or the new one, each with every waiting claim).
    private func rewrite() {
        let fresh = path + ".new"
        let out = open(fresh, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else { return }
        var data: [UInt8] = []
        for entry in waiting.values.sorted(by: { $0.id < $1.id }) { data += entry.line }
        let written = data.withUnsafeBytes { Glibc.write(out, $0.baseAddress, $0.count) }
        guard written == data.count, rename(fresh, path) == 0 else {
            close(out)
            unlink(fresh)
            return
        }
        close(fd)
        fd = out
        _ = lseek(fd, 0, SEEK_END)
        // O_APPEND again for the appends that follow.
        _ = fcntl(fd, F_SETFL, O_APPEND)
        lines = waiting.count
        size = off_t(data.count)
    }

    private func write(_ data: [UInt8]) throws(StateError) {
        let result = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard result == data.count else {
            let reason = result < 0 ? String(cString: strerror(errno)) : "a short write"
            _ = ftruncate(fd, size)
            throw StateError("cannot write \(path): \(reason)")
        }
        size += off_t(data.count)
    }
}
