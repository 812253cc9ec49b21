import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the engine asked of a remote file (sftp, scp, ftp), in HTTP's terms, and the answers it gets in HTTP's
/// terms, whatever carries the bytes (FileWire on libcurl, SFTPTransfer over OpenSSH): the rules of a resume stay
/// in one place (ResumeRule). The remote file's validator is its size and modification time (`ETag: "SIZE-MTIME"`,
/// and `Last-Modified`): a resume asks with it, and a file that changed since is sent whole (`200`), as a server
/// whose `If-Range` does not match sends it; the engine then starts over and says so.
struct FileRequest {
    /// What the engine asked: a download (with a range or not), a stat (HEAD) or an upload (PUT with a body).
    enum Ask {
        case get(from: Int64, end: Int64?, ifRange: String?)
        case head
        case put(from: Int64)
        /// A directory's listing (`LIST` of a path ending in "/"; a tree's walk asks it): `ls -l` lines, as sftp
        /// servers and most ftp servers write them.
        case list
        /// A directory made (`MKCOL` of a path ending in "/", as WebDAV asks it; a tree's upload asks it): sftp's
        /// `mkdir`, ftp's `MKD`. Answered 201, or 405 when the server refused it (there already, or not allowed:
        /// the uploads into it then say which).
        case makeDirectory
        /// A method a file protocol has no meaning for (POST, DELETE, ...).
        case unsupported(String)
    }

    let scheme: TransferScheme
    let url: URL
    let ask: Ask
    /// A login from the user's .netrc for this host: the engine puts it in the request as HTTP Basic credentials
    /// (never stored, never shown).
    let netrc: (user: String, password: String)?

    /// The ask in `request`; nil for http(s).
    init?(request: URLRequest) {
        guard let url = request.url, let scheme = TransferScheme(url), !scheme.isHTTP else { return nil }
        self.scheme = scheme
        self.url = url
        netrc = request.value(forHTTPHeaderField: "Authorization").flatMap(Self.basicCredentials)
        let method = (request.httpMethod ?? "GET").uppercased()
        let header = { (name: String) in request.value(forHTTPHeaderField: name) }
        switch method {
        case "HEAD":
            ask = .head
        case "PUT":
            ask = .put(from: header("Content-Range").flatMap(Self.uploadOffset) ?? 0)
        case "GET":
            let asked = header("Range").flatMap(Self.byteRange)
            ask = .get(from: asked?.from ?? 0, end: asked?.end, ifRange: header("If-Range"))
        case "LIST" where url.hasDirectoryPath && scheme.listsDirectories:
            ask = .list
        case "MKCOL" where url.hasDirectoryPath && scheme.listsDirectories:
            ask = .makeDirectory
        default:
            ask = .unsupported(method)
        }
    }

    /// `bytes=N-` or `bytes=N-M`: N and one past M.
    private static func byteRange(_ header: String) -> (from: Int64, end: Int64?)? {
        let value = HTTPText.trimmed(header)
        guard value.lowercased().hasPrefix("bytes=") else { return nil }
        let ends = value.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard ends.count == 2, let from = Int64(HTTPText.trimmed(ends[0])) else { return nil }
        let last = HTTPText.trimmed(ends[1])
        if last.isEmpty { return (from, nil) }
        guard let end = Int64(last), end >= from else { return nil }
        return (from, end + 1)
    }

    /// `Basic base64(user:password)`: the user and password.
    private static func basicCredentials(_ header: String) -> (user: String, password: String)? {
        let value = HTTPText.trimmed(header)
        guard value.lowercased().hasPrefix("basic "), let data = Data(base64Encoded: String(HTTPText.trimmed(value.dropFirst(6)))),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// `bytes N-*/TOTAL` (or `bytes N-M/TOTAL`) of an upload that goes on at N.
    private static func uploadOffset(_ header: String) -> Int64? {
        let value = HTTPText.trimmed(header)
        guard value.lowercased().hasPrefix("bytes ") else { return nil }
        return value.dropFirst(6).split(separator: "-").first.flatMap { Int64(HTTPText.trimmed($0)) }
    }

    /// Why the request cannot go out at all (a method a file protocol has no meaning for, a directory); nil when it can.
    var refusal: (FailureKind, String)? {
        if case let .unsupported(method) = ask {
            return (.badURL, "\(scheme.rawValue) cannot \(TerminalSafe.sanitize(method)): it reads (GET), writes (PUT) or looks at (HEAD) a file,"
                    + " or lists or makes a directory (LIST, MKCOL; sftp and ftp)")
        }
        // A directory's name goes into a protocol command line: a line break in it would end the command.
        if case .makeDirectory = ask, url.path(percentEncoded: false).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return (.badURL, "cannot make a directory whose name holds a control character: \(TerminalSafe.redactedURL(url))")
        }
        // A path ending in / names a directory (a protocol would hand over its listing as if it were the file).
        if case .get = ask, url.hasDirectoryPath {
            return (.isDirectory, "\(TerminalSafe.redactedURL(url)) is a directory: ferry get takes a file")
        }
        return nil
    }

    // MARK: Failures every file protocol has, in ferry's words (FileWire's libcurl results, SFTPTransfer's statuses)

    private var host: String { hostDescription(url) }
    private var shownPath: String { TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path) }

    /// The file (or, for an upload, its directory) is not there.
    var noSuchFile: (URLError.Code, FailureKind, String) {
        if case .put = ask { return (.fileDoesNotExist, .noSuchFile, "no such directory on \(host) for \(shownPath)") }
        return (.fileDoesNotExist, .noSuchFile, "no such file on \(host): \(shownPath)")
    }

    /// The server refused access; `detail`: its own words, if any.
    func permissionDenied(_ detail: String?) -> (URLError.Code, FailureKind, String) {
        (.noPermissionsToReadFile, .noPermission, "permission denied on \(host): \(shownPath)" + (detail.map { " (\($0))" } ?? ""))
    }

    /// What a stat's answer leads to: the answer's status and headers, the part of the file to fetch (nil: the
    /// whole), and whether anything is fetched.
    struct Plan {
        var status: Int
        var headers: [String: String]
        var range: (from: Int64, end: Int64?)?
        var fetch: Bool
    }

    /// After a stat, what to fetch and the answer that says so (ResumeRule reads it): the range asked while the
    /// file is the one the range's validator names (`If-Range`), else the whole file; `416` and nothing to fetch
    /// at or past its end. `ranges`: the protocol can fetch a part of a file (not scp).
    static func plan(from: Int64, end: Int64?, ifRange: String?, size: Int64?, mtime: Int64?, ranges: Bool) -> Plan {
        var headers = headers(size: size, mtime: mtime, ranges: ranges)
        let unchanged = ifRange.map { asked in [headers["ETag"], headers["Last-Modified"]].contains(asked) } ?? true
        // No range to fetch (none asked, or none this protocol or file can give): the whole file.
        guard unchanged, ranges, let size, from > 0 || end != nil else {
            return Plan(status: 200, headers: headers, range: nil, fetch: true)
        }
        let last = min(end ?? size, size) - 1
        guard from < size, last >= from else {
            // The engine has the whole file (from == size, asked open-ended) or asks past its end.
            headers["Content-Range"] = "bytes */\(size)"
            headers["Content-Length"] = "0"
            return Plan(status: 416, headers: headers, range: nil, fetch: false)
        }
        headers["Content-Range"] = "bytes \(from)-\(last)/\(size)"
        headers["Content-Length"] = "\(last - from + 1)"
        return Plan(status: 206, headers: headers, range: (from, end == nil ? nil : last + 1), fetch: true)
    }

    /// The file's size and validator in HTTP's words; `ranges`: byte ranges can be asked (sftp, ftp; not scp).
    /// A file whose size the server did not say has no length and offers no ranges.
    static func headers(size: Int64?, mtime: Int64?, ranges: Bool) -> [String: String] {
        guard let size else { return mtime.map { ["Last-Modified": HTTPDate.format(Date(timeIntervalSince1970: TimeInterval($0)))] } ?? [:] }
        var headers = ["Content-Length": "\(size)"]
        if ranges { headers["Accept-Ranges"] = "bytes" }
        if let mtime {
            headers["ETag"] = "\"\(size)-\(mtime)\""
            headers["Last-Modified"] = HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(mtime)))
        }
        return headers
    }
}
