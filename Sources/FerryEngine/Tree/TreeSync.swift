import FerryModel
import Foundation

/// What a tree's walk becomes on disk (`ferry get -r URL -o DIR`): the files to download, each into the
/// directory its place in the tree names under DIR, and what is left as it is.
///
/// A re-run is a sync: a file already in DIR with the server's size (from the listing, or a HEAD when the
/// listing gives none) is not requested again. A file in DIR that differs, and anything in DIR that is not a
/// plain file or directory (a symlink is never followed, out of DIR or anywhere), is left alone and said: ferry
/// does not replace a file it finds.
public struct TreeSync: Sendable {
    /// Where the tree goes (absolute, resolved).
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    public enum Decision: Sendable, Equatable {
        /// Download it into `directory` (made under DIR) as `name`.
        case fetch(directory: String, name: String)
        /// Already here with the server's size.
        case present
        /// Not touched, and why.
        case leftAlone(String)
    }

    /// What to do with `file`. `remoteSize` is asked (a HEAD) only for a file that is already here and whose
    /// listing gave no size.
    public func decide(_ file: TreeFile, remoteSize: (URL) async -> Int64?) async -> Decision {
        let names = file.place.path
        guard let name = names.last else { return .leftAlone("no name") }
        let parent: String
        switch makeDirectory(Array(names.dropLast())) {
        case let .success(path): parent = path
        case let .failure(refusal): return .leftAlone(refusal.reason)
        }
        let path = parent + "/" + name
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return errno == ENOENT ? .fetch(directory: parent, name: name) : .leftAlone(String(cString: strerror(errno)))
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return .leftAlone("here, and not a plain file") }
        let here = Int64(info.st_size)
        guard let there = await file.size.asyncOr({ await remoteSize(file.place.url) }) else {
            return .leftAlone("the server does not say its size, so it is not known to be the same")
        }
        return here == there ? .present
            : .leftAlone("here with \(here) bytes, the server's has \(there): ferry does not replace a file it finds")
    }

    /// The directory at `path` below DIR, made where missing (each level a plain directory: a symlink or a file
    /// on the way is not followed nor replaced).
    func makeDirectory(_ path: [String]) -> Result<String, Refusal> {
        var current = directory
        for component in path {
            current += "/" + component
            var info = stat()
            if lstat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    return .failure(Refusal(reason: "\(TerminalSafe.sanitize(current)) is not a directory (a symlink is not followed)"))
                }
                continue
            }
            guard errno == ENOENT else { return .failure(Refusal(reason: "\(TerminalSafe.sanitize(current)): \(String(cString: strerror(errno)))")) }
            if mkdir(current, 0o755) != 0, errno != EEXIST {
                return .failure(Refusal(reason: "cannot make \(TerminalSafe.sanitize(current)): \(String(cString: strerror(errno)))"))
            }
        }
        return .success(current)
    }
}

struct Refusal: Error {
    var reason: String
}

private extension Optional where Wrapped == Int64 {
    func asyncOr(_ fallback: () async -> Int64?) async -> Int64? {
        if let self { return self }
        return await fallback()
    }
}
