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
    private let settings: SSHSettings
    private let netrcLogin: (user: String, password: String)?
    /// The host as the user's ssh config has it (an alias's name, port, user, keys); nil: as written.
    private let resolved: SSHHost?
    /// What libcurl's host-key check found (its callback writes it: it stays where it is).
    private let hostKey = UnsafeMutablePointer<ferry_host_key>.allocate(capacity: 1)

    init(url: URL, settings: SSHSettings, netrc: (user: String, password: String)?) {
        scheme = TransferScheme(url) ?? .sftp
        self.url = url
        self.settings = settings
        netrcLogin = netrc
        resolved = settings.config.flatMap { config in url.host.flatMap { SSHHostConfig.shared.resolve($0, config: config) } }
        hostKey.initialize(to: ferry_host_key())
    }

    deinit {
        hostKey.deallocate()
    }

    var offersRanges: Bool { scheme == .sftp }
    var knowsTheFileWhenTheBodyStarts: Bool { true }

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
        if url.user == nil { set(FERRY_CURLOPT_USERNAME, login) }
        if url.password == nil, let netrcLogin { set(FERRY_CURLOPT_PASSWORD, netrcLogin.password) }
        var methods = FERRY_CURLSSH_AUTH_PUBLICKEY | FERRY_CURLSSH_AUTH_PASSWORD | FERRY_CURLSSH_AUTH_KEYBOARD
        if settings.agent { methods |= FERRY_CURLSSH_AUTH_AGENT }
        set(FERRY_CURLOPT_SSH_AUTH_TYPES, methods)
        if let key = identityFile { set(FERRY_CURLOPT_SSH_PRIVATE_KEYFILE, key) }
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

    func describe(_ result: Int, detail: String, ask: FileWire.Ask) -> (URLError.Code, FailureKind, String)? {
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
        let type: String
        switch key.type {
        case 2: type = "RSA"
        case 3: type = "DSA"
        case 4: type = "ECDSA"
        case 5: type = "ED25519"
        default: type = "its"
        }
        guard key.length > 0 else { return "\(type) key" }
        let blob = withUnsafeBytes(of: key.blob) { Data($0.prefix(key.length)) }
        let base64 = Data(SHA256.hash(data: blob)).base64EncodedString().replacingOccurrences(of: "=", with: "")
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
