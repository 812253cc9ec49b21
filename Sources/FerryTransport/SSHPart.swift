import CCurl
import FerryModel
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// sftp's and scp's own part of a FileWire: the host as the user's ssh config has it, the host key checked
/// against known_hosts (never added to it), the login (URL, .netrc, config, local user; key file, password,
/// agent), and the failures only SSH has (host keys, logins, its session).
final class SSHPart: FileProtocolPart {
    private let scheme: TransferScheme
    private let url: URL
    private let who: SSHLogin
    private var settings: SSHSettings { who.settings }
    private var resolved: SSHHost? { who.resolved }
    /// What libcurl's host-key check found (its callback writes it: it stays where it is).
    private let hostKey = UnsafeMutablePointer<ferry_host_key>.allocate(capacity: 1)

    init(url: URL, settings: SSHSettings, netrc: (user: String, password: String)?) {
        scheme = TransferScheme(url) ?? .sftp
        self.url = url
        who = SSHLogin(url: url, settings: settings, netrc: netrc)
        hostKey.initialize(to: ferry_host_key())
    }

    deinit {
        hostKey.deallocate()
    }

    var offersRanges: Bool { scheme == .sftp }
    var knowsTheFileWhenTheBodyStarts: Bool { true }
    var checksUploadedSize: Bool { false }

    /// The host keys found known this process, by host and port: a connection libcurl takes from its cache is
    /// not checked again (its key was, when it was made), and is said with the key it was checked with.
    private static let checked = Mutex<[String: String]>([:])
    private var hostAndPort: String { "\(connectHost):\(connectPort ?? 22)" }

    var peer: String? {
        let key = hostKey.pointee
        if key.match == 0, key.length > 0 {
            let print = fingerprint
            Self.checked.withLock { $0[hostAndPort] = print }
            return print
        }
        return key.match == -1 ? Self.checked.withLock { $0[hostAndPort] } : nil
    }

    func configure(_ easy: UnsafeMutableRawPointer) {
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(easy, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(easy, option, value) }
        set(FERRY_CURLOPT_PROTOCOLS_STR, scheme.rawValue)
        if let target = connectURL { set(FERRY_CURLOPT_URL, target) }
        // An SSH server is reached directly (libcurl would take an http proxy from the environment for it).
        set(FERRY_CURLOPT_PROXY, "")
        _ = ferry_curl_easy_check_host_key(easy, settings.knownHosts, hostKey)
        if url.user == nil { set(FERRY_CURLOPT_USERNAME, who.login) }
        if url.password == nil, let netrc = who.netrc { set(FERRY_CURLOPT_PASSWORD, netrc.password) }
        var methods = FERRY_CURLSSH_AUTH_PUBLICKEY | FERRY_CURLSSH_AUTH_PASSWORD | FERRY_CURLSSH_AUTH_KEYBOARD
        if settings.agent { methods |= FERRY_CURLSSH_AUTH_AGENT }
        set(FERRY_CURLOPT_SSH_AUTH_TYPES, methods)
        if let key = who.identityFile { set(FERRY_CURLOPT_SSH_PRIVATE_KEYFILE, key) }
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

    private var connectHost: String { who.connectHost }
    private var connectPort: Int? { who.connectPort }

    // MARK: Failures

    private var host: String { hostDescription(url) }

    func describe(_ result: Int, detail: String, ask: FileWire.Ask) -> (URLError.Code, FailureKind, String)? {
        switch result {
        case FERRY_CURLE_PEER_FAILED_VERIFICATION where hostKey.pointee.match == 1:
            return who.hostKeyChanged(fingerprint)
        case FERRY_CURLE_PEER_FAILED_VERIFICATION where hostKey.pointee.match == 2:
            return who.hostKeyUnknown(fingerprint)
        case FERRY_CURLE_LOGIN_DENIED:
            return who.loginRefused(detail)
        case FERRY_CURLE_SSH where detail.contains("establishing ssh session") || detail.contains("Failure establishing"):
            // The SSH handshake broke off (a server at its MaxStartups drops new connections): worth another try.
            return (.networkConnectionLost, .connectionLost, "the SSH session with \(host) could not be set up: \(detail)")
        case FERRY_CURLE_SSH:
            // The server's answer to the file operation (an SFTP "failure": most often a directory where a file is
            // asked): the same again gets the same.
            let doing = { if case .put = ask { "write" } else { "read" } }()
            let path = TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path)
            return (.cannotOpenFile, .other, "\(host) could not \(doing) \(path) (a directory?): \(detail)")
        default:
            return nil
        }
    }

    /// `ED25519 key SHA256:...`, as ssh shows a host key.
    private var fingerprint: String {
        let key = hostKey.pointee
        guard key.length > 0 else { return SSHLogin.fingerprint(type: "\(key.type)", sha256: "") }
        let blob = withUnsafeBytes(of: key.blob) { Data($0.prefix(key.length)) }
        let base64 = Data(SHA256.hash(data: blob)).base64EncodedString().replacingOccurrences(of: "=", with: "")
        return SSHLogin.fingerprint(type: "\(key.type)", sha256: "SHA256:\(base64)")
    }
}
