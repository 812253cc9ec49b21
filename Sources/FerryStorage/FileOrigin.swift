import CFileSystem
import FerryModel
import Foundation

/// Which files are ferry's copies of a server's: a tree's downloads (`get -r`) mark the file with the URL it
/// came from in the extended attribute `user.xdg.origin.url` (the freedesktop.org name, as `wget --xattr` and
/// browsers write it). A re-run replaces such a copy when the server's file changed, and leaves any other file
/// alone. A file system without user attributes marks nothing: its files are never replaced.
package enum FileOrigin {
    static let attribute = "user.xdg.origin.url"

    /// Marks the open file as a copy of `url` (its login left out) made at the server's time `modified` (as wget
    /// sets it); false when the file system keeps no mark.
    @discardableResult
    package static func mark(fd: Int32, url: URL, modified: Date?) -> Bool {
        if let modified {
            // Access time left as it is (UTIME_OMIT, a macro Swift does not import).
            let omit = (1 << 30) - 2
            var times = [timespec(tv_sec: 0, tv_nsec: omit), timespec(tv_sec: Int(modified.timeIntervalSince1970.rounded(.down)), tv_nsec: 0)]
            _ = futimens(fd, &times)
        }
        let value = Array(TerminalSafe.removingUserInfo(url.absoluteString).utf8)
        return value.withUnsafeBytes { fsetxattr(fd, attribute, $0.baseAddress, $0.count, 0) } == 0
    }

    /// The URL the file at `path` is marked as a copy of (a symlink is not followed); nil for none.
    package static func url(at path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 8192)
        let count = buffer.withUnsafeMutableBytes { lgetxattr(path, attribute, $0.baseAddress, $0.count) }
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Whether a download `replacing` may take the place of the file at `path`: a plain file (a symlink is not
    /// followed), ferry's copy of its URL unless any file may go.
    package static func mayReplace(at path: String, _ replacing: TransferSpec.Replacing) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return replacing.anyFile || isCopy(at: path, of: replacing.url)
    }

    /// Whether the file at `path` is ferry's copy of `url`.
    package static func isCopy(at path: String, of url: URL) -> Bool {
        Self.url(at: path) == TerminalSafe.removingUserInfo(url.absoluteString)
    }
}
