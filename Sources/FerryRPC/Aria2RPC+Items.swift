import FerryCore
import Foundation

/// Items as aria2 says them: GIDs, states, error codes, files and options (tellStatus and the lists).
extension Aria2RPC {
    /// What a GID names: one item, or a tree (the batch a `get -r` or `put -r` queued), which aria2's clients see
    /// as one download of many files, as they see a multi-file torrent: its figures are its files' sums, and
    /// pause, unpause, remove and a limit act on all of them (and on its walk).
    enum Target: Equatable {
        case item(TransferID)
        case tree(Int64)

        /// The items it names, for a command.
        var selection: Selection {
            switch self {
            case let .item(id): Selection(ids: [id.rawValue])
            case let .tree(batch): Selection(batch: batch)
            }
        }
    }

    /// A tree's GID is its batch with the top bit set (an item's id never has it).
    static let treeBit: UInt64 = 1 << 63

    func snapshot(_ id: TransferID) throws -> TransferSnapshot {
        guard let item = manager.snapshot(of: id) else { throw Failure("GID \(Self.gid(id)) is not found") }
        return item
    }

    /// An item, or a tree's row (TransferSnapshot.tree set).
    func snapshot(_ target: Target) throws -> TransferSnapshot {
        switch target {
        case let .item(id): return try snapshot(id)
        case let .tree(batch):
            guard let row = manager.treeRow(batch: batch) else { throw Failure("GID \(Self.gid(tree: batch)) is not found") }
            return row
        }
    }

    static func gid(_ id: TransferID) -> String { String(format: "%016llx", id.rawValue) }
    static func gid(tree batch: Int64) -> String { String(format: "%016llx", UInt64(bitPattern: batch) | treeBit) }
    /// The GID of a row: a tree's, or the item's.
    static func gid(of item: TransferSnapshot) -> String { item.tree.map { gid(tree: $0.batch) } ?? gid(item.id) }

    /// The most files of a tree a status gives (a tree of 100,000 files is not sent whole at every poll of a web UI).
    static let treeFilesShown = 1_000

    /// aria2's `errorCode` for an item that ended: 0 complete, 31 removed, and for a failure the code aria2
    /// gives the same cause (its manual, EXIT STATUS), from the failure's kind; 1 (unknown) for the rest. nil
    /// while the item has not ended.
    static func errorCode(_ item: TransferSnapshot) -> String? {
        switch item.state {
        case .completed: return "0"
        case .cancelled: return "31"
        case .failed: break
        case .queued, .running, .waiting, .paused: return nil
        }
        guard let failure = item.failure else { return "1" }
        let code: Int
        switch failure.kind {
        case .http:
            switch failure.status {
            case 404: code = 3  // resource not found
            case 401: code = 24  // authorization failed
            case 503: code = 29  // service unavailable
            default: code = 22  // HTTP response header was bad or unexpected
            }
        case .badResponse: code = 22
        case .timedOut: code = 2
        case .refused, .noConnection, .connectionLost, .offline, .tlsFailed, .tlsUntrusted, .tlsWrongName, .tlsClientCert,
             .proxyUnreachable, .proxyRefused:
            code = 6  // network problem
        case .noSuchHost: code = 19  // name resolution failed
        case .noSuchFile: code = 3  // resource not found
        case .isDirectory: code = 1
        case .loginRefused: code = 24  // authorization failed
        case .hostKeyUnknown, .hostKeyChanged: code = 6  // network problem (aria2 has no SSH; its sftp says so too)
        case .diskFull: code = 9
        case .checksum: code = 32
        case .noPermission, .readOnly: code = 16  // could not create the file
        case .noFreeName: code = 13  // the file already existed
        case .unreadableFile: code = 17  // file I/O error
        case .badEncoding, .badURL, .fileChanged, .protocol, .cancelled, .other: code = 1
        }
        return "\(code)"
    }

    static func status(_ state: TransferState) -> String {
        switch state {
        case .running: "active"
        case .queued, .waiting: "waiting"
        case .paused: "paused"
        case .failed: "error"
        case .completed: "complete"
        case .cancelled: "removed"
        }
    }

    func path(_ item: TransferSnapshot) -> String {
        // An upload's file is the one it sends (a form's first file; nothing for standard input).
        if let upload = item.spec.upload {
            switch upload.body {
            case .raw(.file(let path), _): return path
            case let .multipart(parts):
                for case let .file(_, .file(path), _, _) in parts { return path }
                return ""
            default: return ""
            }
        }
        if let saved = item.savedPath { return saved }
        guard let name = item.fileName ?? item.spec.fileName else { return "" }
        return item.spec.directory + "/" + name
    }

    func files(_ item: TransferSnapshot) -> [[String: Any]] {
        guard let tree = item.tree else { return [file(item, index: 1)] }
        // A tree's files (the first of them), in queue order.
        return manager.snapshot(QueueView(batch: tree.batch, limit: Self.treeFilesShown)).items.enumerated().map { file($1, index: $0 + 1) }
    }

    private func file(_ item: TransferSnapshot, index: Int) -> [String: Any] {
        ["index": "\(index)", "path": path(item), "length": "\(item.bytesExpected ?? 0)", "completedLength": "\(item.bytesDone)",
         "selected": "true", "uris": uris(item)]
    }

    /// Where a tree goes (its files' common directory: DIR of `get -r`), or an item's directory.
    func directory(_ item: TransferSnapshot) -> String {
        guard let tree = item.tree, let relative = Batch.path(of: item.spec, inTree: tree.label) else { return item.spec.directory }
        // The first file's directory less its place in the tree.
        var directory = item.spec.directory
        for _ in relative.split(separator: "/").dropLast() { directory = (directory as NSString).deletingLastPathComponent }
        return directory
    }

    func uris(_ item: TransferSnapshot) -> [[String: Any]] {
        [["uri": TerminalSafe.redactedURL(item.spec.url), "status": "used"]]
    }

    /// An item's options as aria2's getOption gives them: the global ones (globalOptions), then the item's own
    /// (folder, name, ranges, limit, checksum). Header values are never given (they may be secrets).
    func options(of item: TransferSnapshot) -> [String: Any] {
        var options = globalOptions()
        let segments = "\(item.spec.segments ?? 1)"
        options["dir"] = directory(item)
        options["split"] = segments
        options["max-connection-per-server"] = segments
        options["max-download-limit"] = "\(item.rateLimit ?? 0)"
        // Only a name that was asked for: a client's Restart adds the item again with these options, and a name
        // the server chose would then be a name asked for (another transfer: it would not find its `.part`).
        options["out"] = item.tree == nil ? item.spec.fileName : nil
        if let sha256 = item.spec.sha256 { options["checksum"] = "sha-256=\(sha256)" }
        if let agent = item.spec.headers.last(where: { $0.name.lowercased() == "user-agent" }) { options["user-agent"] = agent.value }
        options["pause"] = item.state == .paused ? "true" : "false"
        return options
    }

    /// An item as `tellStatus` gives it; only `keys` when some are asked for.
    func describe(_ item: TransferSnapshot, keys: [String]?) -> [String: Any] {
        let upload = item.spec.direction == .upload
        let pieces = Aria2Pieces(item)
        var status: [String: Any] = [
            "gid": Self.gid(of: item),
            "status": Self.status(item.state),
            "totalLength": "\(item.bytesExpected ?? 0)",
            // An upload's progress is its bytes sent (a client shows completedLength over totalLength).
            "completedLength": "\(item.bytesDone)",
            "uploadLength": upload ? "\(item.bytesDone)" : "0",
            "downloadSpeed": upload ? "0" : "\(Int64(item.bytesPerSecond ?? 0))",
            "uploadSpeed": upload ? "\(Int64(item.bytesPerSecond ?? 0))" : "0",
            "connections": item.state == .running ? "\(item.segments?.count ?? 1)" : "0",
            "numPieces": "\(pieces.count)",
            "pieceLength": "\(pieces.length)",
            "dir": upload && item.tree == nil ? (path(item) as NSString).deletingLastPathComponent : directory(item),
            "files": files(item),
        ]
        if let bitfield = pieces.bitfield { status["bitfield"] = bitfield }
        if let code = Self.errorCode(item) { status["errorCode"] = code }
        if item.state == .failed { status["errorMessage"] = TerminalSafe.sanitize(item.lastError ?? "failed") }
        if upload { status["ferryUpload"] = ["method": item.spec.upload?.urlMethod ?? "PUT"] }
        guard let keys, !keys.isEmpty else { return status }
        return status.filter { keys.contains($0.key) }
    }
}
