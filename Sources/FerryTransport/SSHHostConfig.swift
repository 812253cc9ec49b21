import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A host as the user's ssh config has it (`ssh -G HOST`: what `ssh HOST` would use): an alias's real name and
/// port, the login name and the identity files. `ferry get sftp://seedbox/...` then reaches what `ssh seedbox`
/// reaches.
struct SSHHost: Sendable, Equatable {
    var hostname: String
    var port: Int?
    var user: String?
    /// In the config's order; only those that exist are offered.
    var identityFiles: [String]
    /// The ciphers allowed, in the order of preference (the config's, else OpenSSH's own).
    var ciphers: [String]?
    /// The agent the config names for the host (`IdentityAgent`); nil: none named.
    var identityAgent: String?

    /// `ssh -G`'s lines (`key value`, keys in lower case).
    init?(resolved text: String) {
        var hostname: String?
        var port: Int?
        var user: String?
        var identities: [String] = []
        var ciphers: [String]?
        var agent: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = String(parts[1])
            switch parts[0] {
            case "hostname": hostname = value
            case "port": port = Int(value)
            case "user": user = value
            case "identityfile": identities.append(value)
            case "ciphers": ciphers = value.split(separator: ",").map(String.init)
            case "identityagent": agent = value
            default: break
            }
        }
        guard let hostname else { return nil }
        self.hostname = hostname
        self.port = port
        self.user = user
        self.identityFiles = identities
        self.ciphers = ciphers
        self.identityAgent = agent
    }
}

/// Asks `ssh -G` once per host and config (its modification time: an edited config is read again), off the
/// transport's thread (a task's work queue makes its transfer). Without the ssh client, or without a user config,
/// hosts are taken as written.
final class SSHHostConfig: Sendable {
    static let shared = SSHHostConfig()
    static let ssh = "/usr/bin/ssh"

    private struct Key: Hashable {
        let host: String
        let config: String
        let modified: TimeInterval
    }
    private let cache = Mutex<[Key: SSHHost?]>([:])

    /// `host` as `config` (the user's ssh config file) has it; nil when the config or the ssh client is missing.
    func resolve(_ host: String, config: String) -> SSHHost? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: config),
              let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970,
              FileManager.default.isExecutableFile(atPath: Self.ssh) else { return nil }
        // A host name that could pass for an option, or that a config's %h could hand a shell, is not asked about.
        guard SSHLogin.safeHost(host) else { return nil }
        let key = Key(host: host, config: config, modified: modified)
        if let known = cache.withLock({ $0[key] }) { return known }
        let found = Self.ask(host, config: config)
        cache.withLock { $0[key] = found }
        return found
    }

    /// OpenSSH's own settings for a host no config names (`ssh -G -F /dev/null`), asked once: its ciphers in its
    /// order, for a preference among them (SFTPConnection.preferredCiphers); nil without the ssh client.
    static let defaults: SSHHost? = FileManager.default.isExecutableFile(atPath: ssh) ? ask("localhost", config: "/dev/null") : nil

    private static func ask(_ host: String, config: String) -> SSHHost? {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        defer { close(ends[0]) }
        let pid: pid_t
        do throws(Spawn.Failure) {
            pid = try Spawn.start([ssh, "-G", "-F", config, "--", host], streams: [.devNull, .descriptor(ends[1]), .devNull])
        } catch {
            close(ends[1])
            return nil
        }
        close(ends[1])
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = read(ends[0], &buffer, buffer.count)
            if n > 0 { output.append(contentsOf: buffer[0..<n]) } else if n == 0 || errno != EINTR { break }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else { return nil }
        return SSHHost(resolved: String(decoding: output, as: UTF8.self))
    }
}
