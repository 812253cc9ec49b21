import FerryCore
import Foundation

/// Items as aria2 says them: GIDs, states, error codes, files and options (tellStatus and the lists).
extension Aria2RPC {
    func snapshot(_ id: TransferID) throws -> TransferSnapshot {
        guard let item = manager.snapshot(of: id) else { throw Failure("GID \(Self.gid(id)) is not found") }
        return item
    }

    func status(of id: TransferID, keys: [String]?) throws -> [String: Any] {
        describe(try snapshot(id), keys: keys)
    }

    static func gid(_ id: TransferID) -> String { String(format: "%016llx", id.rawValue) }

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
        [[
            "index": "1", "path": path(item), "length": "\(item.bytesExpected ?? 0)", "completedLength": "\(item.bytesDone)",
            "selected": "true", "uris": uris(item),
        ]]
    }

    func uris(_ item: TransferSnapshot) -> [[String: Any]] {
        [["uri": TerminalSafe.redactedURL(item.spec.url), "status": "used"]]
    }

    /// An item's options as aria2's getOption gives them: the global ones (globalOptions), then the item's own
    /// (folder, name, ranges, limit, checksum). Header values are never given (they may be secrets).
    func options(of item: TransferSnapshot) -> [String: Any] {
        var options = globalOptions()
        let segments = "\(item.spec.segments ?? 1)"
        options["dir"] = item.spec.directory
        options["split"] = segments
        options["max-connection-per-server"] = segments
        options["max-download-limit"] = "\(item.rateLimit ?? 0)"
        // Only a name that was asked for: a client's Restart adds the item again with these options, and a name
        // the server chose would then be a name asked for (another transfer: it would not find its `.part`).
        options["out"] = item.spec.fileName
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
            "gid": Self.gid(item.id),
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
            "dir": upload ? (path(item) as NSString).deletingLastPathComponent : item.spec.directory,
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
