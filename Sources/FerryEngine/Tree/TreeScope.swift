import FerryModel
import Foundation

/// What a tree's walk may follow: links under the start URL's path, on its scheme, host and port, with no
/// query (the sort links of an index: `?C=N;O=D`) and no fragment; each path component decoded and reduced to a
/// safe local name as a single file's name is (FileNaming.safeBaseName), so that the tree's layout on disk is
/// its layout under the start URL and never leaves the directory it is saved into.
public struct TreeScope: Sendable {
    /// The start URL, its path ending in "/".
    public let root: URL
    private let rootSegments: [String]
    /// What every link is compared with, read from the root once (each listing compares all its links).
    private let rootScheme: String?
    private let rootHost: String?
    private let rootPort: Int

    /// A link inside the tree: its path below the root as safe local names.
    public struct Place: Sendable, Equatable {
        /// Below the root, one safe name per directory, the last the entry's own (empty for the root itself).
        public var path: [String]
        public var isDirectory: Bool
        /// The link without its fragment (what is requested).
        public var url: URL
        /// `path` joined with "/": what `--include`/`--exclude` and the item's relative path are.
        public var relative: String { path.joined(separator: "/") }
    }

    /// nil when `root` is no URL with a host of a scheme whose directories can be listed (http, https, sftp, ftp).
    public init?(root: URL) {
        guard TransferScheme(root)?.listsDirectories == true, root.host() != nil else { return nil }
        var text = root.absoluteString
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        if let question = text.firstIndex(of: "?") { text = String(text[..<question]) }
        if !text.hasSuffix("/") { text += "/" }
        guard let normalized = URL(string: text), let segments = Self.segments(of: normalized) else { return nil }
        self.root = normalized
        rootSegments = segments
        rootScheme = normalized.scheme?.lowercased()
        rootHost = normalized.host()?.lowercased()
        rootPort = Self.port(of: normalized)
    }

    /// Where `url` is in the tree, or nil when it is outside it (another host, scheme or port; above or beside
    /// the root; the root itself; a query or fragment) or names something that cannot be a local name (".", "..",
    /// a "/" or NUL that was encoded, nothing left once made safe).
    public func place(of url: URL) -> Place? {
        guard url.scheme?.lowercased() == rootScheme,
              url.host()?.lowercased() == rootHost, url.user == root.user,
              Self.port(of: url) == rootPort,
              url.query == nil, url.fragment == nil,
              let segments = Self.segments(of: url),
              segments.count > rootSegments.count, Array(segments.prefix(rootSegments.count)) == rootSegments else { return nil }
        var names: [String] = []
        for component in segments.dropFirst(rootSegments.count) {
            guard !component.contains("/"), !component.contains("\0"), component != ".", component != "..",
                  let safe = FileNaming.safeBaseName(component) else { return nil }
            names.append(safe)
        }
        return Place(path: names, isDirectory: url.path(percentEncoded: true).hasSuffix("/"), url: url)
    }

    /// A listing's own entries: those of the directory at `path` in the tree (links up, across or deeper are
    /// not its entries: a parent link, a breadcrumb, a README's link elsewhere).
    public func children(of path: [String], in entries: [ListingEntry]) -> [(place: Place, entry: ListingEntry)] {
        entries.compactMap { entry in
            guard let place = place(of: entry.url), place.path.count == path.count + 1, Array(place.path.prefix(path.count)) == path else { return nil }
            return (place, entry)
        }
    }

    /// The decoded segments of a URL's path, without the empty ones a trailing "/" or a doubled one makes;
    /// nil when a segment does not decode (a stray "%").
    static func segments(of url: URL) -> [String]? {
        var out: [String] = []
        for raw in url.path(percentEncoded: true).split(separator: "/", omittingEmptySubsequences: true) {
            guard let decoded = FileNaming.percentDecoded(raw) else { return nil }
            out.append(decoded)
        }
        return out
    }

    static func port(of url: URL) -> Int {
        url.port ?? TransferScheme(url)?.defaultPort ?? 0
    }
}
