import Foundation

/// `ferry get -r URL -o DIR` as the engine keeps it: a tree to walk and download into DIR (QueueCommand.walk).
/// The engine walks it (TreeWalker), durably: which directories are listed is stored with the files each listing
/// queued, so a walk stopped anywhere (a crash, `ferry stop`) goes on where it was.
public struct TreeJob: Sendable, Codable, Equatable {
    /// The directory whose tree is downloaded (its path ending in "/").
    public var root: URL
    /// Where the tree goes (absolute).
    public var directory: String
    /// Directory levels to list: 1 is the start directory alone; nil for all.
    public var depth: Int?
    public var filter: TreeFilter
    /// `--replace`: a plain file in DIR that differs from the server's is replaced even when ferry did not write it.
    public var replace: Bool
    /// What each file's download takes besides its URL, directory and name (headers, limit, segments, netrc);
    /// the listings are asked with its headers and netrc file too.
    public var template: TransferSpec
    /// What the user typed (the batch's command).
    public var typed: String
    /// `--force`: each file a new item, never one of the same transfer already queued found again.
    public var force: Bool

    public init(root: URL, directory: String, depth: Int? = nil, filter: TreeFilter = TreeFilter(), replace: Bool = false,
                template: TransferSpec, typed: String = "", force: Bool = false) {
        self.force = force
        self.root = root
        self.directory = directory
        self.depth = depth
        self.filter = filter
        self.replace = replace
        self.template = template
        self.typed = typed
    }

    /// A file's download: the template with its URL, the directory under DIR it goes to, and its name.
    public func spec(for url: URL, directory: String, name: String) -> TransferSpec {
        var spec = template
        spec.url = url
        spec.directory = directory
        spec.fileName = name
        return spec
    }
}

/// Where a tree's walk is: what the engine says of it to every surface (the tree's row, `get -r` following it).
public struct WalkProgress: Sendable, Codable, Equatable {
    public var batch: Int64
    /// Directories listed (a loop's too: its listing was read), waiting to be listed, and whose listing failed
    /// after its retries.
    public var listed: Int
    public var pending: Int
    public var failed: Int
    /// Files the listings named (those the filter takes), of them already here as the server has them, and left
    /// alone (a file ferry did not write, a symlink on the way).
    public var found: Int
    public var present: Int
    public var leftAlone: Int
    /// Of the files queued, those that replace a different copy here.
    public var replacing: Int
    /// The walk stopped with the batch (paused or cancelled): pending directories wait for a resume or a retry.
    public var held: Bool
    /// The first files left alone and why (WalkProgress.notedFiles of them; `leftAlone` counts them all).
    public var leftAloneLines: [String]
    /// Listings that failed and loops not walked, one line each (the first `notedTrouble`).
    public var trouble: [String]

    public init(batch: Int64, listed: Int = 0, pending: Int = 0, failed: Int = 0, found: Int = 0, present: Int = 0, leftAlone: Int = 0,
                replacing: Int = 0, held: Bool = false, leftAloneLines: [String] = [], trouble: [String] = []) {
        self.batch = batch
        self.listed = listed
        self.pending = pending
        self.failed = failed
        self.found = found
        self.present = present
        self.leftAlone = leftAlone
        self.replacing = replacing
        self.held = held
        self.leftAloneLines = leftAloneLines
        self.trouble = trouble
    }

    /// Every directory found is listed or failed: nothing more will join the batch.
    public var ended: Bool { pending == 0 }
    /// Files the walk queued to download.
    public var queued: Int { max(0, found - present - leftAlone) }

    /// The most lines of files left alone a walk keeps (the rest are counted), and of trouble.
    public static let notedFiles = TreeReport.named
    public static let notedTrouble = 100

    /// Keeps a listing's lines, within the caps.
    public mutating func note(leftAlone lines: [String], trouble more: [String]) {
        leftAloneLines += lines.prefix(max(0, Self.notedFiles - leftAloneLines.count))
        trouble += more.prefix(max(0, Self.notedTrouble - trouble.count))
    }

    /// What the command says of the walk once it ended, in order: the files left alone (the first of them, then
    /// how many more), the trouble, the summary.
    public var report: [String] {
        TreeReport.capped(leftAloneLines, of: leftAlone, "left alone") + trouble + [summary]
    }

    /// "12 files in 4 directories: 3 to download, 9 already here, 0 left alone".
    public var summary: String {
        let directories = listed + failed
        return "\(found) \(found == 1 ? "file" : "files") in \(directories) \(directories == 1 ? "directory" : "directories"): "
            + "\(queued) to download\(replacing > 0 ? " (\(replacing) replacing a different copy here)" : ""), \(present) already here, "
            + "\(leftAlone) left alone"
    }

    /// What `ferry list` says of a walk under way below the items: `batch 3, http://host/pub/: listing 40 dirs,
    /// 1200 files found`; nil once it ended. `tree`: where it is from (outside text: sanitized here).
    public func listLine(tree: String) -> String? {
        guard !ended, let text = rowText else { return nil }
        return "batch \(batch), \(TerminalSafe.sanitize(tree)): \(text), \(found) file\(found == 1 ? "" : "s") found"
    }

    /// What a tree's row says of its walk: `listing 40 dirs` while it goes on, `walk held` when its batch was
    /// paused, `2 dirs not listed` once it ended with listings that failed; nil for one that ended whole.
    public var rowText: String? {
        func dirs(_ count: Int) -> String { "\(count) dir\(count == 1 ? "" : "s")" }
        guard ended else { return held ? "walk held, \(dirs(pending)) to list" : "listing \(dirs(pending))" }
        return failed > 0 ? "\(dirs(failed)) not listed" : nil
    }
}

/// How a tree's command names what it did not do (`get -r`'s files left alone, `put -r`'s left out): the first
/// `named` lines, then how many more of `total`.
public enum TreeReport {
    public static let named = 20

    public static func capped(_ lines: [String], of total: Int? = nil, _ what: String) -> [String] {
        let total = total ?? lines.count
        return Array(lines.prefix(named)) + (total > named ? ["and \(total - named) more \(what)"] : [])
    }
}
