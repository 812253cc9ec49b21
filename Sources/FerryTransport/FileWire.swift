import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a protocol of remote files (sftp, scp, ftp) adds to a transfer on libcurl (CurlTransfer carries the
/// bytes, the limits and the delivery): the steps of each request, what the remote file's size and time say about
/// a resume, the answer URLSession gets, and the failures every such protocol shares, in ferry's words. What is
/// a protocol's own (where and how it connects, logs in and is trusted; its own failures) is its part
/// (FileProtocolPart: SSHPart, FTPPart).
///
/// The engine asks every scheme in HTTP's terms (a GET with `Range` and `If-Range`, a PUT with a body, a HEAD),
/// and gets HTTP's answers: the rules of a resume stay in one place (ResumeRule). The remote file's validator is
/// its size and modification time (`ETag: "SIZE-MTIME"`, and `Last-Modified`): a resume asks with it, and a file
/// that changed since is sent whole (`200`), as a server whose `If-Range` does not match sends it; the engine
/// then starts over and says so. A protocol without ranges (scp): a resume is a start over, its answers offer no
/// ranges, and a segmented download never uses it.
final class FileWire {

    typealias Ask = FileRequest.Ask

    private enum Step {
        /// The remote file's size and time, before a range is asked or to answer a HEAD.
        case stat
        /// The body.
        case transfer
        /// After an upload, the remote file's size, asked where the protocol cannot tell a cut from the end
        /// (FileProtocolPart.checksUploadedSize): `expected` is what it must be.
        case verify(expected: Int64)
    }

    /// What was asked (the ask, its URL and scheme, the .netrc login).
    private let request: FileRequest
    private var scheme: TransferScheme { request.scheme }
    private var url: URL { request.url }
    private var ask: Ask { request.ask }
    private let part: any FileProtocolPart
    private var step: Step
    /// The answer for URLSession, made before the body (after a stat) or at its first byte, is handed over once.
    private var answered = false
    /// An upload's whole length once it is written (where it starts plus its body); nil when the body's is unknown.
    private var uploadLength: Int64?
    /// Where the transfer step starts and ends in the file (`RESUME_FROM`, `RANGE`); none for the whole file.
    private var range: (from: Int64, end: Int64?)?
    /// The part for `request`'s scheme; nil for http(s).
    init?(request: URLRequest, settings: TransportSettings) {
        guard let asked = FileRequest(request: request) else { return nil }
        self.request = asked
        part = asked.scheme.overSSH ? SSHPart(url: asked.url, settings: settings.ssh, netrc: asked.netrc)
            : FTPPart(url: asked.url, netrc: asked.netrc, settings: settings)
        switch asked.ask {
        case .head: step = .stat
        case .list, .makeDirectory: step = .transfer
        case let .get(from, end, _) where part.offersRanges && (from > 0 || end != nil): step = .stat
        case .get where !part.knowsTheFileWhenTheBodyStarts: step = .stat
        default: step = .transfer
        }
    }

    // MARK: Steps (transport thread)

    /// What libcurl hands over in this step is not the file: a stat's (ftp writes the SIZE and MDTM it asked as
    /// `Content-Length:` and `Last-Modified:` lines into the body, as `curl -I` prints them).
    var dropsBody: Bool {
        switch step {
        case .stat, .verify: true
        case .transfer: false
        }
    }

    /// Why the request cannot go out at all (FileRequest.refusal); nil when it can.
    var refusal: (FailureKind, String)? { request.refusal }

    /// Sets the step's options on a new handle (the carrier set the URL, the callbacks and the timeouts).
    /// `bodyLength`: an upload's length from where it starts, nil when unknown.
    func configure(_ easy: UnsafeMutableRawPointer, bodyLength: Int64?) {
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(easy, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(easy, option, value) }
        part.configure(easy)
        set(FERRY_CURLOPT_FILETIME, 1)
        switch (step, ask) {
        case (.stat, _):
            set(FERRY_CURLOPT_NOBODY, 1)
        case (.verify, _):
            // SIZE only (no MDTM): one command on the connection the upload used.
            set(FERRY_CURLOPT_NOBODY, 1)
            set(FERRY_CURLOPT_FILETIME, 0)
        case (.transfer, .makeDirectory):
            set(FERRY_CURLOPT_NOBODY, 1)
            if scheme.overSSH {
                quote = ferry_curl_slist_append(nil, makeDirectoryCommand)
                _ = ferry_curl_easy_setopt_pointer(easy, FERRY_CURLOPT_QUOTE, quote)
            } else {
                // ftp: libcurl walks into the directory (CWD by CWD) and makes what is missing (MKD), relative to
                // where the login starts even on a connection a listing left elsewhere (a quoted MKD is not).
                set(FERRY_CURLOPT_FTP_CREATE_MISSING_DIRS, 1)
            }
        case let (.transfer, .put(from)):
            set(FERRY_CURLOPT_UPLOAD, 1)
            uploadLength = bodyLength.map { from + $0 }
            _ = ferry_curl_easy_setopt_offset(easy, FERRY_CURLOPT_INFILESIZE_LARGE, uploadLength ?? -1)
            if from > 0 {
                _ = ferry_curl_easy_setopt_offset(easy, FERRY_CURLOPT_RESUME_FROM_LARGE, from)
                _ = ferry_curl_easy_body_starts_at_offset(easy)
            }
        case (.transfer, _):
            guard let range else { break }
            if let end = range.end {
                set(FERRY_CURLOPT_RANGE, "\(range.from)-\(end - 1)")
            } else if range.from > 0 {
                _ = ferry_curl_easy_setopt_offset(easy, FERRY_CURLOPT_RESUME_FROM_LARGE, range.from)
            }
        }
    }

    /// The command list a directory's making sends (freed with the wire).
    private var quote: UnsafeMutableRawPointer?

    deinit {
        if let quote { ferry_curl_slist_free_all(quote) }
    }

    /// sftp: `mkdir "PATH"` (libcurl's quoting: a backslash and `"` escaped; a `/~/` path is the home's).
    private var makeDirectoryCommand: String {
        var path = url.path(percentEncoded: false)
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        if path.hasPrefix("/~/") { path = String(path.dropFirst(3)) }
        let quoted = path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "mkdir \"\(quoted)\""
    }

    /// What a step's end leads to.
    enum Next {
        /// The next step, on a new handle (the answer, if any, is handed over first).
        case next(HTTPURLResponse?)
        /// The transfer is over: the answer, if not handed over yet.
        case done(HTTPURLResponse?)
        case failed(URLError.Code, FailureKind, String)
    }

    /// The step ended with libcurl's `result`.
    func ended(_ easy: UnsafeMutableRawPointer, result: Int, curlMessage: String, osError: Int32, idleTimeout: TimeInterval) -> Next {
        if case .makeDirectory = ask, result == FERRY_CURLE_OK || result == FERRY_CURLE_QUOTE_ERROR {
            return .done(takeAnswer(status: result == FERRY_CURLE_OK ? 201 : 405, headers: ["Content-Length": "0"]))
        }
        guard result == FERRY_CURLE_OK else {
            if case .head = ask, result == FERRY_CURLE_REMOTE_FILE_NOT_FOUND {
                // Asked whether the file is there: it is not (an upload then starts at 0).
                return .done(takeAnswer(status: 404, headers: [:]))
            }
            let (code, kind, message) = describe(result, curlMessage: curlMessage, osError: osError, idleTimeout: idleTimeout)
            return .failed(code, kind, message)
        }
        switch step {
        case .stat:
            let found = remoteFile(easy)
            if case .head = ask {
                return .done(takeAnswer(status: 200, headers: FileRequest.headers(size: found.size, mtime: found.mtime, ranges: part.offersRanges)))
            }
            guard case let .get(from, end, ifRange) = ask else { return .done(nil) }
            step = .transfer
            let (answer, fetch) = plan(from: from, end: end, ifRange: ifRange, size: found.size, mtime: found.mtime)
            return fetch ? .next(answer) : .done(answer)
        case let .verify(expected):
            // A server that does not say the size (no SIZE) is taken at its word, as before.
            if let size = remoteFile(easy).size, size != expected {
                return .failed(.networkConnectionLost, .connectionLost,
                               "\(host) kept \(size) of the \(expected) bytes of \(path) though it said the upload ended well "
                                   + "(its data connection was cut short)")
            }
            return .done(takeAnswer(status: 201, headers: ["Content-Length": "0"]))
        case .transfer:
            switch ask {
            case .put:
                if part.checksUploadedSize, let uploadLength {
                    step = .verify(expected: uploadLength)
                    return .next(nil)
                }
                return .done(takeAnswer(status: 201, headers: ["Content-Length": "0"]))
            case .get, .head, .list, .makeDirectory, .unsupported:
                return .done(answerBeforeBody(easy))
            }
        }
    }

    /// After a stat, what to fetch and the answer that says so (FileRequest.plan).
    private func plan(from: Int64, end: Int64?, ifRange: String?, size: Int64?, mtime: Int64?) -> (HTTPURLResponse?, fetch: Bool) {
        let planned = FileRequest.plan(from: from, end: end, ifRange: ifRange, size: size, mtime: mtime, ranges: part.offersRanges)
        range = planned.range
        return (takeAnswer(status: planned.status, headers: planned.headers), planned.fetch)
    }

    /// The answer for a download without a stat, made when the first byte arrives (or at its end: an empty file):
    /// by then libcurl has the file's size and time. Nil once handed over.
    func answerBeforeBody(_ easy: UnsafeMutableRawPointer) -> HTTPURLResponse? {
        guard !answered else { return nil }
        if case .list = ask { return takeAnswer(status: 200, headers: ["Content-Type": DirectoryLines.contentType]) }
        let found = remoteFile(easy)
        return takeAnswer(status: 200, headers: FileRequest.headers(size: found.size, mtime: found.mtime, ranges: part.offersRanges))
    }

    private func takeAnswer(status: Int, headers: [String: String]) -> HTTPURLResponse? {
        guard !answered else { return nil }
        answered = true
        var headers = headers
        if let peer = part.peer { headers[TransferScheme.hostKeyHeader] = peer }
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: headers)
    }

    /// The file's size and time as libcurl found them; nil where the server did not say.
    private func remoteFile(_ easy: UnsafeMutableRawPointer) -> (size: Int64?, mtime: Int64?) {
        var size: Int64 = -1
        var mtime: Int64 = -1
        _ = ferry_curl_easy_getinfo_offset(easy, FERRY_CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &size)
        _ = ferry_curl_easy_getinfo_offset(easy, FERRY_CURLINFO_FILETIME_T, &mtime)
        return (size >= 0 ? size : nil, mtime >= 0 ? mtime : nil)
    }

    // MARK: Failures

    private var host: String { hostDescription(url) }
    private var path: String { TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path) }

    private func describe(_ result: Int, curlMessage: String, osError: Int32, idleTimeout: TimeInterval) -> (URLError.Code, FailureKind, String) {
        let detail = curlMessage.isEmpty ? String(cString: ferry_curl_easy_strerror(Int32(result))) : curlMessage
        if let own = part.describe(result, detail: detail, ask: ask) { return own }
        switch result {
        case FERRY_CURLE_REMOTE_FILE_NOT_FOUND:
            return request.noSuchFile
        case FERRY_CURLE_REMOTE_ACCESS_DENIED:
            return request.permissionDenied(detail)
        case FERRY_CURLE_REMOTE_DISK_FULL:
            return (.cannotWriteToFile, .diskFull, "the disk (or the quota) on \(host) is full: \(path)")
        case FERRY_CURLE_UPLOAD_FAILED:
            return (.cannotWriteToFile, .noPermission, "\(host) refused the upload to \(path): \(detail)")
        default:
            return TransportError.describe(result, curlMessage: curlMessage, osError: osError, url: url, bodyFailure: nil,
                                           idleTimeout: idleTimeout)
        }
    }
}

/// A protocol's own part of a FileWire: where and how it connects, logs in and is trusted, and the failures only
/// it has.
protocol FileProtocolPart: AnyObject {
    /// Byte ranges can be asked (sftp, ftp; not scp).
    var offersRanges: Bool { get }
    /// libcurl knows the file's size and time once its body starts (sftp, scp); otherwise a download asks first (ftp).
    var knowsTheFileWhenTheBodyStarts: Bool { get }
    /// An upload's end cannot be told from a cut (ftp: the data connection's close is the end of the file, and a
    /// server that lost the rest still answers 226): the remote file's size is asked after it, and a short one
    /// is a failure (retried, appending the rest) rather than a done item. sftp acknowledges each write; scp says
    /// the length first.
    var checksUploadedSize: Bool { get }
    /// Sets the connection's options on a step's handle: the protocols allowed, where to connect, the login, trust.
    func configure(_ easy: UnsafeMutableRawPointer)
    /// The server's identity as checked for this connection (an SSH host key's fingerprint); nil: none checked.
    var peer: String? { get }
    /// A failure in the protocol's own words; nil for one every file protocol has (FileWire says those).
    func describe(_ result: Int, detail: String, ask: FileWire.Ask) -> (URLError.Code, FailureKind, String)?
}
