import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a full disk is said with: how much more the file needs and how much the filesystem has.
package enum DiskSpace {
    /// Bytes an unprivileged writer may still use on the filesystem holding `path`; nil when unknown.
    package static func available(at path: String) -> Int64? {
        var info = statvfs()
        let directory = (path as NSString).deletingLastPathComponent
        guard statvfs(directory.isEmpty ? "." : directory, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// "cannot write X: disk full: 4.1 MiB more needed, 12.0 KiB free there; ..." (`needed` nil: unknown).
    package static func fullMessage(writing path: String, needed: Int64?) -> String {
        var text = "cannot write \(path): disk full"
        var parts: [String] = []
        if let needed, needed > 0 { parts.append("\(ByteFormat.bytes(needed)) more needed") }
        if let free = available(at: path) { parts.append("\(ByteFormat.bytes(free)) free there") }
        if !parts.isEmpty { text += ": " + parts.joined(separator: ", ") }
        return text + " (what was downloaded is kept: free some space, then retry)"
    }
}
