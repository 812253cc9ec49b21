import Foundation

/// `ferry put -r DIR URL/`: the tree under DIR uploaded to a WebDAV server, keeping its layout: each directory
/// the server lacks made first (`MKCOL`, parents first), then each file a `PUT` item of one batch (offering the
/// resumable-upload protocol as a single put does). A re-run skips a file the server has with the same size
/// (its PROPFIND listing says). A server that answers no PROPFIND (no WebDAV) is refused before any byte is sent.
public struct TreeUploadPlan: Sendable {
    /// One per file to upload, directories first to last as they were walked.
    public var specs: [TransferSpec] = []
    public var found = 0
    public var present = 0
    public var directoriesMade = 0
    /// What was not uploaded and why (a symlink, a directory the server would not make), one line each.
    public var leftOut: [String] = []
    /// A directory could not be made or listed: its files are not uploaded (the command ends with 1).
    public var incomplete = false

    /// "12 files: 3 to upload, 9 already there, 2 directories made, 0 left out".
    /// What the command says of the plan: the first files left out, then the summary.
    public var report: [String] { TreeReport.capped(leftOut, "left out") + [summary] }

    public var summary: String {
        "\(found) \(found == 1 ? "file" : "files"): \(specs.count) to upload, \(present) already there, "
            + "\(directoriesMade) \(directoriesMade == 1 ? "directory" : "directories") made, \(leftOut.count) left out"
    }
}

public enum TreePut {
    /// Walks `source` (absolute) and the server's tree under `root` (its path ending in "/"), makes the
    /// directories the server lacks, and gives the files' uploads of those `filter` takes. `spec` makes one file's
    /// upload to its URL.
    public static func plan(_ source: String, to root: URL, requests: TreeRequests, filter: TreeFilter = TreeFilter(),
                            spec: (String, URL) throws -> TransferSpec) async throws -> TreeUploadPlan {
        guard let scope = TreeScope(root: root) else { throw UsageError("put -r uploads to WebDAV servers over http(s), and over sftp and ftp") }
        var plan = TreeUploadPlan()
        // The server must speak WebDAV, and the start directory must be there or be made, before anything is sent.
        var rootListing: [String: ListingEntry]
        switch try await remoteListing(scope.root, path: [], scope: scope, requests: requests) {
        case let .some(listing):
            rootListing = listing
        case .none:
            try await makeDirectory(scope.root, requests: requests)
            plan.directoriesMade += 1
            rootListing = [:]
        }
        // Breadth first: a directory is made before what is in it. With --include, one the server lacks is made only
        // once a file in it is taken (TreeFilter.makesEveryDirectory), its parents first: `unmade` holds those.
        var pending: [(local: String, path: [String], url: URL, remote: [String: ListingEntry]?)] = [(source, [], scope.root, rootListing)]
        var unmade: [String: (url: URL, parent: String, relative: String)] = [:]
        var unmakeable: Set<String> = []
        /// The directory `local` on the server, made with its parents where they are not yet; false when it could not be.
        func made(_ local: String) async -> Bool {
            guard !unmakeable.contains(local) else { return false }
            guard let wanted = unmade[local] else { return true }
            guard await made(wanted.parent) else {
                unmakeable.insert(local)
                return false
            }
            do throws(UsageError) {
                try await makeDirectory(wanted.url, requests: requests)
                plan.directoriesMade += 1
                unmade[local] = nil
                return true
            } catch {
                plan.leftOut.append("\(TerminalSafe.sanitize(wanted.relative))/: \(error.description)")
                plan.incomplete = true
                unmakeable.insert(local)
                return false
            }
        }
        while !pending.isEmpty {
            let directory = pending.removeFirst()
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.local)) ?? []).sorted()
            for name in names {
                let local = directory.local + "/" + name
                let relative = (directory.path + [name]).joined(separator: "/")
                var info = stat()
                guard lstat(local, &info) == 0 else { continue }
                let url = URL(string: DirectoryListing.encodedSegment(name), relativeTo: directory.url)!.absoluteURL
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    let there = directory.remote?[name]
                    let child = url.appendingPathComponent("", isDirectory: true)
                    var remote: [String: ListingEntry]?
                    if there?.isDirectory == true {
                        do throws(UsageError) {
                            remote = try await remoteListing(child, path: directory.path + [name], scope: scope, requests: requests)
                        } catch {
                            plan.leftOut.append("\(TerminalSafe.sanitize(relative))/: \(error.description)")
                            plan.incomplete = true
                            continue
                        }
                    } else if !filter.makesEveryDirectory {
                        unmade[local] = (child, directory.local, relative)
                    } else {
                        do throws(UsageError) {
                            try await makeDirectory(child, requests: requests)
                            plan.directoriesMade += 1
                        } catch {
                            plan.leftOut.append("\(TerminalSafe.sanitize(relative))/: \(error.description)")
                            plan.incomplete = true
                            continue
                        }
                    }
                    pending.append((local, directory.path + [name], child, remote ?? [:]))
                case S_IFREG:
                    guard filter.wants(relative) else { continue }
                    plan.found += 1
                    if let there = directory.remote?[name], !there.isDirectory, there.size == Int64(info.st_size) {
                        plan.present += 1
                        continue
                    }
                    // Its directory is on the server, or made now (a failure is said once, with the directory).
                    guard await made(directory.local) else { continue }
                    var upload = try spec(local, url)
                    upload.mirror = .init(size: Int64(info.st_size), modified: Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
                    plan.specs.append(upload)
                default:
                    plan.leftOut.append("\(TerminalSafe.sanitize(relative)): not a plain file or directory (a symlink is not followed)")
                }
            }
        }
        return plan
    }

    /// The server's entries of the directory at `url`, by name; nil when it is not there (404). Anything but a
    /// listing or a 404 is a refusal naming the answer: a server without WebDAV answers 405 or 501.
    static func remoteListing(_ url: URL, path: [String], scope: TreeScope, requests: TreeRequests) async throws(UsageError) -> [String: ListingEntry]? {
        // sftp and ftp: the directory's `ls -l` lines (FileWire's LIST); a missing one is an error there, not a 404.
        let method: TreeWalk.ListingMethod = TransferScheme(url)?.isHTTP == true ? .webdav : .lines
        let answer: TreeRequests.Answer
        switch await requests.send(url, method: method.verb, extra: method.headers) {
        case let .failure(failure) where failure.missing: return nil
        case let .failure(failure): throw UsageError("cannot reach \(TerminalSafe.redactedURL(url)): \(failure.reason)")
        case let .success(got): answer = got
        }
        switch answer.status {
        case method.listed:
            guard let listed = method.entries(answer, page: url) else {
                throw UsageError("the WebDAV listing of \(TerminalSafe.redactedURL(url)) could not be read")
            }
            var entries: [String: ListingEntry] = [:]
            for (place, entry) in scope.children(of: path, in: listed) {
                entries[place.path.last!] = entry
            }
            return entries
        case 404:
            return nil
        case 401, 403:
            throw UsageError("\(TerminalSafe.redactedURL(url)) refused the listing (\(answer.status)): check the login")
        default:
            throw UsageError("\(TerminalSafe.redactedURL(url)) does not take directories: a WebDAV PROPFIND answered \(answer.status) "
                             + "(put -r uploads to WebDAV servers); nothing was sent")
        }
    }

    /// MKCOL: 201 made; 405 means it is there already (RFC 4918, 9.3.1). Over sftp and ftp FileWire makes it
    /// (`mkdir`, `MKD`) and answers the same way.
    static func makeDirectory(_ url: URL, requests: TreeRequests) async throws(UsageError) {
        switch await requests.send(url, method: "MKCOL") {
        case let .failure(failure):
            throw UsageError("cannot make \(TerminalSafe.redactedURL(url)): \(failure.reason)")
        case let .success(answer) where answer.status == 201 || answer.status == 405:
            return
        case let .success(answer):
            throw UsageError("cannot make \(TerminalSafe.redactedURL(url)): MKCOL answered \(answer.status)")
        }
    }
}
