import CCurl
import CDigest
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What sftp:// and scp:// add to a transfer on libcurl (CurlTransfer carries the bytes, the limits and the
/// delivery): the SSH options of each step, what the remote file's size and time say about a resume, the answer
/// URLSession gets, and the failures in ferry's words.
///
/// The engine asks every scheme in HTTP's terms (a GET with `Range` and `If-Range`, a PUT with a body, a HEAD),
/// and gets HTTP's answers: the rules of a resume stay in one place (ResumeRule). This part says what they mean
/// over SSH. The remote file's validator is its size and modification time (`ETag: "SIZE-MTIME"`, and
/// `Last-Modified`): a resume asks with it, and a file that changed since is sent whole (`200`), as a server
/// whose `If-Range` does not match sends it; the engine then starts over and says so. scp has no ranges: a resume
/// over scp is a start over, an scp answer offers no ranges, and a segmented download never uses it.
final class SSHWire {

    /// What the engine asked: a download (with a range or not), a stat (HEAD) or an upload (PUT with a body).
    private enum Ask {
        case get(from: Int64, end: Int64?, ifRange: String?)
        case head
        case put(from: Int64)
        /// A method SSH has no meaning for (POST, DELETE, ...).
        case unsupported(String)
    }

    private enum Step {
        /// The remote file's size and time, before a range is asked or to answer a HEAD.
        case stat
        /// The body.
        case transfer
    }

    private let scheme: TransferScheme
    private let url: URL
    private let settings: SSHSettings
    private let ask: Ask
    private var step: Step
    /// The remote file as the stat found it.
    private var remote: (size: Int64, mtime: Int64?)?
    /// The answer for URLSession, made before the body (after a stat) or at its first byte; handed over once.
    private var answer: HTTPURLResponse?
    private var answered = false
    /// Where the transfer step starts and ends in the file (`RESUME_FROM`, `RANGE`); none for the whole file.
    private var range: (from: Int64, end: Int64?)?
    /// A login from the user's .netrc for this host (the engine puts it in the request as HTTP Basic credentials;
    /// never stored, never shown).
    private let netrcLogin: (user: String, password: String)?
    /// The host as the user's ssh config has it (an alias's name, port, user, keys); nil: as written.
    private let resolved: SSHHost?
    /// What libcurl's host-key check found (its callback writes it: it stays where it is).
    private let hostKey = UnsafeMutablePointer<ferry_host_key>.allocate(capacity: 1)

    init?(request: URLRequest, settings: SSHSettings) {
        guard let url = request.url, let scheme = TransferScheme(url), scheme.overSSH else { return nil }
        self.scheme = scheme
        self.url = url
        self.settings = settings
        netrcLogin = request.value(forHTTPHeaderField: "Authorization").flatMap(Self.basicCredentials)
        resolved = settings.config.flatMap { config in url.host.flatMap { SSHHostConfig.shared.resolve($0, config: config) } }
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
        default:
            ask = .unsupported(method)
        }
        switch ask {
        case .head: step = .stat
        case let .get(from, end, _) where scheme == .sftp && (from > 0 || end != nil): step = .stat
        default: step = .transfer
        }
        hostKey.initialize(to: ferry_host_key())
    }

    deinit {
        hostKey.deallocate()
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

    // MARK: Steps (transport thread)

    /// Why the request cannot go out at all (a method SSH has no meaning for); nil when it can.
    var refusal: (FailureKind, String)? {
        if case let .unsupported(method) = ask {
            return (.badURL, "\(scheme.rawValue) cannot \(TerminalSafe.sanitize(method)): it reads (GET), writes (PUT) or looks at (HEAD) a file")
        }
        // A path ending in / names a directory (libcurl would hand over its listing as if it were the file).
        if case .get = ask, url.hasDirectoryPath {
            return (.isDirectory, "\(TerminalSafe.redactedURL(url)) is a directory: ferry get takes a file")
        }
        return nil
    }

    /// Sets the step's options on a new handle (the carrier set the URL, the callbacks and the timeouts).
    /// `bodyLength`: an upload's length from where it starts, nil when unknown.
    func configure(_ easy: UnsafeMutableRawPointer, bodyLength: Int64?) {
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(easy, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(easy, option, value) }
        set(FERRY_CURLOPT_PROTOCOLS_STR, scheme.rawValue)
        if let target = connectURL { set(FERRY_CURLOPT_URL, target) }
        // An SSH server is reached directly (libcurl would take an http proxy from the environment for it).
        set(FERRY_CURLOPT_PROXY, "")
        _ = ferry_curl_easy_check_host_key(easy, settings.knownHosts, hostKey)
        if url.user == nil { set(FERRY_CURLOPT_USERNAME, login) }
        if url.password == nil, let netrcLogin { set(FERRY_CURLOPT_PASSWORD, netrcLogin.password) }
        var methods = FERRY_CURLSSH_AUTH_PUBLICKEY | FERRY_CURLSSH_AUTH_PASSWORD | FERRY_CURLSSH_AUTH_KEYBOARD
        if settings.agent { methods |= FERRY_CURLSSH_AUTH_AGENT }
        set(FERRY_CURLOPT_SSH_AUTH_TYPES, methods)
        if let key = identityFile { set(FERRY_CURLOPT_SSH_PRIVATE_KEYFILE, key) }
        set(FERRY_CURLOPT_FILETIME, 1)
        switch (step, ask) {
        case (.stat, _):
            set(FERRY_CURLOPT_NOBODY, 1)
        case let (.transfer, .put(from)):
            set(FERRY_CURLOPT_UPLOAD, 1)
            _ = ferry_curl_easy_setopt_offset(easy, FERRY_CURLOPT_INFILESIZE_LARGE, bodyLength.map { from + $0 } ?? -1)
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
            remote = found
            if case .head = ask {
                return .done(takeAnswer(status: 200, headers: headers(size: found.size, mtime: found.mtime, ranges: scheme == .sftp)))
            }
            guard case let .get(from, end, ifRange) = ask else { return .done(nil) }
            step = .transfer
            let (answer, fetch) = plan(from: from, end: end, ifRange: ifRange, size: found.size, mtime: found.mtime)
            return fetch ? .next(answer) : .done(answer)
        case .transfer:
            switch ask {
            case .put:
                return .done(takeAnswer(status: 201, headers: ["Content-Length": "0"]))
            case .get, .head, .unsupported:
                return .done(answerBeforeBody(easy))
            }
        }
    }

    /// After a stat, what to fetch and the answer that says so (ResumeRule reads it): the range asked while the
    /// file is the one the range's validator names (`If-Range`), else the whole file; `416` and nothing to fetch
    /// at or past its end.
    private func plan(from: Int64, end: Int64?, ifRange: String?, size: Int64, mtime: Int64?) -> (HTTPURLResponse?, fetch: Bool) {
        var headers = headers(size: size, mtime: mtime, ranges: true)
        let unchanged = ifRange.map { asked in [headers["ETag"], headers["Last-Modified"]].contains(asked) } ?? true
        guard unchanged else {
            range = nil
            return (takeAnswer(status: 200, headers: headers), true)
        }
        let last = min(end ?? size, size) - 1
        guard from < size, last >= from else {
            // The engine has the whole file (from == size, asked open-ended) or asks past its end.
            headers["Content-Range"] = "bytes */\(size)"
            headers["Content-Length"] = "0"
            return (takeAnswer(status: 416, headers: headers), false)
        }
        range = (from, end == nil ? nil : last + 1)
        headers["Content-Range"] = "bytes \(from)-\(last)/\(size)"
        headers["Content-Length"] = "\(last - from + 1)"
        return (takeAnswer(status: 206, headers: headers), true)
    }

    /// The answer for a download without a stat, made when the first byte arrives (or at its end: an empty file):
    /// by then libcurl has the file's size and time. Nil once handed over.
    func answerBeforeBody(_ easy: UnsafeMutableRawPointer) -> HTTPURLResponse? {
        guard !answered else { return nil }
        let found = remoteFile(easy)
        return takeAnswer(status: 200, headers: headers(size: found.size, mtime: found.mtime, ranges: scheme == .sftp))
    }

    private func takeAnswer(status: Int, headers: [String: String]) -> HTTPURLResponse? {
        guard !answered else { return nil }
        answered = true
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: headers)
    }

    private func remoteFile(_ easy: UnsafeMutableRawPointer) -> (size: Int64, mtime: Int64?) {
        var size: Int64 = -1
        var mtime: Int64 = -1
        _ = ferry_curl_easy_getinfo_offset(easy, FERRY_CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &size)
        _ = ferry_curl_easy_getinfo_offset(easy, FERRY_CURLINFO_FILETIME_T, &mtime)
        return (max(0, size), mtime >= 0 ? mtime : nil)
    }

    /// The file's size and validator in HTTP's words; `ranges`: byte ranges can be asked (sftp, not scp).
    private func headers(size: Int64, mtime: Int64?, ranges: Bool) -> [String: String] {
        var headers = ["Content-Length": "\(size)"]
        if ranges { headers["Accept-Ranges"] = "bytes" }
        if let mtime {
            headers["ETag"] = "\"\(size)-\(mtime)\""
            headers["Last-Modified"] = HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(mtime)))
        }
        return headers
    }

    // MARK: The host

    /// The URL libcurl connects to when the config names another host or port for this one; nil: the URL as it is.
    private var connectURL: String? {
        guard let resolved, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        let port = url.port ?? resolved.port.flatMap { $0 == 22 ? nil : $0 }
        guard resolved.hostname != url.host || port != url.port else { return nil }
        parts.host = resolved.hostname
        parts.port = port
        return parts.url?.absoluteString
    }

    /// The host and port connected to (known_hosts names them so).
    private var connectHost: String { resolved?.hostname ?? url.host ?? "" }
    private var connectPort: Int? { url.port ?? resolved?.port }

    /// The login name: the URL's, the .netrc's for the host, the config's, the local user's.
    private var login: String { url.user ?? netrcLogin?.user ?? resolved?.user ?? settings.user }

    /// The key file offered: the config's first that exists, else the first of the usual ones.
    private var identityFile: String? {
        let configured = (resolved?.identityFiles ?? []).map(settings.expanded)
        return configured.first { FileManager.default.isReadableFile(atPath: $0) } ?? settings.identityFile
    }

    // MARK: Failures

    private var host: String { hostDescription(url) }
    private var path: String { TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path) }

    private func describe(_ result: Int, curlMessage: String, osError: Int32, idleTimeout: TimeInterval) -> (URLError.Code, FailureKind, String) {
        let detail = curlMessage.isEmpty ? String(cString: ferry_curl_easy_strerror(Int32(result))) : curlMessage
        switch result {
        case FERRY_CURLE_PEER_FAILED_VERIFICATION where hostKey.pointee.match == 1:
            return (.serverCertificateUntrusted, .hostKeyChanged,
                    "THE HOST KEY OF \(host) HAS CHANGED: it is now \(fingerprint), not the key \(settings.knownHosts) has for it. "
                        + "Someone may be intercepting the connection, or the host's key was replaced. Nothing was sent. "
                        + "Only if you know why it changed, remove the old key (ssh-keygen -R \(knownHostsName)) and check the new one")
        case FERRY_CURLE_PEER_FAILED_VERIFICATION where hostKey.pointee.match == 2:
            return (.serverCertificateUntrusted, .hostKeyUnknown,
                    "the host key of \(host) is not known (\(fingerprint)); nothing was sent. If that is the server's key "
                        + "(ssh-keyscan\(portOption) \(connectHost) | ssh-keygen -lf - shows it), add it to \(settings.knownHosts): "
                        + "ssh-keyscan\(portOption) \(connectHost) >> \(settings.knownHosts)")
        case FERRY_CURLE_LOGIN_DENIED where identityFile.map(SSHSettings.needsPassphrase) == true:
            let key = identityFile ?? ""
            return (.userAuthenticationRequired, .loginRefused,
                    "\(host) refused the login of \(login): the key \(key) needs its passphrase, which ferry does not ask for; "
                        + "add it to an ssh-agent (ssh-add \(key)) and run ferry where SSH_AUTH_SOCK reaches that agent (tried: \(methodsTried))")
        case FERRY_CURLE_LOGIN_DENIED:
            return (.userAuthenticationRequired, .loginRefused,
                    "\(host) refused the login of \(login) (tried: \(methodsTried)): \(detail)")
        case FERRY_CURLE_REMOTE_FILE_NOT_FOUND:
            if case .put = ask { return (.fileDoesNotExist, .noSuchFile, "no such directory on \(host) for \(path)") }
            return (.fileDoesNotExist, .noSuchFile, "no such file on \(host): \(path)")
        case FERRY_CURLE_REMOTE_ACCESS_DENIED:
            return (.noPermissionsToReadFile, .noPermission, "permission denied on \(host): \(path) (\(detail))")
        case FERRY_CURLE_REMOTE_DISK_FULL:
            return (.cannotWriteToFile, .diskFull, "the disk (or the quota) on \(host) is full: \(path)")
        case FERRY_CURLE_UPLOAD_FAILED:
            return (.cannotWriteToFile, .noPermission, "\(host) refused the upload to \(path): \(detail)")
        case FERRY_CURLE_SSH where detail.contains("establishing ssh session") || detail.contains("Failure establishing"):
            // The SSH handshake broke off (a server at its MaxStartups drops new connections): worth another try.
            return (.networkConnectionLost, .connectionLost, "the SSH session with \(host) could not be set up: \(detail)")
        case FERRY_CURLE_SSH:
            // The server's answer to the file operation (an SFTP "failure": most often a directory where a file is
            // asked): the same again gets the same.
            let doing = { if case .put = ask { "write" } else { "read" } }()
            return (.cannotOpenFile, .other, "\(host) could not \(doing) \(path) (a directory?): \(detail)")
        default:
            return TransportError.describe(result, curlMessage: curlMessage, osError: osError, url: url, bodyFailure: nil,
                                           idleTimeout: idleTimeout)
        }
    }

    /// `ED25519 key SHA256:...`, as ssh shows a host key.
    private var fingerprint: String {
        let key = hostKey.pointee
        let type: String
        switch key.type {
        case 2: type = "RSA"
        case 3: type = "DSA"
        case 4: type = "ECDSA"
        case 5: type = "ED25519"
        default: type = "its"
        }
        guard key.length > 0, let hash = ferry_sha256_new(0) else { return "\(type) key" }
        var digest = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: key.blob) { ferry_sha256_update(hash, $0.baseAddress, key.length) }
        ferry_sha256_final(hash, &digest)
        ferry_sha256_free(hash)
        let base64 = Data(digest).base64EncodedString().replacingOccurrences(of: "=", with: "")
        return "\(type) key SHA256:\(base64)"
    }

    /// The host as known_hosts names it (`[host]:port` off port 22).
    private var knownHostsName: String {
        connectPort.map { $0 == 22 ? connectHost : "[\(connectHost)]:\($0)" } ?? connectHost
    }

    private var portOption: String { connectPort.map { $0 == 22 ? "" : " -p \($0)" } ?? "" }

    private var methodsTried: String {
        var tried: [String] = []
        if settings.agent { tried.append("ssh-agent") }
        tried.append(identityFile.map { "key \($0)" } ?? "no key file (none of \(settings.identityFiles.joined(separator: ", ")))")
        tried.append(url.password != nil ? "the URL's password" : netrcLogin != nil ? "the .netrc password" : "no password")
        return tried.joined(separator: ", ")
    }
}
