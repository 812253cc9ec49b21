import Foundation

/// `ferry get -r URL -o DIR`: the tree under URL walked (TreeWalk), each file it found decided against DIR
/// (TreeSync), and what is to be downloaded as specs of one batch, keeping the tree's layout.
public struct TreePlan: Sendable {
    /// One per file to download, in the order the walk found them.
    public var specs: [TransferSpec] = []
    public var found = 0
    public var listed = 0
    /// Files already in DIR with the server's size and time.
    public var present = 0
    /// Of `specs`, those that replace an older copy (the server's file changed).
    public var replacing = 0
    /// Files left as they are, and why (one line each).
    public var leftAlone: [String] = []
    /// Listings that failed after their retries, and loops not walked (one line each).
    public var trouble: [String] = []
    /// Whether any listing failed: the tree is not known whole.
    public var incomplete = false

    /// What the command says of the plan, in order: the first files left alone, the trouble, the summary.
    public var report: [String] { TreeReport.capped(leftAlone, "left alone") + trouble + [summary] }

    /// "12 files in 4 directories: 3 to download, 9 already here, 0 left alone".
    public var summary: String {
        "\(found) \(found == 1 ? "file" : "files") in \(listed) \(listed == 1 ? "directory" : "directories"): "
            + "\(specs.count) to download\(replacing > 0 ? " (\(replacing) replacing a different copy here)" : ""), \(present) already here, "
            + "\(leftAlone.count) left alone"
    }
}

public enum TreeGet {
    /// Walks `scope`'s tree and decides each file against `directory` (absolute). `spec` makes a file's
    /// download from its URL, the directory under DIR it goes to, and its name. `replacesAnyFile`: TreeSync's.
    public static func plan(_ scope: TreeScope, into directory: String, options: TreeWalk.Options, replacesAnyFile: Bool = false,
                            spec: (URL, String, String) -> TransferSpec) async -> TreePlan {
        let walk = TreeWalk(scope: scope, options: options)
        let outcome = await walk.walk()
        var plan = TreePlan()
        plan.found = outcome.files.count
        plan.listed = outcome.listed
        var sync = TreeSync(directory: directory, replacesAnyFile: replacesAnyFile)
        for file in outcome.files {
            switch await sync.decide(file, facts: walk.remoteFacts) {
            case let .fetch(into, name, mirror, replaces):
                var made = spec(file.place.url, into, name)
                made.mirror = mirror
                plan.specs.append(made)
                if replaces { plan.replacing += 1 }
            case .present: plan.present += 1
            case let .leftAlone(reason): plan.leftAlone.append("\(TerminalSafe.sanitize(file.place.relative)): \(reason)")
            }
        }
        for (url, reason) in outcome.failed {
            plan.trouble.append("cannot list \(TerminalSafe.redactedURL(url)): \(reason)")
        }
        plan.incomplete = !outcome.failed.isEmpty
        for loop in outcome.loops {
            plan.trouble.append("\(TerminalSafe.sanitize(loop))/ lists a directory above it again (a symlink loop): not walked")
        }
        return plan
    }
}

/// How a tree's command names what it did not do: the first 20 lines, then how many more.
enum TreeReport {
    static let named = 20

    static func capped(_ lines: [String], _ what: String) -> [String] {
        Array(lines.prefix(named)) + (lines.count > named ? ["and \(lines.count - named) more \(what)"] : [])
    }
}
