import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A file a tree's walk found: where it is in the tree, and what its listing said of it.
public struct TreeFile: Sendable, Equatable {
    public var place: TreeScope.Place
    public var size: Int64?
    public var modified: Date?
    /// Seconds `modified` is given to (60: a listing that writes minutes).
    public var precision: TimeInterval = 1
}

/// How a tree's directories are listed (`ferry get -r`, walked by the engine's TreeWalker; `put -r`'s listings of
/// the server): each directory's listing is fetched through ferry's transport (FerryURLProtocol, as every
/// download is, with the item's headers and netrc login), read by DirectoryListing, and kept to the tree by
/// TreeScope. A listing that is the same as one of its own ancestors' (a server's symlink loop) is not walked
/// again. A listing that fails is asked again, up to `retries` times.
public struct TreeWalk: Sendable {
    public struct Options: Sendable {
        /// Directory levels to list: 1 is the start directory alone (rclone's `--max-depth`); nil for all.
        public var depth: Int?
        /// Which files are taken.
        public var filter = TreeFilter()
        /// The request's own headers (`-H`) and netrc file, as a download of the tree's files has them.
        public var headers: [HTTPHeader] = []
        public var netrcFile: String?
        /// sftp: the asking session's ssh-agent (TransferSpec.sshAgent).
        public var sshAgent: String?
        public var userAgent = EngineConfiguration().userAgent
        /// Proxies and trusted CAs, as the engine sends its items with (EngineConfiguration.transport).
        public var transport = TransportSettings()
        public var timeout: TimeInterval = 30
        /// Listings fetched at once.
        public var parallel = 4
        /// Times a failed listing is asked again, and the wait before the first (doubled each time).
        public var retries = 3
        public var retryDelay: Duration = .milliseconds(500)

        public init() {}
    }

    /// How a tree's directories are listed: a GET of each (an HTML or JSON index), or a WebDAV PROPFIND.
    public enum ListingMethod: String, Sendable {
        case index, webdav
        /// sftp and ftp: a `LIST` of the directory, `ls -l` lines (DirectoryLines, FileWire).
        case lines

        /// The request: a PROPFIND without a body asks for every property (RFC 4918, 9.1), Depth 1 for the
        /// directory and its entries.
        public var verb: String {
            switch self {
            case .index: "GET"
            case .webdav: "PROPFIND"
            case .lines: "LIST"
            }
        }
        public var headers: [String: String] { self == .webdav ? ["Depth": "1"] : [:] }
        /// The status of a listing.
        public var listed: Int { self == .webdav ? 207 : 200 }

        /// A listing's entries; nil for a WebDAV answer that names nothing (it names at least the directory
        /// itself: one that names nothing was not read, cut short).
        public func entries(_ answer: TreeRequests.Answer, page: URL) -> [ListingEntry]? {
            guard self == .webdav else {
                return DirectoryListing.entries(answer.body, contentType: answer.response.value(forHTTPHeaderField: "Content-Type"), page: page)
            }
            let entries = DirectoryListing.webdav(answer.body, page: page)
            return entries.isEmpty ? nil : entries
        }
    }

    public let scope: TreeScope
    public let options: Options
    /// Its listings' and HEADs' requests (a tree's upload makes its own through the same).
    public let requests: TreeRequests

    public init(scope: TreeScope, options: Options) {
        self.scope = scope
        self.options = options
        requests = TreeRequests(headers: options.headers, netrcFile: options.netrcFile, sshAgent: options.sshAgent, userAgent: options.userAgent, timeout: options.timeout,
                                 transport: options.transport)
    }

    /// What a HEAD of a file says of it (a 200's Content-Length and Last-Modified), for a listing that gives no size.
    public func remoteFacts(_ url: URL) async -> (size: Int64?, modified: Date?) {
        guard case let .success(answer) = await requests.send(url, method: "HEAD"), answer.status == 200 else { return (nil, nil) }
        let length = answer.response.expectedContentLength
        return (length >= 0 ? length : nil, answer.response.value(forHTTPHeaderField: "Last-Modified").flatMap(HTTPDate.parse))
    }

    /// How the tree's directories are listed, and the start directory's listing when finding it out gave it: a
    /// WebDAV server answers a PROPFIND of the start directory with 207, and the tree is listed so (every file's
    /// size and time); any other answer (nginx's 405, Python's 501, an index page) means indexes are read.
    func listingMethod() async -> (ListingMethod, first: [ListingEntry]?) {
        guard TransferScheme(scope.root)?.isHTTP != false else { return (.lines, nil) }
        if case let .success(listing) = await fetch(scope.root, method: .webdav) { return (.webdav, listing) }
        return (.index, nil)
    }

    /// What one directory's listing holds for the walk.
    struct Reading {
        /// Its subdirectories (within the depth asked), each with the listings above it.
        var directories: [(place: TreeScope.Place, ancestors: [String])] = []
        /// Its files the filter takes.
        var files: [TreeFile] = []
        /// The listing repeats one above it (a server's symlink loop: `a/back -> ..` lists the root again under
        /// a longer path): not walked.
        var loop = false
    }

    /// The entries of the directory at `path` (below the start), whose ancestors' listings have `ancestors` as
    /// signatures. Each entry once (a link given twice is one).
    func read(_ entries: [ListingEntry], at path: [String], ancestors: [String]) -> Reading {
        var reading = Reading()
        let inside = scope.children(of: path, in: entries)
        let signature = Self.signature(inside.map { "\($0.place.path.last!)\($0.place.isDirectory ? "/" : "") \($0.entry.size ?? -1)" })
        if !inside.isEmpty, ancestors.contains(signature) {
            reading.loop = true
            return reading
        }
        var seen: Set<String> = []
        for (place, entry) in inside where seen.insert(WalkDirectory.key(place.url)).inserted {
            if place.isDirectory || entry.isDirectory {
                if let depth = options.depth, place.path.count >= depth { continue }
                reading.directories.append((place, ancestors + [signature]))
            } else if options.filter.wants(place.relative) {
                reading.files.append(TreeFile(place: place, size: entry.size, modified: entry.modified, precision: entry.precision))
            }
        }
        return reading
    }

    /// A listing's entries (name, kind, size) as one short string, whatever their order: two listings with the same
    /// are the same directory seen again.
    static func signature(_ entries: [String]) -> String {
        var hash = SHA256()
        hash.update(data: Data(entries.sorted().joined(separator: "\n").utf8))
        return hash.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    struct ListingFailure: Error {
        var reason: String
        var retryable = true
    }

    /// One directory's listing, asked again after a failure (a connection error, a 5xx, a 429) up to `retries`
    /// times.
    func list(_ url: URL, method: ListingMethod) async -> Result<[ListingEntry], ListingFailure> {
        var delay = options.retryDelay
        var attempt = 0
        while true {
            let result = await fetch(url, method: method)
            attempt += 1
            guard case let .failure(failure) = result, failure.retryable, attempt <= options.retries, !Task.isCancelled else { return result }
            try? await Task.sleep(for: delay)
            delay *= 2
        }
    }

    /// The page's final URL (after redirects) is what its links are resolved against.
    private func fetch(_ url: URL, method: ListingMethod) async -> Result<[ListingEntry], ListingFailure> {
        let answer: TreeRequests.Answer
        switch await requests.send(url, method: method.verb, extra: method.headers) {
        case let .failure(failure): return .failure(ListingFailure(reason: failure.reason))
        case let .success(got): answer = got
        }
        guard answer.status == method.listed else {
            let status = answer.status
            return .failure(ListingFailure(reason: "the listing answered \(status)", retryable: status >= 500 || status == 429 || status == 408))
        }
        let page = answer.response.url ?? url
        // A redirect out of the tree is not followed into it.
        guard page == url || scope.place(of: page) != nil || WalkDirectory.key(page) == WalkDirectory.key(scope.root) else {
            return .failure(ListingFailure(reason: "redirected out of the tree, to \(TerminalSafe.redactedURL(page))", retryable: false))
        }
        guard let entries = method.entries(answer, page: page) else { return .failure(ListingFailure(reason: "the WebDAV listing could not be read")) }
        return .success(entries)
    }
}
