import FerryCore
import Foundation
import Synchronization

/// aria2's JSON-RPC (its manual, "RPC INTERFACE") over ferry's engine: a front end like the UI and the shell
/// verbs. Each call becomes the engine's own commands and reads its windows; there is no second queue.
///
/// aria2's wire habits are kept: numbers as strings, `token:SECRET` as the first parameter (inner calls of a
/// multicall carry their own), errors `{"code": 1, "message": ...}`, a multicall's results each wrapped in a
/// one-element array, any JSON value as the request id, `params` optional.
///
/// Items and GIDs: an item's GID is its id in 16 hex digits (`#26` is `000000000000001a`), stable for the
/// item. ferry's states read as aria2's: running is `active`; queued and waiting for a retry `waiting`;
/// paused `paused`; failed `error`; completed `complete`; cancelled `removed`. As in aria2, `remove` stops a
/// download and keeps its result (`removed`, in `tellStopped`) until `removeDownloadResult` or
/// `purgeDownloadResult` takes it out of the queue (ferry's cancel, then ferry's remove; files stay).
public final class Aria2RPC: @unchecked Sendable {
    public struct Failure: Error {
        public let code: Int
        public let message: String
        init(_ message: String, code: Int = 1) {
            self.code = code
            self.message = message
        }
    }

    let manager: TransferManager
    private let secret: [UInt8]
    /// What `addUri` uses when its options do not say: aria2's global `dir` and `max-download-limit`, which
    /// `changeGlobalOption` changes (for the adds that follow, as in aria2).
    private let defaults: Mutex<(directory: String, rateLimit: Int64?)>
    private let sessionID: String
    /// Called (once) for `aria2.shutdown` and `aria2.forceShutdown`, after the answer is sent.
    private let onShutdown: @Sendable () -> Void
    private let shutdownAsked = Atomic<Bool>(false)
    /// Results taken away (removeDownloadResult, purgeDownloadResult) since this engine began: aria2's
    /// `numStoppedTotal` counts them with those still listed (it fell after a purge).
    private let resultsTaken = Atomic<Int>(0)

    /// The methods answered, as `system.listMethods` lists them.
    public static let methods = [
        "aria2.addUri", "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.pauseAll", "aria2.forcePause",
        "aria2.forcePauseAll", "aria2.unpause", "aria2.unpauseAll", "aria2.tellStatus", "aria2.getUris", "aria2.getFiles",
        "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped", "aria2.changePosition", "aria2.getOption",
        "aria2.changeOption", "aria2.getGlobalOption", "aria2.changeGlobalOption", "aria2.getGlobalStat",
        "aria2.purgeDownloadResult", "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo",
        "aria2.shutdown", "aria2.forceShutdown", "aria2.saveSession", "system.multicall", "system.listMethods",
        "system.listNotifications",
    ]
    public static let notifications = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError",
    ]
    /// aria2's methods for what ferry does not do: answered with that, not with "no such method".
    static let unsupported = ["aria2.addTorrent", "aria2.addMetalink", "aria2.getPeers", "aria2.getServers"]

    public init(manager: TransferManager, secret: String, defaultDirectory: String,
                onShutdown: @escaping @Sendable () -> Void = {}) {
        self.manager = manager
        self.secret = Array(secret.utf8)
        // As an absolute path: what getGlobalOption tells a client ("." said nothing about where files go).
        let absolute = defaultDirectory.hasPrefix("/") ? defaultDirectory
            : FileManager.default.currentDirectoryPath + "/" + defaultDirectory
        self.defaults = Mutex((URL(fileURLWithPath: absolute).standardizedFileURL.path, nil))
        self.sessionID = RPCSettings.randomHex(bytes: 20)
        self.onShutdown = onShutdown
    }

    /// After the answer to a shutdown was sent: the engine stops (once).
    func shutdownAnswered() {
        guard shutdownAsked.exchange(true, ordering: .relaxed) == false else { return }
        onShutdown()
    }

    // MARK: JSON-RPC

    /// The answer to a request body (a call or a batch), as JSON; a body that is not JSON gets a parse error.
    /// `status` is the HTTP status aria2 gives it: 200, or for a single call that failed 400 (500 for a body
    /// that is not JSON), which is how a client over HTTP (AriaNg's default) tells an error from a result. A
    /// batch is 200 whatever its calls' answers.
    public func answer(_ body: Data) -> (data: Data, status: Int, shutdown: Bool) {
        var shutdown = false
        let reply: Any
        var status = 200
        if let json = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) {
            if let batch = json as? [Any], !batch.isEmpty {
                reply = batch.map { call($0, shutdown: &shutdown) } as [Any]
            } else {
                let answer = (json as? [Any]) != nil ? Self.error(id: NSNull(), Failure("Invalid Request", code: -32600))
                    : call(json, shutdown: &shutdown)
                if answer["error"] != nil { status = 400 }
                reply = answer
            }
        } else {
            reply = Self.error(id: NSNull(), Failure("Parse error", code: -32700))
            status = 500
        }
        guard let data = try? JSONSerialization.data(withJSONObject: reply, options: [.withoutEscapingSlashes]) else {
            return (Data(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#.utf8), 500, shutdown)
        }
        return (data, status, shutdown)
    }

    private func call(_ request: Any, shutdown: inout Bool) -> [String: Any] {
        guard let object = request as? [String: Any] else { return Self.error(id: NSNull(), Failure("Invalid Request", code: -32600)) }
        let id = object["id"] ?? NSNull()
        guard let method = object["method"] as? String else { return Self.error(id: id, Failure("Invalid Request", code: -32600)) }
        let params: [Any]
        switch object["params"] {
        case nil, is NSNull: params = []
        case let list as [Any]: params = list
        default: return Self.error(id: id, Failure("Invalid params", code: -32602))
        }
        do {
            return ["jsonrpc": "2.0", "id": id, "result": try invoke(method, params, shutdown: &shutdown)]
        } catch let failure as Failure {
            return Self.error(id: id, failure)
        } catch {
            return Self.error(id: id, Failure("\(error)"))
        }
    }

    static func error(id: Any, _ failure: Failure) -> [String: Any] {
        ["jsonrpc": "2.0", "id": id, "error": ["code": failure.code, "message": failure.message]]
    }

    /// One method with its parameters (the token first, where one is needed).
    func invoke(_ method: String, _ raw: [Any], shutdown: inout Bool) throws -> Any {
        switch method {
        case "system.listMethods": return Self.methods
        case "system.listNotifications": return Self.notifications
        case "system.multicall":
            guard let calls = raw.first as? [Any] else { throw Failure("system.multicall takes a list of calls") }
            return calls.map { entry -> Any in
                guard let entry = entry as? [String: Any], let name = entry["methodName"] as? String else {
                    return ["code": 1, "message": "a call needs methodName and params"]
                }
                guard name != "system.multicall" else { return ["code": 1, "message": "system.multicall cannot be nested"] }
                do {
                    return [try invoke(name, entry["params"] as? [Any] ?? [], shutdown: &shutdown)]
                } catch let failure as Failure {
                    return ["code": failure.code, "message": failure.message]
                } catch {
                    return ["code": 1, "message": "\(error)"]
                }
            }
        default: break
        }
        var params = Params(raw) { [manager] prefix in
            // A GID shorter than 16 digits is a prefix, as in aria2: the one item whose GID begins so.
            let shift = Int64(4 * (16 - prefix.count))
            guard let value = Int64(prefix, radix: 16), value <= (Int64.max >> shift) else { return [] }
            let low = value << shift
            return manager.ids(in: low...(low | ((1 << shift) - 1)), limit: 2)
        }
        try authorize(&params)
        if Self.unsupported.contains(method) {
            throw Failure("\(method): ferry does not do BitTorrent or Metalink")
        }
        switch method {
        case "aria2.addUri": return try addURI(&params)
        case "aria2.tellStatus": return describe(try snapshot(try params.target()), keys: params.keys())
        case "aria2.getFiles": return files(try snapshot(try params.target()))
        case "aria2.getUris": return uris(try snapshot(try params.target()))
        case "aria2.tellActive":
            // A tree is one entry, in the list of its state (its files' sum: running while any runs).
            return manager.snapshot(QueueView(states: [.running], treesAsRows: true)).items.filter { $0.state == .running }
                .map { describe($0, keys: params.keys()) }
        case "aria2.tellWaiting": return try window(states: Self.waitingStates, &params)
        case "aria2.tellStopped": return try window(states: [.completed, .failed, .cancelled], &params)
        case "aria2.pause", "aria2.forcePause": return try act(&params, .pause)
        case "aria2.unpause": return try act(&params, .resume)
        case "aria2.remove", "aria2.forceRemove": return try act(&params, .cancel)
        case "aria2.pauseAll", "aria2.forcePauseAll":
            _ = try manager.perform(.pause(Selection(states: [.queued, .running, .waiting])))
            return "OK"
        case "aria2.unpauseAll":
            _ = try manager.perform(.resume(Selection(states: [.paused])))
            return "OK"
        case "aria2.removeDownloadResult":
            let target = try params.target()
            let item = try snapshot(target)
            guard item.state.isTerminal else { throw Failure("\(Self.gid(of: item)) is not stopped: remove it first") }
            let taken = try manager.perform(.remove(target.selection, deletePart: false)).outcome.changed.count
            resultsTaken.add(taken, ordering: .relaxed)
            return "OK"
        case "aria2.purgeDownloadResult":
            let taken = try manager.perform(.remove(Selection(states: [.completed, .failed, .cancelled]), deletePart: false)).outcome.changed.count
            resultsTaken.add(taken, ordering: .relaxed)
            return "OK"
        case "aria2.changePosition": return try changePosition(&params)
        case "aria2.getGlobalStat": return globalStat()
        case "aria2.getVersion":
            return ["version": FerryVersion.number, "enabledFeatures": ["Async DNS", "HTTPS", "Message Digest"]]
        case "aria2.getSessionInfo": return ["sessionId": sessionID]
        case "aria2.getGlobalOption": return globalOptions()
        case "aria2.changeGlobalOption": return try changeGlobalOptions(params.object())
        case "aria2.getOption": return options(of: try snapshot(try params.target()))
        case "aria2.changeOption":
            let target = try params.target()
            let changes = try params.object()
            // Checked first: a bad value refuses the call, nothing applied.
            let rate = try changes["max-download-limit"].map { try Self.rate($0, option: "max-download-limit") }
            // An empty `out` is none: a web UI's settings dialog sends every option it shows, an unset name as "".
            let out = try changes["out"].flatMap { value -> String? in
                guard let text = value as? String else { throw Failure("out: a file name") }
                return text.isEmpty ? nil : text
            }
            let item = try snapshot(target)
            if let out {
                guard case let .item(id) = target else { throw Failure("out: a tree's files keep their names") }
                // The file keeps its place; its name (and its `.part` file's) changes, as aria2 renames it.
                do {
                    _ = try manager.perform(.rename(id, out))
                } catch {
                    throw Failure((error as? UsageError)?.description ?? String(describing: error))
                }
            }
            if let rate {
                // A tree's: the tree's own limit, its files share it (Selection.wholeBatch).
                guard (try? manager.perform(.setRateLimit(target.selection, rate)))?.outcome.changed.isEmpty == false else {
                    throw Failure("GID \(Self.gid(of: item)) is not found")
                }
            }
            return "OK"
        case "aria2.saveSession": return "OK"  // the queue is always saved
        case "aria2.shutdown", "aria2.forceShutdown":
            shutdown = true
            return "OK"
        default:
            throw Failure("No such method: \(method)")
        }
    }

    /// Compares the first parameter with `token:SECRET` in constant time, and takes it off.
    private func authorize(_ params: inout Params) throws {
        guard let first = params.values.first as? String, first.hasPrefix("token:") else { throw Failure("Unauthorized") }
        let given = Array(first.utf8.dropFirst(6))
        var difference = given.count ^ secret.count
        for index in 0..<max(given.count, secret.count) {
            let a = index < given.count ? given[index] : 0
            let b = index < secret.count ? secret[index] : 0
            difference |= Int(a ^ b)
        }
        guard difference == 0 else { throw Failure("Unauthorized") }
        params.values.removeFirst()
    }

    // MARK: Methods

    private func addURI(_ params: inout Params) throws -> String {
        guard let list = params.values.first as? [Any], !list.isEmpty, let uris = list as? [String] else {
            throw Failure("addUri takes a list of URIs")
        }
        params.values.removeFirst()
        let options = params.values.first as? [String: Any] ?? [:]
        // aria2's `position`: a place in the waiting list, as changePosition's POS_SET (checked before anything
        // is made: a refused add leaves no folder behind).
        var place: Int?
        if let position = params.values.dropFirst().first, !(position is NSNull) {
            guard let number = position as? Int, number >= 0 else { throw Failure("position: a number from 0") }
            place = number
        }
        let url: URL
        do throws(UsageError) {
            // aria2 takes several URIs as mirrors of one file; ferry fetches the first.
            url = try InputValidation.url(uris[0])
        } catch {
            throw Failure(error.description)
        }
        // `out` may name folders under `dir`, as in aria2: made, and never above `dir` ("..", "." and empty
        // names are dropped).
        var folders: [String] = []
        var out = options["out"] as? String
        if let path = out, path.contains("/") {
            let names = path.split(separator: "/").map(String.init).filter { !["", ".", ".."].contains($0) }
            folders = Array(names.dropLast())
            out = names.last
        }
        var spec = TransferSpec(download: url, directory: "")
        if let out { spec.fileName = out }
        // Headers: `header` (one or a list), and aria2's `referer` and `user-agent` options as the headers they are.
        var lines: [String] = []
        if let headers = options["header"] { lines = (headers as? [String]) ?? (headers as? String).map { [$0] } ?? [] }
        for (option, name) in [("referer", "Referer"), ("user-agent", "User-Agent")] {
            guard var value = options[option] as? String else { continue }
            // aria2's `referer=*`: the download's own URI, without credentials or fragment (RFC 9110, 10.1.3).
            if option == "referer", value == "*" {
                var own = URLComponents(url: url, resolvingAgainstBaseURL: false)
                own?.user = nil
                own?.password = nil
                own?.fragment = nil
                value = own?.url?.absoluteString ?? TerminalSafe.redactedURL(url)
            }
            if !lines.contains(where: { $0.lowercased().hasPrefix(name.lowercased() + ":") }) { lines.append("\(name): \(value)") }
        }
        // aria2's login fields: HTTP basic authentication, as an Authorization header (one given wins). Kept
        // with the item as -H's are; never shown (lists name headers, not their values).
        if let user = options["http-user"] as? String, !lines.contains(where: { $0.lowercased().hasPrefix("authorization:") }) {
            let password = options["http-passwd"] as? String ?? ""
            guard !user.contains(":"), !(user + password).contains(where: \.isNewline) else {
                throw Failure("http-user: a user name without ':' or line breaks")
            }
            lines.append("Authorization: Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
        }
        if !lines.isEmpty {
            spec.headers = try lines.map { line in
                guard let header = HTTPHeader.parse(line) else { throw Failure("header: not a header: \(TerminalSafe.sanitize(line))") }
                return header
            }
        }
        if let split = options["split"] {
            guard let n = Int("\(split)"), (1...64).contains(n) else { throw Failure("split: a number from 1 to 64") }
            spec.segments = n > 1 ? n : nil
        }
        spec.rateLimit = try options["max-download-limit"].map { try Self.rate($0, option: "max-download-limit") }
            ?? defaults.withLock { $0.rateLimit }
        if let checksum = options["checksum"] as? String {
            let parts = checksum.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "sha-256", parts[1].count == 64, parts[1].allSatisfy(\.isHexDigit) else {
                throw Failure("checksum: only sha-256=HEX (64 hex digits) is checked")
            }
            spec.sha256 = parts[1].lowercased()
        }
        // Every option checked: the folders are made (when missing, as -o makes them; relative to the engine's
        // download folder), so that a refused add leaves none behind.
        do throws(UsageError) {
            let base = defaults.withLock { $0.directory }
            let asked = (options["dir"] as? String).map { NSString(string: $0).expandingTildeInPath } ?? base
            let dir = try InputValidation.writableDirectory(asked, relativeTo: base)
            spec.directory = folders.isEmpty ? dir : try InputValidation.writableDirectory(folders.joined(separator: "/"), relativeTo: dir)
        } catch {
            throw Failure("dir: \(error.description)")
        }
        // One command: paused from the start with `pause` (never started and then stopped), placed before it
        // can start, in a batch of its own as any add.
        let addition = QueueCommand.Addition(specs: [spec], typed: "aria2.addUri \(TerminalSafe.redactedURL(url))", force: true,
                                             paused: "\(options["pause"] ?? "false")" == "true",
                                             placement: place.map { Placement(.start, $0, among: Set(Self.waitingStates)) })
        let added: [AddedItem]?
        do {
            added = try manager.perform(.add(addition)).added
        } catch {
            throw Failure((error as? StateError)?.description ?? String(describing: error))
        }
        guard let id = added?.first?.id else { throw Failure("the item was not added") }
        return Self.gid(id)
    }

    /// pause, unpause, remove: the item's state changed as the command's rule says (StateChange), else refused
    /// as aria2 refuses it.
    private func act(_ params: inout Params, _ change: StateChange) throws -> String {
        let target = try params.target()
        let item = try snapshot(target)
        // A tree's: to its files or its walk (TreeRow.applies).
        guard item.tree?.applies(change) ?? change.applies(to: item.state) else {
            throw Failure("GID \(Self.gid(of: item)) cannot be changed: it is \(Self.status(item.state))")
        }
        _ = try manager.perform(.changing(change, target.selection))
        return Self.gid(of: item)
    }

    /// `tellWaiting` and `tellStopped`: `offset` and `num` in the view's order; a negative offset counts from
    /// the end, and then the items come last first (as aria2 and AriaNg use it).
    private func window(states: [TransferState], _ params: inout Params) throws -> [Any] {
        guard params.values.count >= 2, let offset = Self.int(params.values[0]), let count = Self.int(params.values[1]), count >= 0 else {
            throw Failure("offset and num are numbers")
        }
        let keys = Array(params.values.dropFirst(2)).first.flatMap { $0 as? [String] }
        guard count > 0 else { return [] }
        // A tree is one entry, in the list of its state (a tree with a file running is active, not waiting).
        let wanted = Set(states)
        if offset >= 0 {
            return manager.snapshot(QueueView(states: states, offset: offset, limit: count, treesAsRows: true)).items
                .filter { wanted.contains($0.state) }.map { describe($0, keys: keys) }
        }
        let total = manager.snapshot(QueueView(states: states, limit: 0, treesAsRows: true)).window?.total ?? 0
        let last = total + offset  // the first item given, counting back
        guard last >= 0 else { return [] }
        let first = max(0, last - count + 1)
        let items = manager.snapshot(QueueView(states: states, offset: first, limit: last - first + 1, treesAsRows: true)).items
        return items.reversed().filter { wanted.contains($0.state) }.map { describe($0, keys: keys) }
    }

    /// aria2's waiting list: what `tellWaiting` lists, and what `changePosition` places an item in.
    static let waitingStates: [TransferState] = [.queued, .waiting, .paused]

    /// A place in the waiting list, from its start (POS_SET), from where the item is (POS_CUR) or from its end
    /// (POS_END), kept within the list; the answer is the place the item has then, as aria2 gives it.
    private func changePosition(_ params: inout Params) throws -> Int {
        let id = try params.gid()
        guard params.values.count >= 2, let position = Self.int(params.values[0]), let how = params.values[1] as? String else {
            throw Failure("changePosition takes a GID, a position and POS_SET, POS_CUR or POS_END")
        }
        guard ["POS_SET", "POS_CUR", "POS_END"].contains(how) else { throw Failure("changePosition takes POS_SET, POS_CUR or POS_END") }
        let item = try snapshot(id)
        let origin: Placement.Origin = how == "POS_SET" ? .start : how == "POS_CUR" ? .current : .end
        let placed = try manager.perform(.place(id, Placement(origin, position, among: Set(Self.waitingStates)))).placed
        guard let placed else { throw Failure("GID \(Self.gid(id)) is not in the waiting list: it is \(Self.status(item.state))") }
        return placed
    }

    private func globalStat() -> [String: Any] {
        let snapshot = manager.snapshot(QueueView(limit: 0))
        let count = snapshot.totals.count
        let stopped = (count[.completed] ?? 0) + (count[.failed] ?? 0) + (count[.cancelled] ?? 0)
        return [
            "downloadSpeed": "\(Int64(snapshot.totals.downloadBytesPerSecond))",
            "uploadSpeed": "\(Int64(snapshot.totals.uploadBytesPerSecond))",
            "numActive": "\(count[.running] ?? 0)",
            "numWaiting": "\((count[.queued] ?? 0) + (count[.waiting] ?? 0) + (count[.paused] ?? 0))",
            "numStopped": "\(stopped)",
            "numStoppedTotal": "\(stopped + resultsTaken.load(ordering: .relaxed))",
        ]
    }

    /// Every aria2 option that has a meaning in ferry, with ferry's value, as aria2's strings (a settings dialog
    /// shows these, not its own defaults): the queue's limits and folder, the retry rules, the timeout, the user
    /// agent, the proxies and CA file the transport uses, and what ferry always does (it resumes, it never
    /// overwrites, it renames when a name is taken). Options ferry has no use for are not answered, as aria2
    /// answers none it does not know.
    func globalOptions() -> [String: Any] {
        let snapshot = manager.snapshot(QueueView(limit: 0))
        let (directory, rateLimit) = defaults.withLock { ($0.directory, $0.rateLimit) }
        let configuration = manager.configuration
        var options: [String: Any] = [
            "max-concurrent-downloads": "\(snapshot.maxConcurrent)",
            "max-overall-download-limit": "\(snapshot.downloadLimit ?? 0)",
            "max-overall-upload-limit": "\(snapshot.uploadLimit ?? 0)",
            "max-download-limit": "\(rateLimit ?? 0)",
            "max-upload-limit": "0",
            "dir": directory,
            // An add's ranges (split) are its own; without one, a single stream.
            "split": "1",
            "max-connection-per-server": "1",
            "min-split-size": "\(1 << 20)",
            "timeout": "\(Int(configuration.idleTimeout.rounded()))",
            "connect-timeout": "\(Int(configuration.idleTimeout.rounded()))",
            // aria2's tries count the first; ferry's retries do not.
            "max-tries": "\(configuration.retry.maxRetries + 1)",
            "retry-wait": "\(Int(configuration.retry.baseDelay.rounded()))",
            "max-file-not-found": "1",
            "user-agent": configuration.userAgent,
            "continue": "true",
            "always-resume": "true",
            "allow-overwrite": "false",
            "auto-file-renaming": "true",
            "check-certificate": "true",
            "check-integrity": "false",
            "remote-time": "false",
            "pause": "false",
            "enable-http-keep-alive": "true",
            "http-accept-gzip": "false",
            "follow-torrent": "false",
            "follow-metalink": "false",
        ]
        let transport = configuration.transport
        for (key, value) in [("http-proxy", transport.httpProxy), ("https-proxy", transport.httpsProxy), ("no-proxy", transport.noProxy),
                             ("ca-certificate", transport.caFile)] {
            // A proxy's login is not given away.
            if let value, !value.isEmpty { options[key] = URL(string: value).map(TerminalSafe.redactedURL) ?? TerminalSafe.sanitize(value) }
        }
        return options
    }

    /// Applies the options ferry applies and leaves the others as they are, answering OK, as aria2 answers a
    /// call with options it takes: a web UI's settings dialog sends every option it shows in one call (with
    /// `max-connection-per-server`, which ferry does not change, the whole call was refused and the
    /// `max-concurrent-downloads` beside it not applied). `getGlobalOption` then shows ferry's values, so the
    /// dialog shows what holds. A bad value of an option ferry applies refuses the call: nothing is applied.
    private func changeGlobalOptions(_ changes: [String: Any]) throws -> String {
        // Every value checked before anything is applied.
        let concurrency = try changes["max-concurrent-downloads"].map { value in
            guard let n = Self.int(value), ConcurrencyCaps.range.contains(n) else {
                throw Failure("max-concurrent-downloads: a number from 1 to \(ConcurrencyCaps.range.upperBound)")
            }
            return n
        }
        let download = try changes["max-overall-download-limit"].map { try Self.rate($0, option: "max-overall-download-limit") }
        let upload = try changes["max-overall-upload-limit"].map { try Self.rate($0, option: "max-overall-upload-limit") }
        let itemLimit = try changes["max-download-limit"].map { try Self.rate($0, option: "max-download-limit") }
        let directory = try changes["dir"].map { dir -> String in
            guard let text = dir as? String else { throw Failure("dir: a path") }
            do throws(UsageError) {
                let base = defaults.withLock { $0.directory }
                return try InputValidation.writableDirectory(NSString(string: text).expandingTildeInPath, relativeTo: base)
            } catch {
                throw Failure("dir: \(error.description)")
            }
        }
        if let concurrency {
            // The same command as the UI's + and -, and `ferry jobs`: kept for the next engine, said by `ferry jobs`.
            _ = try manager.perform(.setConcurrency(concurrency))
        }
        if download != nil || upload != nil {
            let now = manager.snapshot(QueueView(limit: 0))
            _ = try manager.perform(.setGlobalLimits(download: download ?? now.downloadLimit, upload: upload ?? now.uploadLimit))
        }
        if let itemLimit { defaults.withLock { $0.rateLimit = itemLimit } }
        if let directory { defaults.withLock { $0.directory = directory } }
        return "OK"
    }
}
