import CFileSystem
import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Hands out final file names so that no existing file is overwritten and no two transfers,
/// in this process or another, write the same name: the `.part` file is created with O_EXCL,
/// and the final name is taken with renameat2(2)'s RENAME_NOREPLACE (or, where a file system lacks it, link(2)
/// then unlink(2)), which fails rather than replace a file.
public final class NameClaims: Sendable {
    private let claimed = Mutex<Set<String>>([])
    /// Each download directory resolved once (FileNaming.resolvedDirectory: a realpath and a stat, a dozen
    /// system calls per claim before). A directory removed or replaced meanwhile shows when its `.part` file
    /// cannot be created; the path written is the directory as given, as before.
    private let resolved = Mutex<[String: String]>([:])
    package static let maxAttempts = 10_000

    public init() {}

    /// Claims `directory/name` or the first free `name (n).ext`, creating its `.part` file.
    /// Returns the chosen base name and the open descriptor of the new `.part` file.
    /// `beforeCreating` learns each candidate just before its `.part` file is created (so the queue can
    /// record the name first: a crash can then never leave a `.part` file the queue does not know).
    /// With `replacing`, the name of a file it may replace (FileOrigin.mayReplace: ferry's own copy of its URL, or
    /// any plain file when the user said so) is free for it: the file is replaced when the new one is published.
    package func claim(directory: String, name: String, replacing: TransferSpec.Replacing? = nil,
               beforeCreating: (String) -> Void = { _ in }) throws(TransferFailure) -> (name: String, fd: Int32) {
        let dir = resolved.withLock { $0[directory] } ?? FileNaming.resolvedDirectory(directory)
        if let dir { resolved.withLock { $0[directory] = dir } }
        for n in 0..<Self.maxAttempts {
            let candidate = n == 0 ? name : FileNaming.numbered(name, n)
            let finalPath = directory + "/" + candidate
            let taken = claimed.withLock { set in
                if set.contains(finalPath) { return true }
                set.insert(finalPath)
                return false
            }
            if taken { continue }
            // Asked once the name is held here: another transfer of this process releases a name only after its
            // file has it, so a name asked about now is never one being published meanwhile.
            var entry = dir.map { FileNaming.entry(resolvedDirectory: $0, name: candidate) } ?? .refused
            if entry == .taken, n == 0, let replacing, FileOrigin.mayReplace(at: finalPath, replacing) { entry = .free }
            guard entry == .free else {
                release(directory: directory, name: candidate)
                if entry == .taken { continue }
                throw .local(.other, "refusing file name \(TerminalSafe.sanitize(candidate)): it leaves \(directory)")
            }
            beforeCreating(candidate)
            let fd = open(finalPath + PartialFile.suffix, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 { return (candidate, fd) }
            let err = errno
            release(directory: directory, name: candidate)
            if err == EEXIST { continue }
            throw .local("cannot create \(finalPath).part", errno: err)
        }
        throw .local(.noFreeName, "no free name for \(name) in \(directory)")
    }

    /// Takes `name` for a transfer renamed (QueueCommand.rename), as it is: true when no transfer holds it and
    /// no file has it (nothing is created); false otherwise (no other name is tried).
    package func take(directory: String, name: String) -> Bool {
        let finalPath = directory + "/" + name
        guard claimed.withLock({ $0.insert(finalPath).inserted }) else { return false }
        let dir = resolved.withLock { $0[directory] } ?? FileNaming.resolvedDirectory(directory)
        guard let dir, FileNaming.entry(resolvedDirectory: dir, name: name) == .free else {
            release(directory: directory, name: name)
            return false
        }
        return true
    }

    /// Marks a name as in use by a transfer resumed from an existing `.part` file.
    package func adopt(directory: String, name: String) {
        _ = claimed.withLock { $0.insert(directory + "/" + name) }
    }

    package func release(directory: String, name: String) {
        _ = claimed.withLock { $0.remove(directory + "/" + name) }
    }

    /// Moves a finished `.part` file to its final name without ever replacing a file; when the name was
    /// taken meanwhile (by another program), the next free numbered name is used. Returns the base name used.
    /// With `replacing`, a file already under the name that it may replace (FileOrigin.mayReplace) is replaced
    /// (renamed over, at once); any other file keeps its name and this one takes the next free one.
    /// The caller makes the directory's new entry durable (FileSync.syncDirectories, once for a group's files).
    package func publish(directory: String, name: String, replacing: TransferSpec.Replacing? = nil) throws(TransferFailure) -> String {
        let partPath = PartialFile.path(directory: directory, name: name)
        if let replacing, FileOrigin.mayReplace(at: directory + "/" + name, replacing), rename(partPath, directory + "/" + name) == 0 {
            return name
        }
        for n in 0..<Self.maxAttempts {
            let candidate = n == 0 ? name : FileNaming.numbered(name, n)
            if n > 0 {
                let taken = claimed.withLock { set in
                    if set.contains(directory + "/" + candidate) { return true }
                    set.insert(directory + "/" + candidate)
                    return false
                }
                if taken { continue }
            }
            let finalPath = directory + "/" + candidate
            let err = Self.move(partPath, to: finalPath)
            if err == 0 {
                if n > 0 { release(directory: directory, name: name) }
                return candidate
            }
            if err == EEXIST {
                if n > 0 { release(directory: directory, name: candidate) }
                continue
            }
            throw .local("cannot move \(partPath) to \(finalPath)", errno: err)
        }
        throw .local(.noFreeName, "no free name for \(name) in \(directory)")
    }

    /// Whether renameat2's RENAME_NOREPLACE was refused by a file system here (EINVAL) or by the kernel (ENOSYS):
    /// from then on each publish takes the link path, which every file system with hard links has.
    private static let noReplaceRefused = Atomic<Bool>(false)

    /// Moves `from` to `to` unless `to` exists: 0, or the error number (EEXIST when a file has the name).
    /// One rename where the file system can (ext4, XFS, Btrfs, tmpfs, F2FS); else link then unlink; on a file
    /// system without hard links, a check then a rename (a tiny window, but never a known overwrite).
    package static func move(_ from: String, to: String, noReplace: Bool = true) -> Int32 {
        if noReplace, !noReplaceRefused.load(ordering: .relaxed) {
            if renameat2(AT_FDCWD, from, AT_FDCWD, to, renameNoReplace) == 0 { return 0 }
            let err = errno
            guard err == EINVAL || err == ENOSYS else { return err }
            noReplaceRefused.store(true, ordering: .relaxed)
        }
        if link(from, to) == 0 {
            unlink(from)
            return 0
        }
        let err = errno
        guard err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == EMLINK else { return err }
        if exists(to) { return EEXIST }
        return rename(from, to) == 0 ? 0 : errno
    }

    /// renameat2(2)'s RENAME_NOREPLACE (linux/fs.h).
    private static let renameNoReplace: UInt32 = 1

    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }
}
