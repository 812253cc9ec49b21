import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One OpenSSH client (`ssh -s HOST sftp`) and the SFTP conversation over its standard input and output, as lftp
/// and sshfs speak it: ssh makes the connection, checks the host key against known_hosts (never adding to it),
/// logs in (agent, keys, a password through askpass) and encrypts with OpenSSH's ciphers, reading the user's ssh
/// config as `ssh HOST` does; ferry speaks SFTP (SFTPPacket) over a socket pair, without blocking, on the
/// transport's thread. What ssh says on its standard error (`-v`: the host key it was shown, why it gave up) is
/// how its failures are told in ferry's words. Transport thread only.
final class SFTPConnection {
    enum State: Equatable {
        /// ssh is connecting and logging in; the server has not said its SFTP version yet.
        case starting
        case ready
        /// ssh ended or was closed: nothing more is sent or answered.
        case ended
    }

    /// How it shares its login with others to the same host (OpenSSH's connection sharing, `ControlMaster`):
    /// not at all; as the master, which logged in and carries its own SFTP session and the others' over its control
    /// socket; or as one of those others, an ssh that asks the master for a session and needs no login of its own.
    enum Sharing {
        case alone
        case master(controlPath: String)
        case session(of: SFTPConnection, controlPath: String)
    }

    /// What makes two connections interchangeable: ssh's arguments and the password offered.
    let key: String
    let sharing: Sharing
    private(set) var state = State.starting
    /// Why it ended before it was closed (a failure in ferry's words); nil while it runs or after a close.
    private(set) var failure: (URLError.Code, FailureKind, String)?
    /// The server's host key as ssh was shown it and checked it (`ED25519 key SHA256:...`); a session over a master
    /// was shown nothing: the master's.
    var peer: String? { shownKey ?? master?.peer }
    private var shownKey: String?
    /// The master it shares a login with, if it is a session over one.
    var master: SFTPConnection? {
        if case let .session(master, _) = sharing { master } else { nil }
    }
    /// A master the server would not give another session (its sshd's MaxSessions): others get a master of their own.
    private(set) var full = false
    /// A session's ssh, not started before its master has logged in (its arguments and password).
    private var waitingForMaster: ([String], String?)?
    /// ssh found the host key known and matching (`-v`): whatever it says after is not about the host key.
    private var hostKeyMatched = false
    /// The extensions the server named in its VERSION (OpenSSH's `posix-rename@openssh.com`, `statvfs@openssh.com`).
    private(set) var extensions: Set<String> = []
    /// When the server or ssh last said anything (a reply, a line of ssh's while it logs in; the master's, while a
    /// session waits for its login): the idle timeout of the transfer on it counts from here too (transport
    /// thread's monotonic seconds).
    var lastHeard: TimeInterval {
        guard waitingForMaster != nil, let master else { return heard }
        return max(heard, master.lastHeard)
    }
    private var heard: TimeInterval = monotonicSeconds()
    /// Told when the connection is ready or has ended (the transfer using it, or none).
    var onChange: (() -> Void)?
    /// When it last went back to the pool unused (transport thread's monotonic seconds).
    var idleSince: TimeInterval = 0

    private let login: SSHLogin
    private var pid: pid_t = 0
    /// Our end of the socket pair that is ssh's standard input and output; its standard error's pipe.
    private var channel: Int32 = -1
    private var errors: Int32 = -1
    private var outgoing: [Data] = []
    private var outgoingOffset = 0
    private var incoming = Data()
    private var incomingStart = 0
    /// What ssh said on its standard error, line by line (the last 64 lines kept).
    private var errorText = Data()
    private var said: [String] = []
    private var nextID: UInt32 = 1
    private var replies: [UInt32: (SFTPPacket.Reply) -> Void] = [:]
    /// The askpass script's directory while ssh may ask for the password.
    private var askpassDirectory: String?

    /// Replies received (a transfer tells by it whether anything of its own was answered).
    private(set) var answers = 0

    /// Requests sent and not answered.
    var unanswered: Int { replies.count }

    /// What is still on its way is answered to no one (its transfer stopped part way).
    func abandonReplies() {
        for id in replies.keys { replies[id] = { _ in } }
    }

    /// `arguments` as `arguments(_:idleTimeout:sharing:)` makes them for `sharing`. A session over a master that is
    /// still logging in starts once the master has (masterChanged).
    init(login: SSHLogin, key: String, arguments: [String], password: String?, sharing: Sharing = .alone) {
        self.login = login
        self.key = key
        self.sharing = sharing
        if let master, master.state == .starting {
            waitingForMaster = (arguments, password)
        } else {
            start(arguments, password: password)
        }
    }

    deinit {
        close()
        terminate()
        readBuffer.deallocate()
    }

    /// A session waiting for its master (the pool asks at every round): it starts once the master is ready, and
    /// ends with the master's failure if the master could not log in. One whose master was closed before it had
    /// logged in starts too: its ssh then finds no master and logs in itself.
    func masterChanged() {
        guard let (arguments, password) = waitingForMaster, let master, master.state != .starting else { return }
        waitingForMaster = nil
        if master.state == .ended, let failure = master.failure { return end(failure) }
        // Its own lines and replies count from now (it followed the master's while it waited).
        heard = monotonicSeconds()
        start(arguments, password: password)
    }

    /// ssh's arguments for `login` (the key of a connection), with `idleTimeout` as its connect timeout; a shared
    /// connection's name its control socket.
    static func arguments(_ login: SSHLogin, idleTimeout: TimeInterval, sharing: Sharing = .alone) -> [String] {
        let settings = login.settings
        var arguments = [SSHHostConfig.ssh, "-v", "-T", "-x", "-a", "-k"]
        let config = settings.config.flatMap { FileManager.default.isReadableFile(atPath: $0) ? $0 : nil } ?? "/dev/null"
        func option(_ text: String) { arguments += ["-o", text] }
        // A path as an option's value: quoted (a blank would end it), its % kept from ssh's %-tokens.
        func quoted(_ path: String) -> String { "\"" + path.replacingOccurrences(of: "%", with: "%%") + "\"" }
        arguments += ["-F", config]
        option("UserKnownHostsFile=\(quoted(settings.knownHosts))")
        option("StrictHostKeyChecking=yes")
        option("UpdateHostKeys=no")
        option("CheckHostIP=no")
        switch sharing {
        case .alone:
            option("ControlMaster=no")
            option("ControlPath=none")
        case let .master(path):
            // It stays while it carries sessions, and ends with the last (never in the background: ControlPersist).
            option("ControlMaster=yes")
            option("ControlPersist=no")
            option("ControlPath=\(quoted(path))")
        case let .session(_, path):
            option("ControlMaster=no")
            option("ControlPath=\(quoted(path))")
        }
        option("ClearAllForwardings=yes")
        option("ConnectTimeout=\(max(1, Int(idleTimeout.rounded(.up))))")
        option("ServerAliveInterval=15")
        if let ciphers = Self.preferredCiphers(login.resolved?.ciphers ?? SSHHostConfig.defaults?.ciphers) { option("Ciphers=\(ciphers)") }
        if login.password != nil {
            // The password goes to ssh through askpass (never on a command line, never in a file): one try.
            option("BatchMode=no")
            option("NumberOfPasswordPrompts=1")
        } else {
            option("BatchMode=yes")
        }
        // The agent the user's config names for the host, else the asking session's, else the engine's own (its
        // SSH_AUTH_SOCK), else none.
        if login.resolved?.identityAgent == nil {
            if let socket = login.agentSocket {
                option("IdentityAgent=\(quoted(socket))")
            } else if !settings.agent {
                option("IdentityAgent=none")
            }
        }
        if let key = login.identityFile { option("IdentityFile=\(quoted(key))") }
        arguments += ["-l", login.login]
        if let port = login.url.port { arguments += ["-p", "\(port)"] }
        arguments += ["-s", "--", login.url.host ?? "", "sftp"]
        return arguments
    }

    /// AES-GCM first where the processor has AES instructions, as Go's ssh (rclone) chooses: OpenSSH puts
    /// chacha20-poly1305 first, and on such a processor a gigabyte over it took 1.3 times as long (bench-sftp,
    /// docs/ssh.md). Only among the ciphers the user's config allows, else OpenSSH's own (`configured`, as `ssh -G`
    /// says them: an explicit list, which every OpenSSH takes), in that order otherwise. Nil: ssh's choice stands.
    static func preferredCiphers(_ configured: [String]?, aes: Bool = hasAESInstructions) -> String? {
        guard aes, let configured else { return nil }
        let gcm = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
        let first = gcm.filter(configured.contains)
        guard !first.isEmpty, configured.first.map(first.contains) == false else { return nil }
        return (first + configured.filter { !first.contains($0) }).joined(separator: ",")
    }

    /// The processor has AES instructions (`aes` among /proc/cpuinfo's flags or features).
    static let hasAESInstructions: Bool = {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return false }
        return text.split(whereSeparator: \.isNewline).contains { line in
            (line.hasPrefix("flags") || line.hasPrefix("Features")) && line.split(separator: " ").contains("aes")
        }
    }()

    private func start(_ arguments: [String], password: String?) {
        guard FileManager.default.isExecutableFile(atPath: SSHHostConfig.ssh) else {
            end((.cannotConnectToHost, .noConnection, "sftp needs OpenSSH's client, \(SSHHostConfig.ssh): apt-get install openssh-client"))
            return
        }
        var pair: [Int32] = [0, 0]
        var errorPipe: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            end((.cannotConnectToHost, .noConnection, "cannot start ssh: \(String(cString: strerror(errno)))"))
            return
        }
        guard pipe(&errorPipe) == 0 else {
            Glibc.close(pair[0]); Glibc.close(pair[1])
            end((.cannotConnectToHost, .noConnection, "cannot start ssh: \(String(cString: strerror(errno)))"))
            return
        }
        for fd in errorPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var size: Int32 = 1 << 20
        for fd in pair {
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var environment = ProcessInfo.processInfo.environment
        if let password {
            // ssh never asks on a terminal: without its askpass script there is no password login.
            guard let script = Self.askpass(&askpassDirectory) else {
                for fd in pair + errorPipe { Glibc.close(fd) }
                let tried = Self.askpassCandidates().joined(separator: ", ")
                end((.cannotConnectToHost, .other, "cannot give ssh the password: no directory for its askpass script that may run programs (tried \(tried))"))
                return
            }
            environment["SSH_ASKPASS"] = script
            environment["SSH_ASKPASS_REQUIRE"] = "force"
            environment[Self.passwordVariable] = password
        } else {
            environment["SSH_ASKPASS_REQUIRE"] = "never"
        }
        do throws(Spawn.Failure) {
            pid = try Spawn.start(arguments, environment: environment,
                                  streams: [.descriptor(pair[1]), .descriptor(pair[1]), .descriptor(errorPipe[1])], newSession: true)
        } catch {
            Glibc.close(pair[0]); Glibc.close(pair[1]); Glibc.close(errorPipe[0]); Glibc.close(errorPipe[1])
            end((.cannotConnectToHost, .noConnection, "cannot start ssh: \(error)"))
            return
        }
        Glibc.close(pair[1])
        Glibc.close(errorPipe[1])
        channel = pair[0]
        errors = errorPipe[0]
        _ = fcntl(channel, F_SETFL, fcntl(channel, F_GETFL) | O_NONBLOCK)
        _ = fcntl(errors, F_SETFL, fcntl(errors, F_GETFL) | O_NONBLOCK)
        queue(SFTPPacket.hello)
    }

    // MARK: Requests

    /// Sends a request; `reply` is called with the server's answer (not if the connection ends first).
    func send(_ kind: SFTPPacket.Kind, _ fields: (inout SFTPPacket.Writer) -> Void = { _ in },
              reply: @escaping (SFTPPacket.Reply) -> Void) {
        let id = takeID()
        replies[id] = reply
        queue(SFTPPacket.request(kind, id: id, fields))
    }

    /// Sends a WRITE of `data` at `offset` of the open file `handle`.
    func write(handle: Data, offset: Int64, data: Data, reply: @escaping (SFTPPacket.Reply) -> Void) {
        let id = takeID()
        replies[id] = reply
        queue(SFTPPacket.writeHead(id: id, handle: handle, offset: offset, count: data.count))
        queue(data)
    }

    private func takeID() -> UInt32 {
        defer { nextID &+= 1 }
        return nextID
    }

    private func queue(_ data: Data) {
        guard state != .ended else { return }
        outgoing.append(data)
    }

    // MARK: I/O (transport thread)

    /// The descriptors to wait on, and for what.
    var descriptors: [(fd: Int32, events: Int16)] {
        guard state != .ended, channel >= 0 else { return [] }
        var list: [(Int32, Int16)] = [(channel, Int16(POLLIN) | (outgoing.isEmpty ? 0 : Int16(POLLOUT)))]
        if errors >= 0 { list.append((errors, Int16(POLLIN))) }
        return list
    }

    /// Reads what ssh said and answered, hands each answer to its request's `reply`, and writes what is queued.
    func service() {
        guard state != .ended, channel >= 0 else { return }
        readErrors()
        readReplies()
        guard state != .ended else { return }
        writeQueued()
    }

    private func readErrors() {
        guard errors >= 0 else { return }
        let buffer = readBuffer
        while true {
            let n = read(errors, buffer, Self.readSize)
            if n > 0 {
                errorText.append(buffer.assumingMemoryBound(to: UInt8.self), count: n)
                takeErrorLines()
            } else if n == 0 {
                Glibc.close(errors)
                errors = -1
                return
            } else {
                if errno == EINTR { continue }
                return
            }
        }
    }

    private func takeErrorLines() {
        while let newline = errorText.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: errorText[errorText.startIndex..<newline], as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            errorText.removeSubrange(errorText.startIndex...newline)
            // debug1: Server host key: ssh-ed25519 SHA256:...
            heard = monotonicSeconds()
            // A master that refused a session (the server's MaxSessions): this ssh logs in itself.
            if line.hasPrefix("mux_client_request_session: session request failed") { master?.full = true }
            // The master took the session: it is over the master's connection, whose host key matched (what the
            // server says on it is not ssh's words about a host key).
            if line.hasPrefix("debug1: mux_client_request_session: master session id:") { hostKeyMatched = true }
            if line.hasPrefix("debug1: Host ") && line.contains(" is known and matches ") { hostKeyMatched = true }
            if line.hasPrefix("debug1: Server host key: ") {
                let parts = line.dropFirst("debug1: Server host key: ".count).split(separator: " ")
                if parts.count >= 2 { shownKey = SSHLogin.fingerprint(type: String(parts[0]), sha256: String(parts[1])) }
            }
            said.append(line)
            if said.count > 64 { said.removeFirst(said.count - 64) }
        }
        // A line that never ends is not kept whole.
        if errorText.count > 64 << 10 { errorText.removeAll() }
    }

    private func readReplies() {
        let buffer = readBuffer
        while true {
            let n = recv(channel, buffer, Self.readSize, 0)
            if n > 0 {
                incoming.append(buffer.assumingMemoryBound(to: UInt8.self), count: n)
                if !dispatch() { return }
                continue
            }
            if n == 0 {
                ended()
                return
            }
            if errno == EINTR { continue }
            if errno != EAGAIN && errno != EWOULDBLOCK { ended() }
            return
        }
    }

    /// What one read off the socket takes at most, and where it goes first.
    private static let readSize = 128 << 10
    private let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: SFTPConnection.readSize, alignment: 16)

    /// Hands on each whole packet received; false when the connection ended over one that makes no sense.
    private func dispatch() -> Bool {
        while true {
            let parsed: (kind: UInt8, id: UInt32?, reply: SFTPPacket.Reply?, next: Int)?
            let packetStart = incomingStart
            do throws(SFTPProtocolError) {
                parsed = try SFTPPacket.parse(incoming, from: incomingStart)
            } catch {
                let host = hostDescription(login.url)
                close()
                end((.badServerResponse, .protocol, "\(host) does not speak SFTP as ferry does: \(error.message)"))
                return false
            }
            guard let parsed else { break }
            incomingStart = parsed.next
            answers += 1
            heard = monotonicSeconds()
            if parsed.kind == SFTPPacket.Kind.version.rawValue {
                if state == .starting {
                    extensions = SFTPPacket.extensions(incoming, from: packetStart, to: parsed.next)
                    state = .ready
                    removeAskpass()
                    onChange?()
                }
            } else if let id = parsed.id, let handler = replies.removeValue(forKey: id) {
                guard let reply = parsed.reply else {
                    // A reply of a kind no request of ferry's gets: not a server to go on with.
                    let host = hostDescription(login.url)
                    close()
                    end((.badServerResponse, .protocol, "\(host) answered an SFTP request with a packet of kind \(parsed.kind)"))
                    return false
                }
                handler(reply)
            }
            if state == .ended { return false }
        }
        if incomingStart == incoming.count {
            incoming.removeAll(keepingCapacity: true)
            incomingStart = 0
        } else if incomingStart > 256 << 10 {
            incoming.removeSubrange(0..<incomingStart)
            incomingStart = 0
        }
        return true
    }

    private func writeQueued() {
        while let first = outgoing.first {
            let n = first.withUnsafeBytes { bytes in
                Glibc.send(channel, bytes.baseAddress! + outgoingOffset, bytes.count - outgoingOffset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                outgoingOffset += n
                if outgoingOffset == first.count {
                    outgoing.removeFirst()
                    outgoingOffset = 0
                }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            ended()
            return
        }
    }

    // MARK: Its end

    /// ssh ended (its output closed): why, from what it said.
    private func ended() {
        guard state != .ended else { return }
        readErrors()
        if !errorText.isEmpty {
            errorText.append(UInt8(ascii: "\n"))
            takeErrorLines()
        }
        let wasReady = state == .ready
        closeDescriptors()
        end(wasReady ? lost() : refusal())
    }

    private func end(_ failure: (URLError.Code, FailureKind, String)) {
        state = .ended
        self.failure = failure
        replies.removeAll()
        outgoing.removeAll()
        removeAskpass()
        onChange?()
    }

    /// Ends it from our side (done with it, or cancelled): ssh sees its input end and goes (a master once the
    /// sessions over it have ended too: terminate).
    func close() {
        guard state != .ended else { return }
        state = .ended
        waitingForMaster = nil
        replies.removeAll()
        outgoing.removeAll()
        closeDescriptors()
        removeAskpass()
    }

    private func closeDescriptors() {
        if channel >= 0 { Glibc.close(channel) }
        if errors >= 0 { Glibc.close(errors) }
        channel = -1
        errors = -1
        // A master's ssh carries other sessions still: it goes once they have (the pool terminates it then).
        if case .master = sharing { return }
        terminate()
    }

    /// Its ssh is ended: it ends on its closed input and SIGTERM; one still there 5 s later is killed. Reaped
    /// without blocking (reapEnded).
    func terminate() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        Self.ending.append((pid, monotonicSeconds()))
        pid = 0
    }

    /// A master whose ssh has not been terminated yet.
    var lingers: Bool { pid > 0 }

    /// ssh processes closed and not reaped yet (transport thread).
    nonisolated(unsafe) private static var ending: [(pid: pid_t, since: TimeInterval)] = []

    /// Some ssh process was closed and is not reaped yet.
    static var reaping: Bool { !ending.isEmpty }

    /// Reaps the ssh processes that have ended (called every round of the transport's loop).
    static func reapEnded() {
        guard !ending.isEmpty else { return }
        let now = monotonicSeconds()
        ending.removeAll { pid, since in
            var status: Int32 = 0
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid || (done == -1 && errno == ECHILD) { return true }
            // One that did not go on its closed input and SIGTERM (stopped, hung) is killed.
            if now - since > 5 { kill(pid, SIGKILL) }
            return false
        }
    }

    /// Why ssh gave up before SFTP began, in ferry's words.
    private func refusal() -> (URLError.Code, FailureKind, String) {
        let host = hostDescription(login.url)
        let fingerprint = peer ?? "its key"
        // ssh's own lines only, and only before the host key was found matching (a server's banner comes after,
        // and may say anything).
        if !hostKeyMatched {
            if said.contains(where: { $0.contains("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!")
                || ($0.hasPrefix("Host key for ") && $0.hasSuffix("has changed and you have requested strict checking.")) }) {
                return login.hostKeyChanged(fingerprint)
            }
            if said.contains(where: { ($0.hasPrefix("No ") && $0.contains(" host key is known for ")) || $0 == "Host key verification failed." }) {
                return login.hostKeyUnknown(fingerprint)
            }
        }
        if let denied = said.last(where: { $0.contains(": Permission denied (") && $0.hasSuffix(").") }) {
            return login.loginRefused(Self.words(denied))
        }
        let last = said.last(where: Self.saysWhy) ?? "ssh ended"
        if last.contains("Connection refused") {
            return (.cannotConnectToHost, .refused, "cannot connect to \(host) (connection refused)")
        }
        if last.contains("Could not resolve hostname") {
            return (.cannotFindHost, .noSuchHost, "cannot resolve host name \(login.connectHost) (DNS): \(Self.words(last))")
        }
        if last.contains("timed out") {
            return (.timedOut, .timedOut, "timed out connecting to \(host): \(Self.words(last))")
        }
        if last.contains("subsystem request failed") {
            return (.cannotConnectToHost, .protocol, "\(host) has no sftp service (its sshd has no sftp subsystem)")
        }
        return (.networkConnectionLost, .connectionLost, "the SSH session with \(host) could not be set up: \(Self.words(last))")
    }

    /// Why a connection that was under way ended.
    private func lost() -> (URLError.Code, FailureKind, String) {
        let last = said.last(where: Self.saysWhy)
        return (.networkConnectionLost, .connectionLost,
                "the SSH session with \(hostDescription(login.url)) ended" + (last.map { ": \(Self.words($0))" } ?? ""))
    }

    /// A line of ssh's that may say why it ended: not its debug lines, version, or the figures it prints at its end.
    private static func saysWhy(_ line: String) -> Bool {
        !["debug", "OpenSSH_", "Transferred:", "Bytes per second:", "Authenticated to "].contains { line.hasPrefix($0) }
    }

    /// A line of ssh's, safe for a terminal.
    private static func words(_ line: String) -> String {
        TerminalSafe.sanitize(String(line.prefix(300)))
    }

    // MARK: The password

    static let passwordVariable = "FERRY_SSH_PASSWORD"

    /// A script ssh runs for the password (`SSH_ASKPASS`): it says the variable ssh was started with, for a
    /// password prompt only (a key's passphrase is never answered with it). In a directory of its own, made for
    /// one connection and removed once the login is over.
    private static func askpass(_ directory: inout String?) -> String? {
        guard let base = askpassBase else { return nil }
        var template = Array((base + "/ferry-askpass-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { return nil }
        let path = String(cString: made)
        let script = path + "/askpass"
        let text = "#!/bin/sh\ncase \"$1\" in *assword*) printf '%s\\n' \"$\(passwordVariable)\" ;; *) exit 1 ;; esac\n"
        guard FileManager.default.createFile(atPath: script, contents: Data(text.utf8), attributes: [.posixPermissions: 0o700]) else {
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
        directory = path
        return script
    }

    /// Where askpass scripts go: the first of the candidates that is a directory ferry may write in, on a file
    /// system that runs programs. A hardened host mounts /tmp `noexec`: a script there does not run, and ssh's
    /// password login failed as if the password were wrong.
    static let askpassBase: String? = askpassBase(askpassCandidates())

    static func askpassBase(_ candidates: [String], runsPrograms: (String) -> Bool = runsPrograms) -> String? {
        candidates.first { access($0, W_OK | X_OK) == 0 && runsPrograms($0) }
    }

    /// The temporary directory, `$XDG_RUNTIME_DIR`, `~/.cache`.
    static func askpassCandidates(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var candidates = [NSTemporaryDirectory()]
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { candidates.append(runtime) }
        if let home = environment["HOME"], home.hasPrefix("/") {
            let cache = home + "/.cache"
            try? FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            candidates.append(cache)
        }
        return candidates
    }

    /// The file system under `path` is not mounted `noexec`.
    static func runsPrograms(_ path: String) -> Bool {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return false }
        // ST_NOEXEC (glibc's statvfs.h declares it under _GNU_SOURCE only: Swift does not see it).
        let noexec: UInt = 8
        return info.f_flag & noexec == 0
    }

    private func removeAskpass() {
        guard let askpassDirectory else { return }
        try? FileManager.default.removeItem(atPath: askpassDirectory)
        self.askpassDirectory = nil
    }
}

/// The SFTP connections of the transport: each carries one transfer at a time; one whose transfer ended cleanly
/// waits here for the next transfer with the same login (a thousand small files over one ssh login, not a
/// thousand), and is closed after a minute unused. Transfers at once to one login share its ssh connection: the
/// first connection is a master (OpenSSH's ControlMaster), the next ones sessions over it, which need no login
/// of their own (a login costs the client and the server a post-quantum key exchange each: eight at once took
/// a thousand small files a third of their time). Each session is a channel of its own, with its own window, so
/// one busy transfer does not slow another's. Transport thread only.
final class SFTPConnections {
    private var all: [SFTPConnection] = []
    private var idle: [String: [SFTPConnection]] = [:]
    /// Masters whose own session is over while their ssh still carries others: terminated once those have ended.
    private var lingering: [SFTPConnection] = []
    /// Back from a transfer that stopped part way, until what it still had on its way is answered.
    private var settling: [SFTPConnection] = []
    static let idleLimit: TimeInterval = 60
    /// Sessions over one master besides its own: sshd's MaxSessions is 10 unless its config says less (a master
    /// refused one is full: the next connection is a master of its own).
    static let sessionsPerMaster = 8

    /// A connection for `login`: one waiting unused, else a session over a master with room, else a new master
    /// (or, without a directory for control sockets, a connection alone).
    func take(_ login: SSHLogin, idleTimeout: TimeInterval) -> SFTPConnection {
        let arguments = SFTPConnection.arguments(login, idleTimeout: idleTimeout)
        let key = arguments.joined(separator: "\u{0}") + "\u{0}" + (login.password ?? "")
        if var waiting = idle[key], let found = waiting.popLast() {
            idle[key] = waiting.isEmpty ? nil : waiting
            if found.state == .ready { return found }
        }
        let sharing: SFTPConnection.Sharing
        // A master of this login (in the order they were made) that takes another session.
        if let master = all.first(where: { $0.key == key && hasRoom($0) }), case let .master(path) = master.sharing {
            sharing = .session(of: master, controlPath: path)
        } else if let path = Self.controlPath() {
            sharing = .master(controlPath: path)
        } else {
            sharing = .alone
        }
        let made = SFTPConnection(login: login, key: key, arguments: SFTPConnection.arguments(login, idleTimeout: idleTimeout, sharing: sharing),
                                  password: login.password, sharing: sharing)
        all.append(made)
        return made
    }

    private func hasRoom(_ master: SFTPConnection) -> Bool {
        guard case .master = master.sharing, master.state != .ended, !master.full else { return false }
        return all.count { $0.master === master && $0.state != .ended } < Self.sessionsPerMaster
    }

    /// Back from a transfer that ended cleanly (nothing but its file's CLOSE may be unanswered): kept for the next
    /// one while it is ready, else closed.
    func giveBack(_ connection: SFTPConnection, now: TimeInterval) {
        connection.onChange = nil
        guard connection.state == .ready else {
            connection.close()
            return
        }
        connection.idleSince = now
        idle[connection.key, default: []].append(connection)
    }

    /// Back from a transfer that stopped part way (paused, cancelled, refused by the server): what it still has on
    /// its way is answered to no one, and once all of it is, it waits for the next transfer as `giveBack` keeps one.
    func settle(_ connection: SFTPConnection, now: TimeInterval) {
        connection.onChange = nil
        connection.abandonReplies()
        guard connection.state == .ready else {
            connection.close()
            return
        }
        connection.idleSince = now
        settling.append(connection)
    }

    var descriptors: [(fd: Int32, events: Int16)] { all.flatMap(\.descriptors) }
    /// No connection, and no ssh process left to end or reap.
    var isEmpty: Bool { all.isEmpty && lingering.isEmpty && !SFTPConnection.reaping }

    /// A round of I/O for every connection; those ended or unused too long are let go, sessions waiting for their
    /// master's login start once it is over, and a master's ssh ends after the last session over it.
    func service(now: TimeInterval) {
        for connection in all { connection.service() }
        for connection in all where connection.state == .starting { connection.masterChanged() }
        let settled = settling.filter { $0.state != .ready || $0.unanswered == 0 || now - $0.idleSince > Self.idleLimit }
        settling.removeAll { connection in settled.contains { $0 === connection } }
        for connection in settled {
            if connection.unanswered == 0 { giveBack(connection, now: now) } else { connection.close() }
        }
        for (key, waiting) in idle {
            for connection in waiting where now - connection.idleSince > Self.idleLimit { connection.close() }
            let left = waiting.filter { $0.state == .ready }
            idle[key] = left.isEmpty ? nil : left
        }
        lingering += all.filter { $0.state == .ended && $0.lingers }
        all.removeAll { $0.state == .ended }
        lingering.removeAll { master in
            guard !all.contains(where: { $0.master === master }) else { return false }
            master.terminate()
            return true
        }
        SFTPConnection.reapEnded()
    }

    // MARK: Control sockets

    /// Where masters' control sockets go: a directory of the user's own that no one else may enter, the first of
    /// `$XDG_RUNTIME_DIR/ferry-ssh` and `/tmp/ferry-ssh-UID` that is one or can be made one; nil, and no sharing,
    /// when neither is, or when its path would leave a socket's name too long. Looked at again for each master: an
    /// engine outlives the session whose runtime directory it started in, and /tmp is cleaned (a directory made
    /// there again by another user is not ferry's).
    static func controlDirectory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let uid = getuid()
        var candidates: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { candidates.append(runtime + "/ferry-ssh") }
        candidates.append("/tmp/ferry-ssh-\(uid)")
        return candidates.first { directory in
            // A socket's path has room for 107 bytes; ssh adds 17 while it makes it, ferry up to 19 (`/PID-N`).
            guard directory.utf8.count <= 107 - 17 - 19,
                  directory.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "/._-".unicodeScalars.contains($0)) })
            else { return false }
            if mkdir(directory, 0o700) != 0 && errno != EEXIST { return false }
            var info = stat()
            return lstat(directory, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_uid == uid && info.st_mode & 0o077 == 0
        }
    }

    nonisolated(unsafe) private static var mastersMade = 0

    /// A new master's control socket: one no other master of this process has had (one left by another process
    /// that had this process's number is removed).
    private static func controlPath() -> String? {
        guard let directory = controlDirectory() else { return nil }
        mastersMade += 1
        let path = "\(directory)/\(getpid())-\(mastersMade)"
        unlink(path)
        return path
    }
}
