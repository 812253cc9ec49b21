import CFileSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Makes files durable before they are published, several at once when several are ready.
///
/// `fsync` of each file costs a journal commit and a device flush each: a tree of 2,000 small files spent 60 %
/// of its time there on a journaled ext4 (docs/trees.md, session 37). Files of one file system that are ready
/// together are made durable by one `syncfs(2)`: one commit, one flush, every inode table block written once.
/// That is trusted only where it covers what `fsync` covers and says when it did not:
/// - local file systems whose `syncfs` writes and commits everything (ext2/3/4, XFS, Btrfs, F2FS; tmpfs has
///   nothing to write); on any other (NFS, FUSE, ...) each file gets its own `fsync`, which reaches the server;
/// - Linux 5.8 or later, where `syncfs` reports a write error that happened since the descriptor was opened
///   (before, it said nothing, so each file gets its own `fsync` there too).
/// When `syncfs` reports an error, which may be any file's of that file system, each file of the group is
/// asked with its own `fsync`, which reports only that file's.
package enum FileSync {
    /// The error number of each file that could not be made durable, by its index in `fds`; empty when every
    /// one was.
    package static func syncTogether(_ fds: [Int32]) -> [Int: Int32] {
        var failed: [Int: Int32] = [:]
        func syncEach(_ indexes: some Sequence<Int>) {
            for index in indexes where fsync(fds[index]) != 0 { failed[index] = errno }
        }
        guard fds.count > 1, groupSyncHolds else {
            syncEach(fds.indices)
            return failed
        }
        var byDevice: [UInt64: [Int]] = [:]
        var order: [UInt64] = []
        // A file system's kind asked once per device, not once per file.
        var trustedDevices: [UInt64: Bool] = [:]
        for (index, fd) in fds.enumerated() {
            guard let device = device(fd) else {
                syncEach(CollectionOfOne(index))
                continue
            }
            if trustedDevices[device] == nil { trustedDevices[device] = trusted(fd) }
            guard trustedDevices[device]! else {
                syncEach(CollectionOfOne(index))
                continue
            }
            if byDevice[device] == nil { order.append(device) }
            byDevice[device, default: []].append(index)
        }
        for device in order {
            let indexes = byDevice[device]!
            if indexes.count > 1, syncfs(fds[indexes[0]]) == 0 { continue }
            syncEach(indexes)
        }
        return failed
    }

    /// Makes the entries of `directories` durable (a file linked into each): one `syncfs` when they are several on
    /// one trusted file system, else an `fsync` of each. Best effort, as a directory's sync always was here: the
    /// file itself is durable by then, and a name that did not survive a power cut is fetched again.
    package static func syncDirectories(_ directories: [String]) {
        var fds: [Int32] = []
        for directory in directories {
            let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if fd >= 0 { fds.append(fd) }
        }
        _ = syncTogether(fds)
        for fd in fds { _ = close(fd) }
    }

    /// Whether this kernel's `syncfs` reports write errors, asked once.
    package static let groupSyncHolds: Bool = {
        var names = utsname()
        guard uname(&names) == 0 else { return false }
        return reportsSyncErrors(kernelRelease: withUnsafeBytes(of: &names.release) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        })
    }()

    /// Whether a kernel of this release (uname -r: "6.8.0-45-generic") reports write errors from `syncfs`:
    /// Linux 5.8 and later.
    package static func reportsSyncErrors(kernelRelease: String) -> Bool {
        let parts = kernelRelease.split(separator: "-").first.map { $0.split(separator: ".").prefix(2).compactMap { Int($0) } } ?? []
        guard parts.count == 2 else { return false }
        return parts[0] > 5 || (parts[0] == 5 && parts[1] >= 8)
    }

    private static func device(_ fd: Int32) -> UInt64? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt64(st.st_dev) : nil
    }

    /// File systems whose `syncfs` writes and commits what each file's `fsync` would (statfs(2)'s magic numbers).
    private static let trustedKinds: Set<Int> = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0xF2F5_2010, // F2FS
        0x0102_1994, // tmpfs
    ]

    private static func trusted(_ fd: Int32) -> Bool {
        var info = statfs()
        return fstatfs(fd, &info) == 0 && trustedKinds.contains(Int(info.f_type))
    }
}
