import Foundation

/// Identifies one item in the queue for its whole life (stable across restarts once a store keeps it).
public struct TransferID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public static func < (a: TransferID, b: TransferID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }

    /// A plain number in JSON (not an object holding one: a million ids in a reply cost a third less to encode).
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int64.self) }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

public enum Direction: String, Sendable, Codable {
    case download, upload
}

/// Where an item is in its life. `waiting` is the pause between a failed attempt and its retry.
public enum TransferState: String, Sendable, Codable, CaseIterable, CodingKeyRepresentable {
    case queued, running, waiting, paused, completed, failed, cancelled

    /// No further work will happen without a user command.
    public var isTerminal: Bool { self == .completed || self == .failed || self == .cancelled }

    /// Running or still to run (queued, or waiting for a retry): what a pause stops, and work for an engine.
    public var isPending: Bool { self == .running || self == .queued || self == .waiting }

    /// What a stored row in this state is when no engine works on it: one saved `running` or `waiting` is an
    /// engine's that stopped (killed, crashed), and queued; the next engine takes it up as such. The one rule
    /// for an engine loading its queue, `ferry list` and the verbs without an engine.
    public var atRest: TransferState { self == .running || self == .waiting ? .queued : self }
}

/// One header the user asked to send (`-H 'Name: value'`).
public struct HTTPHeader: Sendable, Codable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `Name: value`; nil when the name is not an HTTP token or the value holds CR, LF or NUL.
    public static func parse(_ line: String) -> HTTPHeader? {
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
        let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        let tokenChars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.allSatisfy({ tokenChars.contains($0) }) else { return nil }
        guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else { return nil }
        return HTTPHeader(name: name, value: value)
    }
}

/// Where an upload's bytes come from.
public enum UploadSource: Sendable, Codable, Equatable {
    /// A regular file, sent with Content-Length.
    case file(path: String)
    /// Standard input: unknown length, sent chunked, cannot be sent twice.
    case standardInput

    public var displayName: String {
        switch self {
        case let .file(path): return URL(fileURLWithPath: path).lastPathComponent
        case .standardInput: return "stdin"
        }
    }
}

/// One part of a multipart/form-data body.
public enum FormPart: Sendable, Codable, Equatable {
    case field(name: String, value: String)
    case file(name: String, source: UploadSource, fileName: String, contentType: String)

    public var name: String {
        switch self {
        case let .field(name, _), let .file(name, _, _, _): return name
        }
    }
}

/// What an upload sends.
public struct UploadSpec: Sendable, Codable, Equatable {
    public enum Body: Sendable, Codable, Equatable {
        /// The source is the whole body (`ferry put FILE URL`).
        case raw(UploadSource, contentType: String)
        /// multipart/form-data (`ferry put FILE URL -F ...`).
        case multipart([FormPart])
    }
    public var method: String
    public var body: Body
    /// The resumable protocol the upload speaks (nil: a plain upload, sent again whole after a cut). Only a
    /// raw body from a file can resume: standard input cannot be read again, and a form's parts are one body
    /// the server parses as a whole.
    public var resumable: ResumableProtocol?
    /// sftp (`put --remote-temp`): the bytes go to `NAME.part` on the server, which becomes NAME (replacing what is
    /// there) only once it is whole; a resume appends to `NAME.part`. nil: NAME itself is written, as scp and sftp do.
    public var remoteTemp: Bool?

    /// The name an upload's bytes go to on the server before it is whole (`put --remote-temp`).
    public static let remoteTempSuffix = ".part"

    /// The method of the request the item's URL gets: tus makes the upload there with a POST (the bytes then
    /// go by PATCH to the location it answers); otherwise `method`.
    public var urlMethod: String { resumable == .tus ? "POST" : method }

    /// The requests the upload is sent with, as the detail view says them.
    public var methodText: String { resumable == .tus ? "POST, then PATCH (tus)" : method }

    public init(method: String, body: Body, resumable: ResumableProtocol? = nil) {
        self.method = method
        self.body = body
        self.resumable = resumable
    }

    /// Whether this body can be sent in resumable pieces (a raw file).
    public var canResume: Bool {
        if case .raw(.file, _) = body { return true }
        return false
    }

    /// The part that names the item in lists: the raw source or the first file part.
    public var primarySource: UploadSource? {
        switch body {
        case let .raw(source, _): return source
        case let .multipart(parts):
            for case let .file(_, source, _, _) in parts { return source }
            return nil
        }
    }

    /// The files the body reads.
    public var sourcePaths: [String] {
        switch body {
        case let .raw(.file(path), _): return [path]
        case .raw(.standardInput, _): return []
        case let .multipart(parts):
            return parts.compactMap { if case let .file(_, .file(path), _, _) = $0 { return path } else { return nil } }
        }
    }

    /// Only bodies that can be produced again may be re-sent by a retry.
    public var isRepeatable: Bool {
        switch body {
        case let .raw(source, _): return source != .standardInput
        case let .multipart(parts):
            return !parts.contains { if case .file(_, .standardInput, _, _) = $0 { return true } else { return false } }
        }
    }
}

/// What the user asked for. Immutable once queued.
public struct TransferSpec: Sendable, Codable, Equatable {
    public var direction: Direction
    public var url: URL
    public var headers: [HTTPHeader]
    /// Downloads: the directory the file lands in (absolute). Uploads: empty.
    public var directory: String
    /// Downloads: the name given with `-O`; nil means "ask the server, then the URL".
    public var fileName: String?
    /// Downloads: expected lowercase hex SHA-256 of the whole file.
    public var sha256: String?
    /// Downloads: parallel ranged requests for a large file (nil or 1: one stream).
    public var segments: Int?
    /// The item's bandwidth limit as asked when it was queued (`--limit-rate`), bytes per second; nil: none.
    /// The item's limit in force (changed live from the UI) is the item's own, kept in the store.
    public var rateLimit: Int64?
    /// The netrc file whose login for the URL's host is sent (read by the engine at each attempt); nil: none.
    /// The path only: the secret stays in the user's file, out of the queue's store.
    public var netrcFile: String?
    /// sftp: the ssh-agent of the shell session that asked (its `SSH_AUTH_SOCK`), offered before the
    /// engine's own: an engine started from a session that has since ended still logs in with the agent of the
    /// session that asks now (while its socket is there). A path, not a secret; nil for other schemes.
    public var sshAgent: String?

    /// A tree's file as its walk saw it: a download's (`get -r`) the server's file as its listing described it,
    /// an upload's (`put -r`) the local file. The download's copy is the server's (FileFinisher): it takes the
    /// server's modification time, is marked as ferry's with the URL it came from (`user.xdg.origin.url`, as
    /// wget --xattr marks it), and replaces ferry's own earlier copy of the file, never another file (unless
    /// `replacesAnyFile`). A server file that changed is another transfer (`identity`). A tree's transfer done
    /// before is done again when a tree asks for it (StoredTransfer.reusable): its walk found it missing or changed.
    public var mirror: MirrorOf?

    /// Which file already under its name this download takes the place of (a tree's); nil: it replaces nothing.
    public var replacing: Replacing? {
        guard direction == .download, let mirror else { return nil }
        return Replacing(url: url, anyFile: mirror.replacesAnyFile == true)
    }

    /// A tree's download replaces ferry's own copy of `url` (FileOrigin), or with `anyFile` (`get -r --replace`)
    /// any plain file (never a symlink, a directory or anything else).
    public struct Replacing: Sendable, Equatable {
        public var url: URL
        public var anyFile: Bool
    }

    public struct MirrorOf: Sendable, Codable, Equatable {
        public var size: Int64?
        public var modified: Date?
        /// The user said a file here that is not ferry's copy may be replaced too (`get -r --replace`); not part
        /// of the identity: the same file asked with and without it is one item.
        public var replacesAnyFile: Bool?
        public init(size: Int64?, modified: Date?, replacesAnyFile: Bool = false) {
            self.size = size
            self.modified = modified
            self.replacesAnyFile = replacesAnyFile ? true : nil
        }
    }

    public init(download url: URL, directory: String, fileName: String? = nil, sha256: String? = nil, headers: [HTTPHeader] = [],
                segments: Int? = nil) {
        self.direction = .download
        self.segments = segments
        self.url = url
        self.headers = headers
        self.directory = directory
        self.fileName = fileName
        self.sha256 = sha256?.lowercased()
    }

    /// Uploads: the method and body.
    public var upload: UploadSpec?

    public init(upload: UploadSpec, to url: URL, headers: [HTTPHeader] = []) {
        self.direction = .upload
        self.url = url
        self.headers = headers
        self.directory = ""
        self.upload = upload
    }

    public var host: String { url.host?.lowercased() ?? "" }

    /// The same spec but for its URL (the lines of one `-i` file).
    public func differsOnlyInURL(from other: TransferSpec) -> Bool {
        var copy = self
        copy.url = other.url
        return copy == other
    }
}

/// What the server said about the representation, kept so a resume asks for the same bytes.
public struct Validators: Sendable, Codable, Equatable {
    public var etag: String?
    public var lastModified: String?
    /// Full size of the representation, when the server told it.
    public var totalLength: Int64?

    public init(etag: String? = nil, lastModified: String? = nil, totalLength: Int64? = nil) {
        self.etag = etag
        self.lastModified = lastModified
        self.totalLength = totalLength
    }

    /// The value for `If-Range`: a strong ETag, else Last-Modified; nil when neither can be trusted.
    public var ifRange: String? {
        if let etag, !etag.hasPrefix("W/"), etag.hasPrefix("\"") { return etag }
        return lastModified
    }
}

/// One try at a transfer, for the detail view and the headless failure message.
public struct Attempt: Sendable, Codable, Equatable {
    public var number: Int
    public var startedAt: Date
    public var endedAt: Date?
    /// The offset the attempt asked to start from (0 = whole file).
    public var fromOffset: Int64
    /// The offset it asked to start from when the server answered with the whole file instead (it ignores
    /// Range, or the file changed): the attempt then started over from zero (`fromOffset` 0).
    public var restartedFrom: Int64?
    /// An sftp or ftp upload that went on from the server's copy (RemoteAppendRun): what the server was found to
    /// hold of this file, where the rest was sent from (0: none of it matched, the file was sent whole). Nil
    /// until the server said; `fromOffset` is then the same.
    public var serverHad: Int64?
    public var status: Int?
    public var error: String?
    /// Over SSH: the server's host key as checked against known_hosts (`ED25519 key SHA256:...`).
    public var hostKey: String?

    public init(number: Int, startedAt: Date, endedAt: Date? = nil, fromOffset: Int64, status: Int? = nil, error: String? = nil) {
        self.number = number
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.fromOffset = fromOffset
        self.status = status
        self.error = error
    }
}

extension Attempt {
    /// What a start over from zero is called wherever it is shown (the headless line, the detail's attempts), by
    /// the scheme of the item's URL: over sftp and ftp only a remote file that changed (its size or modification
    /// time) is sent whole; scp has no ranges.
    public func restartWords(over scheme: TransferScheme?) -> String? {
        restartedFrom.map { offset in
            switch scheme {
            case .sftp?, .ftp?, .ftps?: "the remote file changed: starting over from zero"
            case .scp?: "scp cannot resume: starting over from zero"
            default: "the server sent the whole file, not from \(ByteFormat.bytes(offset)): starting over from zero"
            }
        }
    }
}

extension TransferSpec {
    /// What makes two items the same transfer: a download's URL and destination (the directory, and the
    /// `-O` name when one was given); an upload's method, body sources and URL. A `get` or `put` of an item
    /// already in the queue reuses it (see QueueStore.add). nil for a body read from standard input: never
    /// the same twice.
    public var identity: String? {
        switch direction {
        case .download:
            var words = ["get", url.absoluteString, directory, fileName ?? ""]
            // A tree's file that changed on the server is fetched again, not found done.
            if let mirror { words.append("\(mirror.size ?? -1) \(mirror.modified.map { Int64($0.timeIntervalSince1970) } ?? -1)") }
            return words.joined(separator: "\u{1F}")
        case .upload:
            guard let upload, upload.isRepeatable else { return nil }
            var words = ["put", upload.method, url.absoluteString]
            switch upload.body {
            case let .raw(.file(path), _): words.append(path)
            case .raw(.standardInput, _): return nil
            case let .multipart(parts):
                for part in parts {
                    switch part {
                    case let .field(name, value): words += ["field", name, value]
                    case let .file(name, .file(path), fileName, _): words += ["file", name, path, fileName]
                    case .file(_, .standardInput, _, _): return nil
                    }
                }
            }
            return words.joined(separator: "\u{1F}")
        }
    }
}

/// One option a re-asked transfer (the same `get`/`put` again, TransferSpec.identity) was given with another
/// value than its item had: the item takes the new one, and the user is told which. Values that may be secret
/// (headers, logins) are named, never shown.
public struct OptionChange: Sendable, Codable, Equatable {
    /// The option as the command line spells it (`--limit-rate`).
    public var option: String
    /// The value before and now, in words; nil: not given.
    public var was: String?
    public var now: String?

    public init(option: String, was: String?, now: String?) {
        self.option = option
        self.was = was
        self.now = now
    }

    /// `--limit-rate 5.0 MiB/s (was 100.0 KiB/s)`.
    public var words: String { "\(option) \(now ?? "none") (was \(was ?? "none"))" }
}

extension TransferSpec {
    /// Keeps `socket` (the asking session's `SSH_AUTH_SOCK`) as the item's ssh-agent when it is an sftp item (scp's
    /// libssh2 reads the engine's own environment only).
    public mutating func takeAgent(_ socket: String?) {
        sshAgent = TransferScheme(url) == .sftp ? socket.flatMap { $0.isEmpty ? nil : $0 } : nil
    }

    /// The options in which this spec (asked now) differs from `old` (the item's), for the same transfer:
    /// what an item asked again takes. Empty when they are the same.
    public func optionChanges(from old: TransferSpec) -> [OptionChange] {
        var changes: [OptionChange] = []
        func note(_ option: String, _ was: String?, _ now: String?) {
            if was != now { changes.append(OptionChange(option: option, was: was, now: now)) }
        }
        // A hash is long: its first 12 digits tell two apart.
        note("--sha256", old.sha256.map { String($0.prefix(12)) + "…" }, sha256.map { String($0.prefix(12)) + "…" })
        note("--limit-rate", old.rateLimit.map { ByteFormat.rate(Double($0)) }, rateLimit.map { ByteFormat.rate(Double($0)) })
        note("--segments", old.segments.map(String.init), segments.map(String.init))
        if old.headers != headers {
            // Names only: a header's value may be a token. The same names with other values still differ.
            let names = { (headers: [HTTPHeader]) in headers.isEmpty ? nil : headers.map(\.name).joined(separator: ", ") }
            let was = names(old.headers), now = names(headers)
            changes.append(OptionChange(option: "--header", was: was == now ? was.map { $0 + " (other values)" } : was, now: now))
        }
        note("--netrc", old.netrcFile, netrcFile)
        if let upload, let oldUpload = old.upload {
            note("--resumable", oldUpload.resumable?.rawValue, upload.resumable?.rawValue)
            if oldUpload.body != upload.body { changes.append(OptionChange(option: "--content-type", was: "as before", now: "as given now")) }
        }
        return changes
    }

    /// Whether a change from `old` alters the requests an attempt makes (headers, logins, ranges, an upload's
    /// body or protocol): a running attempt then goes on as a new one. A checksum counts at the finish and a
    /// limit at once, so they alone do not.
    public func changesRequests(from old: TransferSpec) -> Bool {
        var requests = self
        requests.sha256 = old.sha256
        requests.rateLimit = old.rateLimit
        // Another session's agent is taken for the next login; a running attempt is logged in already.
        requests.sshAgent = old.sshAgent
        return requests != old
    }
}

/// The items that one command queued (one `get`/`put`, one `-i` file, one add in the UI): its id, when, and
/// what the user typed. A headless `get`/`put` runs and waits for its own batch only.
public struct Batch: Sendable, Codable, Equatable {
    public var id: Int64
    public var createdAt: Date
    public var command: String
    /// A tree's batch (`get -r`, `put -r`): where the tree is from (TreeRow.label); nil for other batches.
    public var tree: String?
    /// The batch's own bandwidth limit, bytes per second, shared by its items as they come and go (a tree's
    /// `--limit-rate`, `l` on its row); nil: none.
    public var rateLimit: Int64?

    /// Where `spec` sits in the tree `tree` (Batch.tree) is from: its path below the tree's start URL (a
    /// download) or local directory (an upload), `sub/a b.bin`; nil when it is not below it. Outside text.
    public static func path(of spec: TransferSpec, inTree tree: String) -> String? {
        let (item, root): (String, String)
        if let source = spec.upload?.primarySource {
            guard case let .file(path) = source else { return nil }
            (item, root) = (path, tree)
        } else {
            guard let start = URL(string: tree) else { return nil }
            (item, root) = (spec.url.path, start.path)
        }
        let prefix = root.hasSuffix("/") ? root : root + "/"
        guard item.hasPrefix(prefix), item.count > prefix.count else { return nil }
        return String(item.dropFirst(prefix.count))
    }

    public init(id: Int64, createdAt: Date, command: String, tree: String? = nil, rateLimit: Int64? = nil) {
        self.id = id
        self.createdAt = createdAt
        self.command = command
        self.tree = tree
        self.rateLimit = rateLimit
    }
}

/// What became of one spec given to an add: a new item, or the item already in the queue for the same
/// transfer (TransferSpec.identity), and what the engine did with it.
public struct AddedItem: Sendable, Codable, Equatable {
    public enum How: String, Sendable, Codable {
        /// A new item at the end of the queue.
        case added
        /// The same transfer was queued, running or waiting to retry: left to go on.
        case alreadyQueued
        /// The same transfer was paused, failed or cancelled: queued again, to resume from its `.part` file.
        case resumed
        /// The same download completed and its file is still in place: nothing to fetch.
        case alreadyDone
    }

    public var id: TransferID
    public var how: How
    /// The state the item was in before (reused items only).
    public var before: TransferState?
    /// Reused items: the item's name as lists show it, and a completed download's file.
    public var name: String?
    public var savedPath: String?
    /// Reused items: the options it was asked with now that differ from the item's; it takes them.
    public var changed: [OptionChange]?
    /// A forced add (`--force`): the unfinished item of the same transfer this new one replaces, removed with
    /// its `.part` file (or its copy on the server) so that the new one starts afresh under the same name.
    public var replaced: TransferID?

    public init(id: TransferID, how: How, before: TransferState? = nil) {
        self.id = id
        self.how = how
        self.before = before
    }
}
