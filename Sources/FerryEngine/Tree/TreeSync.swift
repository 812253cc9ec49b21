import FerryModel
import FerryStorage
import Foundation

/// What a tree's walk becomes on disk (`ferry get -r URL -o DIR`): the files to download, each into the
/// directory its place in the tree names under DIR, and what is left as it is.
///
/// A re-run is a sync: a file already in DIR with the server's size and time (from the listing, or a HEAD when the
/// listing gives no size) is not requested again. One that differs is fetched again when it is ferry's own copy
/// of that URL (FileOrigin: marked when it was downloaded), and replaces it; any other file that differs, and
/// anything in DIR that is not a plain file or directory (a symlink is never followed, out of DIR or anywhere),
/// is left alone and said: ferry does not replace a file it did not write, unless the user says so
/// (`replacesAnyFile`, `get -r --replace`: any plain file that differs is replaced; a symlink still is not followed).
public struct TreeSync: Sendable {
    /// Where the tree goes (absolute, resolved).
    public let directory: String
    /// The directories under DIR already made or refused, by their place in the tree: each is looked at once,
    /// not once per file in it.
    private var made: [[String]: Result<String, Refusal>] = [:]
    /// A plain file here that differs from the server's is replaced even when ferry did not write it.
    public let replacesAnyFile: Bool

    public init(directory: String, replacesAnyFile: Bool = false) {
        self.directory = directory
        self.replacesAnyFile = replacesAnyFile
    }

    public enum Decision: Sendable, Equatable {
        /// Download it into `directory` (made under DIR) as `name`: the server's file as the walk saw it
        /// (`TransferSpec.mirror`). `replaces`: an older copy is there (ferry's own, or any with `replacesAnyFile`).
        case fetch(directory: String, name: String, mirror: TransferSpec.MirrorOf, replaces: Bool)
        /// Already here with the server's size and time.
        case present
        /// Not touched, and why.
        case leftAlone(String)
    }

    /// What to do with `file`. `facts` (a HEAD) is asked only for a file that is already here and whose listing
    /// gave no size.
    public mutating func decide(_ file: TreeFile, facts: (URL) async -> (size: Int64?, modified: Date?)) async -> Decision {
        let names = file.place.path
        guard let name = names.last else { return .leftAlone("no name") }
        let parent: String
        let place = Array(names.dropLast())
        switch make(place) {
        case let .success(path): parent = path
        case let .failure(refusal): return .leftAlone(refusal.reason)
        }
        let path = parent + "/" + name
        var info = stat()
        guard lstat(path, &info) == 0 else {
            guard errno == ENOENT else { return .leftAlone(String(cString: strerror(errno))) }
            return .fetch(directory: parent, name: name, mirror: .init(size: file.size, modified: file.modified, replacesAnyFile: replacesAnyFile),
                          replaces: false)
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return .leftAlone("here, and not a plain file") }
        var (size, modified, precision) = (file.size, file.modified, file.precision)
        if size == nil {
            (size, modified) = await facts(file.place.url)
            precision = 1
        }
        guard let size else { return .leftAlone("the server does not say its size, so it is not known to be the same") }
        let here = Int64(info.st_size)
        let hereTime = TimeInterval(info.st_mtim.tv_sec)
        let sameTime = modified.map { floor(hereTime / precision) == floor($0.timeIntervalSince1970.rounded(.down) / precision) } ?? true
        if here == size, sameTime { return .present }
        if replacesAnyFile || FileOrigin.isCopy(at: path, of: file.place.url) {
            return .fetch(directory: parent, name: name, mirror: .init(size: size, modified: modified, replacesAnyFile: replacesAnyFile),
                          replaces: true)
        }
        let differs = here != size ? "here with \(here) bytes, the server's has \(size)" : "here with another modification time than the server's"
        return .leftAlone("\(differs): ferry does not replace a file it did not write (--replace does)")
    }

    /// The directory at `path` below DIR, made where missing, looked at once per walk.
    mutating func make(_ place: [String]) -> Result<String, Refusal> {
        let directory = made[place] ?? makeDirectory(place)
        made[place] = directory
        return directory
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

