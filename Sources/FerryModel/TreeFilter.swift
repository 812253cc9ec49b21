import Foundation

/// Which files of a tree are taken (`--include GLOB`, `--exclude GLOB`, on `get -r` and `put -r` alike, as rclone's
/// and lftp's filters are): a glob without "/" matches the file's name in any directory (`*.iso`), one with "/"
/// its path relative to the tree's start (`docs/*`, where `*` does not cross a "/"). A file is taken when it
/// matches an include (or none is given) and no exclude.
public struct TreeFilter: Sendable, Equatable, Codable {
    public var include: [String]
    public var exclude: [String]

    public init(include: [String] = [], exclude: [String] = []) {
        self.include = include
        self.exclude = exclude
    }

    public var isEmpty: Bool { include.isEmpty && exclude.isEmpty }

    /// A tree's every directory is made, empty ones too (as cp -r, scp -r and lftp's mirror make them), unless an
    /// include picks files: then only the directories that hold a file taken (no skeleton of empty ones).
    public var makesEveryDirectory: Bool { include.isEmpty }

    /// Whether the file at `relative` (its path in the tree, "/" between directories) is taken.
    public func wants(_ relative: String) -> Bool {
        func matches(_ pattern: String) -> Bool {
            if pattern.contains("/") { return fnmatch(pattern, relative, FNM_PATHNAME) == 0 }
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            return fnmatch(pattern, name, 0) == 0
        }
        if !include.isEmpty, !include.contains(where: matches) { return false }
        return !exclude.contains(where: matches)
    }
}
