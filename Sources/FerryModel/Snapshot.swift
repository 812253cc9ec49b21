import Foundation

/// An immutable picture of one item, taken under the manager's lock; what a UI or reporter draws from.
public struct TransferSnapshot: Sendable, Identifiable, Equatable, Codable {
    public var id: TransferID
    public var spec: TransferSpec
    public var state: TransferState
    /// Bytes of the file that are done (on disk or in the write buffer).
    public var bytesDone: Int64
    /// Full size when known.
    public var bytesExpected: Int64?
    /// The name the file is saved under, once chosen.
    public var fileName: String?
    /// Final path, once the item completed.
    public var savedPath: String?
    /// Smoothed rate in bytes per second while running.
    public var bytesPerSecond: Double?
    public var eta: TimeInterval?
    /// Failed attempts counted against the retry budget.
    public var retries: Int
    public var maxRetries: Int
    public var nextRetryAt: Date?
    /// The last failure's message, for people (outside text: sanitize before showing).
    public var lastError: String?
    /// What the last failure was: what rows, aria2's errorCode, `list --json` and hooks read (never the message).
    public var failure: FailureCause?
    public var attempts: [Attempt]
    public var validators: Validators
    public var lastStatus: Int?
    /// Uploads: the server's answer (status line, a few headers, the first 64 KiB of the body), raw bytes.
    public var response: ServerResponse?
    /// The smoothed rate (bytes/s) sampled once a second while running, oldest first, at most 60 values.
    public var rateHistory: [Double] = []
    /// Segmented downloads: each range with what is done of it (on disk or on its way).
    public var segments: [SegmentState]?
    /// The item's own bandwidth limit, bytes per second (nil: none).
    public var rateLimit: Int64?
    /// The batch (the command) that last asked for the item.
    public var batch: Int64?
    /// A resumable upload's protocol, location, confirmed offset and resumptions.
    public var resumable: ResumableUpload?
    /// This row is a whole tree (QueueView.treesAsRows): its bytes, rate, ETA and state are its files' sums
    /// (TreeRow), its id and spec its first file's in the view.
    public var tree: TreeRow?

    public init(
        id: TransferID, spec: TransferSpec, state: TransferState, bytesDone: Int64 = 0, bytesExpected: Int64? = nil,
        fileName: String? = nil, savedPath: String? = nil, bytesPerSecond: Double? = nil, eta: TimeInterval? = nil,
        retries: Int = 0, maxRetries: Int = 5, nextRetryAt: Date? = nil, lastError: String? = nil,
        failure: FailureCause? = nil, attempts: [Attempt] = [], validators: Validators = Validators(), lastStatus: Int? = nil,
        response: ServerResponse? = nil, rateHistory: [Double] = [], segments: [SegmentState]? = nil
    ) {
        self.id = id
        self.spec = spec
        self.state = state
        self.bytesDone = bytesDone
        self.bytesExpected = bytesExpected
        self.fileName = fileName
        self.savedPath = savedPath
        self.bytesPerSecond = bytesPerSecond
        self.eta = eta
        self.retries = retries
        self.maxRetries = maxRetries
        self.nextRetryAt = nextRetryAt
        self.lastError = lastError
        self.failure = failure
        self.attempts = attempts
        self.validators = validators
        self.lastStatus = lastStatus
        self.response = response
        self.rateHistory = rateHistory
        self.segments = segments
    }

    /// `Float(totalBytesWritten) / Float(totalBytesExpected)`; nil when the size is unknown.
    public var progress: Float? {
        guard let bytesExpected, bytesExpected > 0 else { return nil }
        return Float(bytesDone) / Float(bytesExpected)
    }

    /// The last failure's few words for a row (`HTTP 404`, `refused`), from its kind; nil without one.
    public var failureWords: String? {
        guard let failure else { return nil }
        return failure.words(message: lastError.map { TerminalSafe.sanitize($0) })
    }

    /// The retries spent, of how many: `2/5`, and past the count, while a server or link that is away is waited
    /// out (RetryPolicy.patience), `6 (past 5: waiting the server out)`.
    public var retryCount: String { Self.retryWords(retries, of: maxRetries) }

    /// Retry `number` of `max` in words (`2/5`; past the count, a failure waited out: RetryPolicy.patience).
    public static func retryWords(_ number: Int, of max: Int) -> String {
        number <= max ? "\(number)/\(max)" : "\(number) (past \(max): waiting the server out)"
    }

    /// A name to show before the real one is known.
    public var displayName: String { Self.displayName(spec: spec, fileName: fileName) }

    /// What moves while it runs (ItemProgress).
    public var itemProgress: ItemProgress {
        ItemProgress(id: id, bytesDone: bytesDone, bytesExpected: bytesExpected, bytesPerSecond: bytesPerSecond, eta: eta,
                     rateHistory: rateHistory.isEmpty ? nil : rateHistory, segments: segments)
    }

    /// Whether `other` differs from this item only in what moves while it runs.
    public func differsOnlyInProgress(from other: TransferSnapshot) -> Bool {
        with(other.itemProgress) == other
    }

    /// The item with `progress` in place of its own.
    public func with(_ progress: ItemProgress) -> TransferSnapshot {
        var item = self
        item.bytesDone = progress.bytesDone
        item.bytesExpected = progress.bytesExpected
        item.bytesPerSecond = progress.bytesPerSecond
        item.eta = progress.eta
        item.rateHistory = progress.rateHistory ?? []
        item.segments = progress.segments
        return item
    }

    /// The name a filter looks at besides the URL: an upload's source, or the download's file name once
    /// known (before that, the name is the end of the URL).
    public static func knownName(spec: TransferSpec, fileName: String?) -> String? {
        spec.upload?.primarySource?.displayName ?? fileName
    }

    /// An item's name in lists: an upload's source, else the download's file name as far as it is known.
    public static func displayName(spec: TransferSpec, fileName: String?) -> String {
        displayName(url: spec.url, knownName: knownName(spec: spec, fileName: fileName))
    }

    /// The same from the URL and the known name (knownName), as the store keeps them.
    public static func displayName(url: URL, knownName: String?) -> String {
        knownName ?? FileNaming.filename(fromURL: url) ?? url.host ?? "?"
    }
}

/// A tree (the batch one `get -r` or `put -r` queued) as one row: how many files it has and where they are.
/// The row's bytes are the sums of its files' (those of unknown size are left out of the total and counted).
public struct TreeRow: Sendable, Equatable, Codable {
    public var batch: Int64
    /// Where the tree is from: the start URL (no credentials) or the local directory sent.
    public var label: String
    /// Files in the batch, per state.
    public var files: [TransferState: Int]
    /// Files whose size is not known yet.
    public var sizesUnknown: Int
    /// Its walk (`get -r`), while the engine knows it: how many directories are still to list.
    public var walk: WalkProgress?
    /// The tree's own limit (Batch.rateLimit), shared by its files; nil: none.
    public var rateLimit: Int64?

    public init(batch: Int64, label: String, files: [TransferState: Int], sizesUnknown: Int = 0) {
        self.batch = batch
        self.label = label
        self.files = files
        self.sizesUnknown = sizesUnknown
    }

    public var count: Int { files.values.reduce(0, +) }

    /// The tree's name in a row: the last directory of where it is from, with a slash (`pub/`; a server's
    /// root: its host). Outside text: sanitize before showing.
    public var name: String {
        if let url = URL(string: label), url.scheme != nil {
            let last = url.lastPathComponent
            return (last.isEmpty || last == "/" ? url.host ?? label : last) + "/"
        }
        let last = (label as NSString).lastPathComponent
        return (last.isEmpty ? label : last) + (last == "/" ? "" : "/")
    }
    public var done: Int { files[.completed, default: 0] }

    /// The tree's state, from its files': running while any runs, then waiting to retry, queued, paused; with
    /// none of those left, failed if any failed, cancelled if any was, else completed. An action on the row acts
    /// on the whole batch as on an item in this state (a pause pauses what has not finished).
    public static func state(of files: [TransferState: Int]) -> TransferState {
        let order: [TransferState] = [.running, .waiting, .queued, .paused, .failed, .cancelled, .completed]
        return order.first { files[$0, default: 0] > 0 } ?? .completed
    }

    /// The tree's state from its files' (TreeRow.state(of:)).
    public var state: TransferState { Self.state(of: files) }

    /// Files that failed or were cancelled: what a retry takes up again with the listings that failed.
    public var unfinished: Int { files[.failed, default: 0] + files[.cancelled, default: 0] }

    /// Whether `change` does something to the tree: to its files, as to an item in the tree's state, or to its
    /// walk (a pause or cancel holds a walk under way, a resume lets a held one go on, a retry lists again what
    /// failed). The one rule of the row's keys and aria2's calls on a tree.
    public func applies(_ change: StateChange) -> Bool {
        let underWay = walk.map { !$0.ended } ?? false
        let held = walk?.held ?? false
        switch change {
        case .pause, .cancel: return change.applies(to: state) || (underWay && !held)
        case .resume: return change.applies(to: state) || (underWay && held)
        case .retry: return unfinished > 0 || (walk?.failed ?? 0) > 0
        }
    }

    /// The files in words, for the row: `120/2,000 files`, `3 failed` when some did.
    public var filesText: String {
        var text = "\(done)/\(count) file\(count == 1 ? "" : "s")"
        if let failed = files[.failed], failed > 0 { text += ", \(failed) failed" }
        return text
    }
}

/// What a server answered to an upload. Untrusted: sanitize before showing.
public struct ServerResponse: Sendable, Equatable, Codable {
    public var status: Int
    public var headers: [HTTPHeader]
    /// The first `ServerResponse.bodyLimit` bytes of the body.
    public var body: Data
    /// The body's full length as received (may exceed what is kept).
    public var bodyLength: Int64

    public static let bodyLimit = 64 * 1024

    public init(status: Int, headers: [HTTPHeader], body: Data, bodyLength: Int64) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyLength = bodyLength
    }

    public var truncated: Bool { bodyLength > Int64(body.count) }
}

public struct QueueTotals: Sendable, Equatable, Codable {
    public var count: [TransferState: Int] = [:]
    public var downloadBytesPerSecond: Double = 0
    public var uploadBytesPerSecond: Double = 0
    /// The highest id in the queue (nil from an engine that does not say): what a rule marked now covers, so
    /// that items added after it are not taken by it.
    public var lastID: Int64?
    /// Of the running items, those finishing: their bodies in, their files being synced and published; they hold
    /// no connection, so they are not among the transfers at once (nil from an engine that does not say).
    public var finishing: Int?
    public init() {}

    /// The items per state among `items`.
    public static func counting(_ items: [TransferSnapshot]) -> [TransferState: Int] {
        items.reduce(into: [:]) { $0[$1.state, default: 0] += 1 }
    }
}

extension QueueSnapshot {
    /// The whole queue's items per state: the engine's counts when it sends a window, else counted here.
    public var counts: [TransferState: Int] { window == nil ? QueueTotals.counting(items) : totals.count }
}

/// Everything a front end needs for one frame. `version` changes whenever a state, order or setting changed.
public struct QueueSnapshot: Sendable, Equatable, Codable {
    public var version: UInt64
    public var items: [TransferSnapshot]
    public var totals: QueueTotals
    public var maxConcurrent: Int
    public var maxPerHost: Int
    /// The global bandwidth limits in force, bytes per second (nil: none).
    public var downloadLimit: Int64?
    public var uploadLimit: Int64?
    /// When `items` is a window of a view (QueueView): where it starts in the view and how many rows the view
    /// has. nil: `items` is the whole queue.
    public var window: QueueWindow?
    /// The trees' walks the engine knows (`get -r`; a follower waits for its own to end).
    public var walks: [WalkProgress] = []

    /// What a frame drawn from this snapshot depends on, cheaply: the engine's version, and for a window which
    /// rows it holds (scrolling or filtering brings new rows of an unchanged queue).
    public struct Shown: Equatable, Sendable {
        var version: UInt64
        var window: QueueWindow?
        var rows: Int
        var first: TransferID?
        var last: TransferID?
    }

    public var shown: Shown {
        Shown(version: version, window: window, rows: items.count, first: items.first?.id, last: items.last?.id)
    }

    public init(version: UInt64, items: [TransferSnapshot], totals: QueueTotals, maxConcurrent: Int, maxPerHost: Int) {
        self.version = version
        self.items = items
        self.totals = totals
        self.maxConcurrent = maxConcurrent
        self.maxPerHost = maxPerHost
    }
}

/// What moves while an item runs, apart from its state: a change of these alone goes to a client as an
/// ItemProgress (a few numbers), not the whole item again.
public struct ItemProgress: Sendable, Equatable, Codable {
    public var id: TransferID
    public var bytesDone: Int64
    public var bytesExpected: Int64?
    public var bytesPerSecond: Double?
    public var eta: TimeInterval?
    public var rateHistory: [Double]?
    public var segments: [SegmentState]?
}
