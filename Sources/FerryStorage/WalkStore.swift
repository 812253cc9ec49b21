import FerryModel
import Foundation

/// A directory of a tree's walk, as the store keeps it (`walk_dir`).
public struct WalkDirectory: Sendable, Equatable {
    public enum State: String, Sendable, Codable {
        /// Not listed yet (or listed when the engine stopped before its listing was kept: listed again).
        case pending
        case listed
        /// Its listing failed after its retries (a retry of the batch lists it again).
        case failed
        /// Its listing repeats one above it (a server's symlink loop): not walked.
        case loop
    }

    public var url: URL
    /// Below the tree's start, one safe name per directory (empty for the start).
    public var path: [String]
    /// The signatures of the listings above it (TreeWalker): a listing equal to one of them is a loop.
    public var ancestors: [String]
    public var state: State

    public init(url: URL, path: [String], ancestors: [String] = [], state: State = .pending) {
        self.url = url
        self.path = path
        self.ancestors = ancestors
        self.state = state
    }

    /// Directories are one per URL, compared decoded (`caf%C3%A9` and `caf%c3%a9` are one directory).
    public var key: String { Self.key(url) }
    public static func key(_ url: URL) -> String {
        let text = url.absoluteString
        return FileNaming.percentDecoded(text[...]) ?? text
    }
}

/// A tree's walk as the store keeps it: the job, how its directories are listed, and where it is.
public struct StoredWalk: Sendable, Equatable {
    public var job: TreeJob
    /// How its directories are listed, once the start directory told (TreeWalk.ListingMethod's name); nil before.
    public var method: String?
    public var progress: WalkProgress

    public init(job: TreeJob, method: String?, progress: WalkProgress) {
        self.job = job
        self.method = method
        self.progress = progress
    }
}

/// What one listing of a walk changes, kept in one transaction with the files it queues: a walk stopped at any
/// point finds each directory listed with its files queued, or not listed and none of them.
public struct WalkListing: Sendable {
    public var batch: Int64
    /// The directory listed (its URL), and what became of it: listed, failed, or a loop.
    public var directory: URL
    public var state: WalkDirectory.State
    /// Its subdirectories to list (one already known is not added twice).
    public var children: [WalkDirectory] = []
    /// Its files to download.
    public var specs: [TransferSpec] = []
    /// What its files were: named, already here, left alone, replacing a different copy.
    public var found = 0
    public var present = 0
    public var leftAlone = 0
    public var replacing = 0
    /// Lines for the user: files left alone and why, trouble (WalkProgress.note keeps them within its caps).
    public var leftAloneLines: [String] = []
    public var trouble: [String] = []

    public init(batch: Int64, directory: URL, state: WalkDirectory.State) {
        self.batch = batch
        self.directory = directory
        self.state = state
    }

    /// The progress after this listing (the one rule, for every store).
    public func applied(to progress: inout WalkProgress) {
        progress.pending -= 1
        switch state {
        // A loop's listing was read too (it is not walked further).
        case .listed, .loop: progress.listed += 1
        case .failed: progress.failed += 1
        case .pending: break
        }
        progress.pending += children.count
        progress.found += found
        progress.present += present
        progress.leftAlone += leftAlone
        progress.replacing += replacing
        progress.note(leftAlone: leftAloneLines, trouble: trouble)
    }
}

/// The walks of trees (`get -r`), kept with the queue.
public protocol WalkStore: Sendable {
    /// A new walk of `job` in `batch`, its start directory pending.
    func startWalk(_ job: TreeJob, batch: Int64) throws
    /// Every walk kept, oldest first, with its progress (directories counted per state).
    func walks() throws -> [StoredWalk]
    /// The directories of `batch`'s walk in `state`, in the order found.
    func walkDirectories(batch: Int64, state: WalkDirectory.State) throws -> [WalkDirectory]
    /// One listing's outcome and its files, in one transaction (all or none); the files' additions as `add`'s.
    /// nil, and nothing written, when the walk is held or gone (its batch paused, cancelled or removed while the
    /// listing was under way: no file may join it then).
    func recordListing(_ listing: WalkListing, reuse: Bool) throws -> [QueueAddition]?
    /// How the walk's directories are listed, once known.
    func setWalkMethod(batch: Int64, _ method: String) throws
    /// Held (its batch paused or cancelled): nothing more is listed until a resume or retry.
    func setWalkHeld(batch: Int64, _ held: Bool) throws
    /// The directories whose listing failed are pending again (a retry); how many.
    func retryWalk(batch: Int64) throws -> Int
    /// The walk is forgotten (its batch removed).
    func removeWalk(batch: Int64) throws
}

