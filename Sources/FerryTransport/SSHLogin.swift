import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Who ferry is to one SSH host and how it trusts it, for one URL, whatever speaks SSH (OpenSSH's client for sftp,
/// SFTPConnection; libcurl's libssh2 for scp, SSHPart): the host as the user's ssh config has it, the login name
/// (URL, .netrc, config, local user), the key file offered, and the failures of trust and login in ferry's words.
struct SSHLogin {
    let url: URL
    let settings: SSHSettings
    let netrc: (user: String, password: String)?
    /// The host as the user's ssh config has it (an alias's name, port, user, keys); nil: as written.
    let resolved: SSHHost?
    /// The ssh-agent of the session that asked for the item (TransferSpec.sshAgent), while its socket is there.
    let agentSocket: String?

    init(url: URL, settings: SSHSettings, netrc: (user: String, password: String)?, askingAgent: String? = nil) {
        self.url = url
        self.settings = settings
        self.netrc = netrc
        resolved = settings.config.flatMap { config in url.host.flatMap { SSHHostConfig.shared.resolve($0, config: config) } }
        agentSocket = askingAgent.flatMap { path in
            var found = stat()
            return stat(path, &found) == 0 && found.st_mode & S_IFMT == S_IFSOCK ? path : nil
        }
    }

    /// Why the URL's host or login name cannot go to ssh (a leading `-`, or characters a config's `%h`/`%r` would
    /// hand a shell in ProxyCommand or Match exec, as OpenSSH 9.6 refuses them too); nil when they can.
    var unsafeName: String? {
        if !Self.safeHost(url.host ?? "") { return "the host name \(TerminalSafe.sanitize(url.host ?? "")) is not one ssh is given" }
        if !Self.safeUser(login) { return "the login name \(TerminalSafe.sanitize(login)) is not one ssh is given" }
        return nil
    }

    static func safeHost(_ host: String) -> Bool {
        !host.isEmpty && !host.hasPrefix("-")
            && host.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".-_:%[]".unicodeScalars.contains($0)) }
    }

    static func safeUser(_ user: String) -> Bool {
        !user.isEmpty && !user.hasPrefix("-")
            && !user.unicodeScalars.contains { $0.value < 0x21 || $0.value == 0x7F || "'\"`$;&<>|(){}\\*?!~#".unicodeScalars.contains($0) }
    }

    /// The host and port connected to (known_hosts names them so).
    var connectHost: String { resolved?.hostname ?? url.host ?? "" }
    var connectPort: Int? { url.port ?? resolved?.port }

    /// The login name: the URL's, the .netrc's for the host, the config's, the local user's.
    var login: String { url.user ?? netrc?.user ?? resolved?.user ?? settings.user }

    /// The password offered: the URL's, else the .netrc's (never stored, never shown).
    var password: String? { url.password ?? netrc?.password }

    /// The key file offered: the config's first that exists, else the first of the usual ones.
    var identityFile: String? {
        let configured = (resolved?.identityFiles ?? []).map(settings.expanded)
        return configured.first { FileManager.default.isReadableFile(atPath: $0) } ?? settings.identityFile
    }

    /// The host as known_hosts names it (`[host]:port` off port 22).
    var knownHostsName: String {
        connectPort.map { $0 == 22 ? connectHost : "[\(connectHost)]:\($0)" } ?? connectHost
    }

    private var host: String { hostDescription(url) }
    private var portOption: String { connectPort.map { $0 == 22 ? "" : " -p \($0)" } ?? "" }

    var methodsTried: String {
        var tried: [String] = []
        if let agentSocket {
            tried.append("ssh-agent at \(agentSocket) (the asking session's)")
        } else if settings.agent {
            tried.append("ssh-agent")
        }
        tried.append(identityFile.map { "key \($0)" } ?? "no key file (none of \(settings.identityFiles.joined(separator: ", ")))")
        tried.append(url.password != nil ? "the URL's password" : netrc != nil ? "the .netrc password" : "no password")
        return tried.joined(separator: ", ")
    }

    // MARK: Failures

    /// The host's key is not the one known_hosts has for it (`fingerprint`: `ED25519 key SHA256:...`).
    func hostKeyChanged(_ fingerprint: String) -> (URLError.Code, FailureKind, String) {
        (.serverCertificateUntrusted, .hostKeyChanged,
         "THE HOST KEY OF \(host) HAS CHANGED: it is now \(fingerprint), not the key \(settings.knownHosts) has for it. "
            + "Someone may be intercepting the connection, or the host's key was replaced. Nothing was sent. "
            + "Only if you know why it changed, remove the old key (ssh-keygen -R \(knownHostsName)) and check the new one")
    }

    /// No known_hosts file has a key for the host.
    func hostKeyUnknown(_ fingerprint: String) -> (URLError.Code, FailureKind, String) {
        (.serverCertificateUntrusted, .hostKeyUnknown,
         "the host key of \(host) is not known (\(fingerprint)); nothing was sent. If that is the server's key "
            + "(ssh-keyscan\(portOption) \(connectHost) | ssh-keygen -lf - shows it), add it to \(settings.knownHosts): "
            + "ssh-keyscan\(portOption) \(connectHost) >> \(settings.knownHosts)")
    }

    /// The server refused every way of logging in that was tried (`detail`: what the SSH side said).
    func loginRefused(_ detail: String) -> (URLError.Code, FailureKind, String) {
        if let key = identityFile, SSHSettings.needsPassphrase(key) {
            return (.userAuthenticationRequired, .loginRefused,
                    "\(host) refused the login of \(login): the key \(key) needs its passphrase, which ferry does not ask for; "
                        + "add it to an ssh-agent (ssh-add \(key)) and run ferry where SSH_AUTH_SOCK reaches that agent (tried: \(methodsTried))")
        }
        return (.userAuthenticationRequired, .loginRefused, "\(host) refused the login of \(login) (tried: \(methodsTried)): \(detail)")
    }

    /// `ED25519 key SHA256:...`, as ssh shows a host key, from its type's name as SSH writes it (`ssh-ed25519`,
    /// `ecdsa-sha2-nistp256`, `ssh-rsa`) or as libssh2 numbers it, and its SHA-256 fingerprint.
    static func fingerprint(type: String, sha256: String) -> String {
        let shown: String
        switch type {
        case "ssh-ed25519", "5": shown = "ED25519"
        case "ssh-rsa", "rsa-sha2-256", "rsa-sha2-512", "2": shown = "RSA"
        case "ssh-dss", "3": shown = "DSA"
        case _ where type.hasPrefix("ecdsa-"), "4": shown = "ECDSA"
        default: shown = "its"
        }
        return sha256.isEmpty ? "\(shown) key" : "\(shown) key \(sha256)"
    }
}
