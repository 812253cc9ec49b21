import FerryCore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// OpenSSH's sshd on 127.0.0.1, started for a test with a throwaway host key and user key in a directory of its
/// own (the files it serves live there too: sftp and scp paths are absolute), and stopped with it. Its sftp
/// server logs every file it opens and closes with the bytes it read and wrote (`sftpTransfers`): what a resume
/// asked for is in the server's own words.
public final class TestSSHServer: @unchecked Sendable {
    public struct Missing: Error, CustomStringConvertible {
        public let description: String
    }

    public static let sshd = "/usr/sbin/sshd"
    public static let keygen = "/usr/bin/ssh-keygen"
    /// OpenSSH's own sftp server as a program (internal-sftp logs nowhere a test can read): it logs to standard
    /// error, which the subsystem's command line sends to a file.
    public static let sftpServer = "/usr/lib/openssh/sftp-server"

    public let directory: String
    public let port: Int
    /// A known-hosts file that has this server's host key (and nothing else).
    public let knownHosts: String
    /// The private key the server lets in (its public half is the only authorized key).
    public let userKey: String
    /// The host key's fingerprint as ssh shows it: `SHA256:...`.
    public let hostKeyFingerprint: String
    /// The local user, who logs in.
    public let user: String
    private let log: String
    private let sftpLog: String
    private let process: ChildProcess
    private let agents = Mutex<[ChildProcess]>([])

    /// `passwords`: logins by password are allowed too (a wrong one is then refused by sshd itself, and logged).
    /// `maxSessions`: sessions one connection may carry (sshd's MaxSessions; its own default is 10). `banner`: what
    /// sshd shows each client before it logs in (its Banner file; ssh prints it on its standard error).
    public init(passwords: Bool = false, maxSessions: Int = 100, banner: String? = nil) throws {
        for tool in [Self.sshd, Self.keygen, Self.sftpServer] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw Missing(description: "\(tool) is not installed: the SSH tests need OpenSSH's server (apt-get install openssh-server, the README's set-up line)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-sshd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // sshd started as root wants its privilege-separation directory.
        if getuid() == 0 { try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true) }
        let hostKey = directory + "/host_key"
        userKey = directory + "/user_key"
        try Self.run(Self.keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "ferry-test-host", "-f", hostKey])
        try Self.run(Self.keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "ferry-test-user", "-f", userKey])
        try FileManager.default.copyItem(atPath: userKey + ".pub", toPath: directory + "/authorized_keys")
        let fingerprint = try Self.run(Self.keygen, ["-l", "-f", hostKey + ".pub"])
        hostKeyFingerprint = fingerprint.split(separator: " ").first { $0.hasPrefix("SHA256:") }.map(String.init) ?? ""
        user = String(cString: getpwuid(getuid())!.pointee.pw_name)
        log = directory + "/sshd.log"
        sftpLog = directory + "/sftp.log"
        knownHosts = directory + "/known_hosts"

        var bannerLine = ""
        if let banner {
            try banner.write(toFile: directory + "/banner", atomically: true, encoding: .utf8)
            bannerLine = "Banner \(directory)/banner\n"
        }
        var started: (ChildProcess, Int)?
        for _ in 0..<5 where started == nil {
            let port = try Self.freePort()
            let config = directory + "/sshd_config"
            try """
            ListenAddress 127.0.0.1
            Port \(port)
            HostKey \(hostKey)
            AuthorizedKeysFile \(directory)/authorized_keys
            PidFile none
            StrictModes no
            UsePAM no
            PermitRootLogin yes
            PasswordAuthentication \(passwords ? "yes" : "no")
            KbdInteractiveAuthentication no
            MaxStartups 200
            MaxSessions \(maxSessions)
            LogLevel INFO
            Subsystem sftp \(Self.sftpServer) -e -l INFO 2>>\(sftpLog)
            \(bannerLine)
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let child = ChildProcess()
            child.executableURL = URL(fileURLWithPath: Self.sshd)
            child.arguments = ["-D", "-e", "-f", config]
            child.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: Self.touch(log)))
            try child.run()
            if try Self.waitListening(port: port, child) { started = (child, port) } else { child.terminate(); child.waitUntilExit() }
        }
        guard let (child, port) = started else {
            throw Missing(description: "sshd did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        process = child
        self.port = port
        try "[127.0.0.1]:\(port) \(String(contentsOfFile: hostKey + ".pub", encoding: .utf8))".write(toFile: knownHosts, atomically: true, encoding: .utf8)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public func stop() {
        for agent in agents.withLock({ a in defer { a = [] }; return a }) {
            // SIGKILL: the agent inherits the test process's signal mask, in which SIGTERM may be blocked.
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// The URL of `relativePath` under the server's directory (each component percent-encoded).
    /// Ends every connection the server has (its per-connection processes), as a server restarting or timing out
    /// idle clients does; the server itself keeps listening. Returns how many it ended.
    @discardableResult
    public func dropConnections() -> Int {
        let parent = process.processIdentifier
        var ended = 0
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // pid (comm) state ppid ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, Int32(fields[1]) == parent else { continue }
            kill(pid, SIGTERM)
            ended += 1
        }
        return ended
    }

    public func url(_ relativePath: String, scheme: String = "sftp", user: String? = nil) -> URL {
        let path = (directory + "/" + relativePath).split(separator: "/").map {
            String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? String($0)
        }.joined(separator: "/")
        return URL(string: "\(scheme)://\(user.map { $0 + "@" } ?? "")127.0.0.1:\(port)/\(path)")!
    }

    /// Writes `data` as `relativePath` under the server's directory (its folders made).
    public func put(_ data: Data, at relativePath: String) throws {
        let path = directory + "/" + relativePath
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: path))
    }

    public func path(_ relativePath: String) -> String { directory + "/" + relativePath }

    /// What sshd logged so far.
    public var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Each file the sftp server closed: its path and the bytes it read from it and wrote to it, in order.
    public var sftpTransfers: [(path: String, read: Int64, written: Int64)] {
        // Its lines end in CR LF (stderr as a log): "\r\n" is one Character, not split by "\n".
        ((try? String(contentsOfFile: sftpLog, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).compactMap { line in
            // close "/path" bytes read 123 written 0; "forced close" for a file still open when the session ended.
            let forced = "forced "
            let line = line.hasPrefix(forced) ? line.dropFirst(forced.count) : line[...]
            guard line.hasPrefix("close \"") else { return nil }
            let halves = String(line.dropFirst(7)).components(separatedBy: "\" bytes read ")
            guard halves.count == 2 else { return nil }
            let numbers = halves[1].split(separator: " ")
            guard numbers.count >= 3, let read = Int64(numbers[0]), let written = Int64(numbers[2]) else { return nil }
            return (halves[0], read, written)
        }
    }

    /// Runs a tool to its end; its output, or an error with it.
    @discardableResult
    public static func run(_ tool: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: tool)
        child.arguments = arguments
        child.environment = environment
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        guard child.terminationStatus == 0 else { throw Missing(description: "\(tool) \(arguments.joined(separator: " ")) failed: \(text)") }
        return text
    }

    private static func touch(_ path: String) -> String {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return path
    }

    /// A port nothing listens on now (the kernel's choice for a socket bound to port 0, released).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether sshd listens on `port` (false when it exited: the port was taken meanwhile).
    private static func waitListening(port: Int, _ child: ChildProcess) throws -> Bool {
        for _ in 0..<500 {
            guard child.isRunning else { return false }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if connected { return true }
            usleep(10_000)
        }
        return false
    }

    /// An ssh-agent of its own holding the server's user key, for logins through it: its socket (SSH_AUTH_SOCK).
    public func startAgent() throws -> String {
        let socket = directory + "/agent.sock"
        let agent = ChildProcess()
        agent.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        agent.arguments = ["-D", "-a", socket]
        try agent.run()
        agents.withLock { $0.append(agent) }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: socket) {
            guard agent.isRunning else { break }
            usleep(10_000)
        }
        // The socket is there once bound, and refuses a connection until the agent listens on it: asked again.
        for attempt in 0..<100 {
            do {
                try Self.run("/usr/bin/ssh-add", ["-q", userKey], environment: ["SSH_AUTH_SOCK": socket])
                break
            } catch where attempt < 99 && agent.isRunning {
                usleep(20_000)
            }
        }
        return socket
    }
}
