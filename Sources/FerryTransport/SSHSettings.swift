import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who ferry is to an SSH server and whom it trusts (sftp://, scp://): what `ssh host` would use, read once from
/// the environment. A test (or the config) sets each part itself.
public struct SSHSettings: Sendable, Equatable {
    /// The known-hosts file host keys are checked against (`~/.ssh/known_hosts`). A host not in it is refused
    /// with its key's fingerprint; a host with another key in it is refused, always. ferry never writes it.
    public var knownHosts: String
    /// The private keys offered, the first that exists (`~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`, as ssh's order).
    public var identityFiles: [String]
    /// The login name when the URL names none (the local user's, as ssh's).
    public var user: String
    /// An ssh-agent is there to ask (`SSH_AUTH_SOCK`); libcurl asks it through its socket.
    public var agent: Bool
    /// The user's ssh config (`~/.ssh/config`): a host's alias, port, user and identity files come from it as
    /// `ssh -G` resolves them (SSHHostConfig); nil or missing: hosts as written.
    public var config: String?
    /// What `~` stands for in the config's paths.
    public var home: String

    public init(knownHosts: String, identityFiles: [String], user: String, agent: Bool, config: String? = nil,
                home: String = NSHomeDirectory()) {
        self.knownHosts = knownHosts
        self.identityFiles = identityFiles
        self.user = user
        self.agent = agent
        self.config = config
        self.home = home
    }

    /// This process's (its environment is read once: a default made for each request read it, and /etc/passwd
    /// without USER, a hundred times in a tree's walk).
    public static let processDefault = fromEnvironment(ProcessInfo.processInfo.environment)

    /// `HOME`'s `.ssh`, the local user's name (`USER`, else the password database's), and whether `SSH_AUTH_SOCK`
    /// names an agent.
    public static func fromEnvironment(_ environment: [String: String]) -> SSHSettings {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let ssh = home + "/.ssh/"
        return SSHSettings(knownHosts: ssh + "known_hosts",
                           identityFiles: ["id_ed25519", "id_ecdsa", "id_rsa"].map { ssh + $0 },
                           user: environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? localUser(),
                           agent: !(environment["SSH_AUTH_SOCK"] ?? "").isEmpty,
                           config: ssh + "config", home: home)
    }

    /// The first identity file that exists, if any.
    var identityFile: String? {
        identityFiles.first { FileManager.default.isReadableFile(atPath: $0) }
    }

    /// `path` with a leading `~/` made the home directory's.
    func expanded(_ path: String) -> String {
        path.hasPrefix("~/") ? home + path.dropFirst() : path
    }

    private static func localUser() -> String {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "root" }
        return String(cString: name)
    }

    /// Whether the private key at `path` is kept under a passphrase (OpenSSH's format names its cipher, `none`
    /// when it has none; PEM says ENCRYPTED). ferry never asks for one: such a key works through an agent.
    static func needsPassphrase(_ path: String) -> Bool {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return false }
        if text.contains("ENCRYPTED") { return true }
        let lines = text.split(whereSeparator: \.isNewline)
        guard lines.first?.contains("BEGIN OPENSSH PRIVATE KEY") == true,
              let blob = Data(base64Encoded: lines.dropFirst().prefix { !$0.hasPrefix("-----") }.joined()) else { return false }
        // "openssh-key-v1\0", then the cipher's name as an SSH string (a 32-bit length, then its bytes).
        let magic = Array("openssh-key-v1\0".utf8)
        let bytes = [UInt8](blob)
        guard bytes.count > magic.count + 4, Array(bytes.prefix(magic.count)) == magic else { return false }
        let at = magic.count
        let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        guard length > 0, bytes.count >= at + 4 + length else { return false }
        return String(decoding: bytes[(at + 4)..<(at + 4 + length)], as: UTF8.self) != "none"
    }
}
