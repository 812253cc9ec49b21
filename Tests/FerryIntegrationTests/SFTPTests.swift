@_spi(Testing) import FerryEngine
import FerryCore
@testable import FerryTransport
import Foundation
import Testing
import TestHTTPServer
import FerryRPC

/// sftp:// and scp:// through the real engine against OpenSSH's sshd, started for each test on 127.0.0.1 with
/// a throwaway host key and user key (TestSSHServer). What the server read is in its own log. One at a time: each
/// test's set-up (three ssh-keygen runs, sshd's start) blocks a thread of the test pool, and 29 of them at once
/// starved other suites' polls (a fresh clone's CI: two command-line tests waited 65 s for a poll that never ran).
@Suite(.serialized) struct SFTPTests {
    let server: TestSSHServer
    let dir: TempDir

    init() throws {
        server = try TestSSHServer()
        dir = try TempDir()
    }

    /// Engine settings that trust the test server's host key and log in with its user key, nothing else.
    func configuration(knownHosts: String? = nil, identity: String? = nil, maxConcurrent: Int = 4) -> EngineConfiguration {
        var configuration = testConfiguration(maxConcurrent: maxConcurrent)
        configuration.transport.ssh = SSHSettings(knownHosts: knownHosts ?? server.knownHosts, identityFiles: [identity ?? server.userKey],
                                                  user: server.user, agent: false)
        return configuration
    }

    /// A HOME whose ssh config names the test server `box` (its port, user and key) and whose known_hosts
    /// trusts it, as a user's would: for the real binary, which reads them as ssh does.
    func homeWithHostAlias() throws -> String {
        let home = dir.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: server.knownHosts, toPath: home + "/.ssh/known_hosts")
        try "Host box\n  HostName 127.0.0.1\n  Port \(server.port)\n  User \(server.user)\n  IdentityFile \(server.userKey)\n"
            .write(toFile: home + "/.ssh/config", atomically: true, encoding: .utf8)
        return home
    }

    func download(_ url: URL, _ manager: TransferManager, segments: Int = 1, limit: Int64? = nil) -> TransferID {
        var spec = TransferSpec(download: url, directory: dir.path, segments: segments)
        spec.rateLimit = limit
        return manager.add(spec)
    }

    @Test func anSFTPDownloadArrivesWholeUnderItsDecodedName() async throws {
        let body = Resource.randomBytes(count: 3 << 20, seed: 21)
        try server.put(body, at: "a dir/fïlé one.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("a dir/fïlé one.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(item.bytesExpected == Int64(body.count))
        // The host key the server was trusted by, as ssh shows it (the detail view's `Host key`).
        #expect(item.attempts.last?.hostKey == "ED25519 key " + server.hostKeyFingerprint, "\(item.attempts)")
        #expect(dir.files() == ["fïlé one.bin"])
        #expect(dir.contents("fïlé one.bin") == body)
        // The server closes the file once libcurl says so, after the transfer's end.
        try await eventually("the server closed the file") { !server.sftpTransfers.isEmpty }
        #expect(server.sftpTransfers.map(\.read) == [Int64(body.count)])
    }

    @Test func anSCPDownloadArrivesWhole() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 22)
        try server.put(body, at: "scp.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("scp.bin", scheme: "scp"), manager)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("scp.bin") == body)
        #expect(server.sftpTransfers.isEmpty, "scp, not the sftp server")
    }

    @Test func aPausedSFTPDownloadResumesWithTheRestOnly() async throws {
        // 8 MiB at 128 KiB/s: a minute to pause it in, however busy the machine.
        let body = Resource.randomBytes(count: 8 << 20, seed: 23)
        try server.put(body, at: "resume.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("resume.bin"), manager, limit: 128 << 10)
        try await pausePartWay(manager, id, part: dir.path + "/resume.bin.part")
        _ = manager.setRateLimit(id, nil)
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("resume.bin") == body)
        // Where the resume began, as its attempt says (the last buffered bytes may reach the `.part` after the pause).
        let kept = try #require(manager.snapshot(of: id)?.attempts.last?.fromOffset)
        #expect(kept > 0 && kept < Int64(body.count))
        // The server read the file twice: the second time from where the first attempt's bytes on disk ended.
        try await eventually("the server closed the file twice") { server.sftpTransfers.count >= 2 }
        let reads = server.sftpTransfers.filter { $0.path.hasSuffix("/resume.bin") }.map(\.read)
        // (The pause closed the first read's file on a connection that stays; the stat between them opens nothing.)
        #expect(reads.count == 2 && reads.last == Int64(body.count) - kept, "reads \(reads), kept \(kept)")
    }

    @Test func aRemoteFileChangedBetweenAttemptsIsFetchedAgainFromTheStart() async throws {
        let before = Resource.randomBytes(count: 8 << 20, seed: 24)
        try server.put(before, at: "changes.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("changes.bin"), manager, limit: 128 << 10)
        try await pausePartWay(manager, id, part: dir.path + "/changes.bin.part")
        // Same size, another time: another file as far as a resume can tell.
        let after = Resource.randomBytes(count: 8 << 20, seed: 25)
        try server.put(after, at: "changes.bin")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: server.path("changes.bin"))
        _ = manager.setRateLimit(id, nil)
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("changes.bin") == after, "the new file, whole: not the old one's start and the new one's end")
        let restarted = manager.snapshot(of: id)?.attempts.last
        #expect(restarted?.restartedFrom != nil && restarted?.restartWords(over: .sftp) == "the remote file changed: starting over from zero",
                "the item says it started over, and why")
        try await eventually("the server closed the file twice") { server.sftpTransfers.count >= 2 }
        #expect(server.sftpTransfers.last?.read == Int64(after.count))
    }

    @Test func anUnknownHostKeyIsRefusedWithItsFingerprintAndNothingMoves() async throws {
        try server.put(Data(count: 1000), at: "secret.bin")
        let empty = dir.path + "/../ferry-empty-known-hosts-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: empty) }
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        let manager = try TransferManager(configuration: configuration(knownHosts: empty))
        defer { manager.shutdown() }
        let id = download(server.url("secret.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .failed)
        #expect(item.failure?.kind == .hostKeyUnknown)
        #expect(item.lastError?.contains(server.hostKeyFingerprint) == true, "\(item.lastError ?? "")")
        #expect(item.lastError?.contains("ssh-keyscan -p \(server.port) 127.0.0.1") == true, "\(item.lastError ?? "")")
        #expect(item.retries == 0, "not retried")
        #expect(dir.files().isEmpty)
        #expect(!server.logText.contains("Accepted publickey"), "no login was even tried")
    }

    @Test func aChangedHostKeyIsRefusedLoudly() async throws {
        try server.put(Data(count: 1000), at: "secret.bin")
        let other = try TestSSHServer()
        let forged = dir.path + "/../ferry-forged-known-hosts-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: forged) }
        // Another key on record for this host and port.
        let otherKey = try String(contentsOfFile: other.knownHosts, encoding: .utf8).split(separator: " ").dropFirst().joined(separator: " ")
        try "[127.0.0.1]:\(server.port) \(otherKey)".write(toFile: forged, atomically: true, encoding: .utf8)
        let manager = try TransferManager(configuration: configuration(knownHosts: forged))
        defer { manager.shutdown() }
        let id = download(server.url("secret.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.failure?.kind == .hostKeyChanged)
        #expect(item.lastError?.contains("HAS CHANGED") == true && item.lastError?.contains(server.hostKeyFingerprint) == true,
                "\(item.lastError ?? "")")
        #expect(dir.files().isEmpty)
    }

    @Test func aLoginRefusedSaysWhatWasTried() async throws {
        try server.put(Data(count: 1000), at: "secret.bin")
        let stranger = dir.path + "/../ferry-stranger-key-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: stranger); try? FileManager.default.removeItem(atPath: stranger + ".pub") }
        try TestSSHServer.run(TestSSHServer.keygen, ["-q", "-t", "ed25519", "-N", "", "-f", stranger])
        let manager = try TransferManager(configuration: configuration(identity: stranger))
        defer { manager.shutdown() }
        let id = download(server.url("secret.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.failure?.kind == .loginRefused)
        #expect(item.lastError?.contains("key \(stranger)") == true, "\(item.lastError ?? "")")
        #expect(item.retries == 0)
    }

    @Test func aMissingRemoteFileIsNoSuchFile() async throws {
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("nothing here.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.failure?.kind == .noSuchFile)
        #expect(item.lastError?.contains("nothing here.bin") == true, "\(item.lastError ?? "")")
        #expect(dir.files().isEmpty)
    }

    @Test func segmentsOverSFTPFetchTheirRangesOnConnectionsOfTheirOwn() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 26)
        try server.put(body, at: "big.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("big.bin"), manager, segments: 4)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(dir.contents("big.bin") == body)
        #expect(item.segments?.count == 4)
        // The server read the whole file once, in parts: the probe, stopped for the ranges, read nothing (its
        // reads wait until the engine's stop has reached the transport).
        try await eventually("the server closed the file five times") { server.sftpTransfers.count >= 5 }
        let reads = server.sftpTransfers.filter { $0.path.hasSuffix("/big.bin") }.map(\.read)
        #expect(reads.count == 5, "\(reads)")
        #expect(reads.reduce(0, +) == Int64(body.count), "\(reads) \(server.sftpTransfers)")
    }

    @Test func anSFTPUploadWritesTheFileWhole() async throws {
        let body = Resource.randomBytes(count: 5 << 20, seed: 27)
        let local = dir.path + "/up load.bin"
        try body.write(to: URL(fileURLWithPath: local))
        try server.put(Data(), at: "in/.keep")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: local), contentType: "application/octet-stream")),
                                          to: server.url("in/úp load.bin")))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(item.bytesDone == Int64(body.count))
        #expect(item.attempts.last?.hostKey == "ED25519 key " + server.hostKeyFingerprint, "\(item.attempts)")
        #expect(FileManager.default.contents(atPath: server.path("in/úp load.bin")) == body)
        try await eventually("the server closed the file") { !server.sftpTransfers.isEmpty }
        #expect(server.sftpTransfers.map(\.written) == [Int64(body.count)])
    }

    /// An upload paused part way: the server's copy so far, and the local file to send.
    func pausedUpload(_ body: Data, as name: String, _ manager: TransferManager) async throws -> TransferID {
        let local = dir.path + "/" + name
        try body.write(to: URL(fileURLWithPath: local))
        var spec = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: local), contentType: "application/octet-stream")),
                                to: server.url("in/" + name))
        // At 128 KiB/s: a minute to pause it in, however busy the machine.
        spec.rateLimit = 128 << 10
        try server.put(Data(), at: "in/.keep")
        let id = manager.add(spec)
        try await eventually("some sent") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
        manager.pause(id)
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        try await eventually("the server closed its copy") { server.sftpTransfers.count == 1 }
        _ = manager.setRateLimit(id, nil)
        return id
    }

    @Test func aPausedSFTPUploadSendsOnlyTheRestOnceTheServersBytesCheckOut() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 28)
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = try await pausedUpload(body, as: "resume up.bin", manager)
        let kept = try #require(server.sftpTransfers.first?.written)
        #expect(kept > 0 && kept < Int64(body.count))
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(FileManager.default.contents(atPath: server.path("in/resume up.bin")) == body)
        try await eventually("the server closed the appended file") { server.sftpTransfers.contains { $0.written > 0 && $0.written != kept } }
        // Written in all: the file once. Between: its size asked and its last MiB read back, nothing written.
        let log = server.sftpTransfers
        #expect(log.map(\.written).reduce(0, +) == Int64(body.count), "\(log)")
        #expect(log.contains { $0.read == min(kept, 1 << 20) }, "the last MiB the server had was read back: \(log)")
    }

    @Test func aRemoteFileThatIsNotThisOnesStartIsWrittenAgainWhole() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 29)
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = try await pausedUpload(body, as: "stranger.bin", manager)
        let kept = try #require(server.sftpTransfers.first?.written)
        // Someone else's bytes of the same length now stand there.
        try server.put(Resource.randomBytes(count: Int(kept), seed: 30), at: "in/stranger.bin")
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(FileManager.default.contents(atPath: server.path("in/stranger.bin")) == body)
        try await eventually("the server closed the rewritten file") { server.sftpTransfers.contains { $0.written == Int64(body.count) } }
    }

    /// The command line as a user runs it: keys from an ssh-agent (SSH_AUTH_SOCK), the known host from ~/.ssh, no
    /// key file anywhere.
    @Test func getLogsInThroughTheAgentAndTrustsTheKnownHostsOfHome() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 31)
        try server.put(body, at: "agent.bin")
        let home = dir.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: server.knownHosts, toPath: home + "/.ssh/known_hosts")
        let socket = try server.startAgent()
        let out = dir.path + "/out"
        let result = try await runFerry(["get", "--no-tui", "-o", out, server.url("agent.bin").absoluteString],
                                        environment: ["HOME": home, "SSH_AUTH_SOCK": socket])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/agent.bin") == body)
        // Without the agent (and no key file in HOME), the login is refused and says what was tried.
        let refused = try await runFerry(["get", "--no-tui", "-o", out + "2", server.url("agent.bin").absoluteString],
                                         environment: ["HOME": home])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("refused the login") && refused.stderr.contains("no key file"), "\(refused.stderr)")
    }

    @Test func aCancelledTransferLeavesTheOthersToTheSameHostRunning() async throws {
        // 4 MiB at 64 KiB/s each: a minute to cancel the second in, however busy the machine.
        let bodies = (0..<3).map { Resource.randomBytes(count: 4 << 20, seed: 40 + UInt64($0)) }
        for (index, body) in bodies.enumerated() { try server.put(body, at: "many/\(index).bin") }
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let ids = (0..<3).map { download(server.url("many/\($0).bin"), manager, limit: 64 << 10) }
        try await eventually("the second moving") { (manager.snapshot(of: ids[1])?.bytesDone ?? 0) > 0 }
        manager.cancel(ids[1])
        for id in [ids[0], ids[2]] { _ = manager.setRateLimit(id, nil) }
        try await finish(manager, [ids[0], ids[2]])
        #expect(manager.snapshot(of: ids[1])?.state == .cancelled)
        #expect(dir.contents("0.bin") == bodies[0] && dir.contents("2.bin") == bodies[2])
        // (A cancelled item keeps its .part file: asked again, it resumes.)
        #expect(!dir.files().contains("1.bin"), "\(dir.files())")
    }

    /// A host alias of the user's ssh config: its name, port, user and key apply as they do for `ssh box`.
    @Test func aHostAliasOfTheSSHConfigReachesItsHostAsSSHWould() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 32)
        try server.put(body, at: "alias.bin")
        let home = try homeWithHostAlias()
        let out = dir.path + "/out"
        let url = "sftp://box" + server.url("alias.bin").path
        let result = try await runFerry(["get", "--no-tui", "-o", out, url], environment: ["HOME": home, "USER": "nobody-here"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/alias.bin") == body)
    }

    /// `get -r` over sftp: the tree walked by its `ls -l` listings (a symlink on the server not followed), the files
    /// fetched over sftp keeping its layout; again, no file is opened on the server.
    @Test func aTreeIsWalkedOverSFTPAndARerunOpensNoFile() async throws {
        let files = ["top.txt": Data("top\n".utf8), "a b/inner é.txt": Data("inner\n".utf8),
                     "deep/l1/x.bin": Resource.randomBytes(count: 300_000, seed: 434)]
        for (path, body) in files { try server.put(body, at: "tree/" + path) }
        try FileManager.default.createSymbolicLink(atPath: server.path("tree/link"), withDestinationPath: "/etc")
        let home = try homeWithHostAlias()
        let out = dir.path + "/out"
        let url = "sftp://box" + server.url("tree").path + "/"
        let first = try await runFerry(["get", "-r", "--no-tui", "-o", out, url], environment: ["HOME": home])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("3 files in 4 directories: 3 to download, 0 already here, 0 left alone"), "\(first.stderr)")
        for (path, body) in files { #expect(FileManager.default.contents(atPath: out + "/" + path) == body, "\(path)") }
        #expect(!FileManager.default.fileExists(atPath: out + "/link"))
        let read = server.sftpTransfers.count
        #expect(read == 3, "\(server.sftpTransfers)")
        let again = try await runFerry(["get", "-r", "--no-tui", "-o", out, url], environment: ["HOME": home])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files in 4 directories: 0 to download, 3 already here, 0 left alone"), "\(again.stderr)")
        #expect(server.sftpTransfers.count == read, "\(server.sftpTransfers)")
    }

    /// `put -r` over sftp: each directory made on the server (`mkdir`), each file written whole, blanks and
    /// non-ASCII kept; again, nothing is written.
    @Test func aTreeGoesUpOverSFTPAndARerunWritesNothing() async throws {
        let source = dir.path + "/src"
        let files = ["top.txt": Data("top\n".utf8), "a b/inner é.txt": Data("inner\n".utf8),
                     "deep/l1/x.bin": Resource.randomBytes(count: 300_000, seed: 435)]
        try writeFiles(files, under: source)
        let home = try homeWithHostAlias()
        let url = "sftp://box" + server.url("up").path + "/"
        let first = try await runFerry(["put", "-r", "--no-tui", source, url], environment: ["HOME": home])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("3 files: 3 to upload, 0 already there, 4 directories made, 0 left out"), "\(first.stderr)")
        for (path, body) in files { #expect(FileManager.default.contents(atPath: server.path("up/" + path)) == body, "\(path)") }
        let written = server.sftpTransfers.filter { $0.written > 0 }.count
        #expect(written == 3, "\(server.sftpTransfers)")
        let again = try await runFerry(["put", "-r", "--no-tui", source, url], environment: ["HOME": home])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("3 files: 0 to upload, 3 already there, 0 directories made, 0 left out"), "\(again.stderr)")
        #expect(server.sftpTransfers.filter { $0.written > 0 }.count == written, "\(server.sftpTransfers)")
    }

    /// A password from the user's .netrc is offered (and a wrong one refused by sshd), and shown nowhere.
    @Test func aWrongNetrcPasswordIsRefusedAndNeverShown() async throws {
        let server = try TestSSHServer(passwords: true)
        try server.put(Data(count: 1000), at: "locked.bin")
        let netrc = dir.path + "/netrc"
        try "machine 127.0.0.1 login \(server.user) password not-the-password-4711\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        var configuration = testConfiguration()
        configuration.transport.ssh = SSHSettings(knownHosts: server.knownHosts, identityFiles: [], user: "someone-else", agent: false)
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        var spec = TransferSpec(download: server.url("locked.bin"), directory: dir.path)
        spec.netrcFile = netrc
        let id = manager.add(spec)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.failure?.kind == .loginRefused)
        #expect(item.lastError?.contains("the .netrc password") == true && item.lastError?.contains("of \(server.user)") == true,
                "\(item.lastError ?? "")")
        // The password's words, not its digits: the message names the server's port, which held "4711" once (47119).
        #expect(!(item.lastError ?? "").contains("not-the-password"), "\(item.lastError ?? "")")
        #expect(server.logText.contains("Failed password for \(server.user)"), "sshd was offered the password: \(server.logText)")
        #expect(dir.files() == ["netrc"])
    }

    /// A hardened host mounts its temporary directory `noexec`: the askpass script goes where it may run
    /// (`~/.cache` here), and the password is still offered (sshd logs the wrong one). Without that, ssh could not
    /// run the script and the login failed before any password was sent. Needs root for the mount (CI has it).
    @Test func aPasswordIsOfferedWhenTheTemporaryDirectoryRunsNoPrograms() async throws {
        guard getuid() == 0 else { return }
        let server = try TestSSHServer(passwords: true)
        try server.put(Data(count: 1000), at: "locked.bin")
        let noexec = dir.path + "/noexec-tmp"
        try FileManager.default.createDirectory(atPath: noexec, withIntermediateDirectories: true)
        // (Root without the right to mount, in a container: nothing to test here.)
        guard (try? TestSSHServer.run("/bin/mount", ["-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", noexec])) != nil else { return }
        defer { _ = try? TestSSHServer.run("/bin/umount", [noexec]) }
        let home = dir.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: server.knownHosts, toPath: home + "/.ssh/known_hosts")
        let netrc = dir.path + "/netrc"
        try "machine 127.0.0.1 login \(server.user) password not-the-password-4712\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        let result = try await runFerry(["get", "--no-tui", "--netrc-file", netrc, "-o", dir.path + "/out", server.url("locked.bin").absoluteString],
                                        environment: ["HOME": home, "TMPDIR": noexec])
        #expect(result.status != 0)
        #expect(result.stderr.contains("the .netrc password"), "\(result.stderr)")
        #expect(server.logText.contains("Failed password for \(server.user)"), "sshd was offered the password: \(server.logText)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: noexec)) ?? []).isEmpty)
    }

    /// An item's limit holds at the server: what the sftp server has written never runs ahead of the rate (a
    /// quarter second's burst and the send buffers allowed), however long it is watched.
    @Test func anUploadsLimitHoldsAtTheServer() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 33)
        let local = dir.path + "/limited.bin"
        try body.write(to: URL(fileURLWithPath: local))
        try server.put(Data(), at: "in/.keep")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let rate: Int64 = 256 << 10
        var spec = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: local), contentType: "application/octet-stream")),
                                to: server.url("in/limited.bin"))
        spec.rateLimit = rate
        let start = Date()
        let id = manager.add(spec)
        func atServer() -> Int64 { (try? FileManager.default.attributesOfItem(atPath: server.path("in/limited.bin"))[.size] as? Int64) ?? 0 }
        // Watched from its first bytes at the server for two seconds (each against the time since the add).
        try await eventually("its first bytes at the server") { atServer() > 0 }
        let moving = Date()
        var samples: [(seconds: Double, size: Int64)] = []
        while Date().timeIntervalSince(moving) < 2 {
            samples.append((Date().timeIntervalSince(start), atServer()))
            try await Task.sleep(for: .milliseconds(100))
        }
        manager.cancel(id)
        let allowance: Int64 = 1 << 20
        let ahead = samples.filter { Double($0.size) > Double(rate) * $0.seconds + Double(allowance) }
        #expect(ahead.isEmpty, "the server had more than the rate allows: \(ahead)")
        #expect((samples.last?.size ?? 0) > 0, "it moved")
    }

    @Test func aKeyThatNeedsItsPassphraseSaysSo() async throws {
        try server.put(Data(count: 1000), at: "secret.bin")
        let locked = dir.path + "/../ferry-locked-key-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: locked); try? FileManager.default.removeItem(atPath: locked + ".pub") }
        try TestSSHServer.run(TestSSHServer.keygen, ["-q", "-t", "ed25519", "-N", "a passphrase", "-f", locked])
        #expect(SSHSettings.needsPassphrase(locked))
        #expect(!SSHSettings.needsPassphrase(server.userKey))
        let manager = try TransferManager(configuration: configuration(identity: locked))
        defer { manager.shutdown() }
        let id = download(server.url("secret.bin"), manager)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.failure?.kind == .loginRefused)
        #expect(item.lastError?.contains("needs its passphrase") == true && item.lastError?.contains("ssh-add \(locked)") == true,
                "\(item.lastError ?? "")")
    }

    /// aria2's addUri takes an sftp URI as aria2 itself does (its web UIs add them), and tellStatus reports it.
    @Test func aria2sAddUriTakesAnSFTPURI() async throws {
        let body = Resource.randomBytes(count: 1 << 20, seed: 34)
        try server.put(body, at: "rpc.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let rpc = Aria2RPC(manager: manager, secret: "t", defaultDirectory: dir.path)
        func call(_ method: String, _ params: [Any]) throws -> [String: Any] {
            let request: [String: Any] = ["jsonrpc": "2.0", "id": "1", "method": method, "params": ["token:t"] + params]
            let answer = rpc.answer(try JSONSerialization.data(withJSONObject: request))
            return try #require(try JSONSerialization.jsonObject(with: answer.data) as? [String: Any])
        }
        let added = try call("aria2.addUri", [[server.url("rpc.bin").absoluteString]])
        let gid = try #require(added["result"] as? String, "\(added)")
        try await finish(manager, [TransferID(1)])
        let status = try #require(try call("aria2.tellStatus", [gid])["result"] as? [String: Any])
        #expect(status["status"] as? String == "complete")
        #expect(status["completedLength"] as? String == "\(body.count)")
        #expect(dir.contents("rpc.bin") == body)
    }

    /// A directory is not a file: said at once, not retried, nothing saved (a directory's listing is not its body).
    @Test func aDirectoryIsNotDownloadedAsAFile() async throws {
        try server.put(Data(count: 10), at: "folder/inside.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let slash = download(URL(string: server.url("folder").absoluteString + "/")!, manager)
        let bare = download(server.url("folder"), manager)
        try await finish(manager, [slash, bare])
        let first = try #require(manager.snapshot(of: slash))
        #expect(first.failure?.kind == .isDirectory && first.retries == 0, "\(first.lastError ?? "")")
        let second = try #require(manager.snapshot(of: bare))
        #expect(second.failure?.kind == .isDirectory && second.retries == 0, "\(second.lastError ?? "")")
        #expect(dir.files().isEmpty, "\(dir.files())")
    }

    /// Debian's and Ubuntu's ssh writes known_hosts with hashed host names (HashKnownHosts yes): they are known too,
    /// in a file whose path has a blank and a %.
    @Test func aHashedKnownHostsEntryIsKnown() async throws {
        let body = Resource.randomBytes(count: 100_000, seed: 35)
        try server.put(body, at: "hashed.bin")
        // A blank and a % in its path (ssh reads both as its own unless quoted).
        let hashed = dir.path + "/known hosts 100%"
        try FileManager.default.copyItem(atPath: server.knownHosts, toPath: hashed)
        try TestSSHServer.run(TestSSHServer.keygen, ["-q", "-H", "-f", hashed])
        #expect(try String(contentsOfFile: hashed, encoding: .utf8).hasPrefix("|1|"))
        try? FileManager.default.removeItem(atPath: hashed + ".old")
        let manager = try TransferManager(configuration: configuration(knownHosts: hashed))
        defer { manager.shutdown() }
        let id = download(server.url("hashed.bin"), manager)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(dir.contents("hashed.bin") == body)
    }

    /// Files one after another do not cost a login each: a connection whose transfer ended carries the next one
    /// (a thousand small files over one ssh login, not a thousand).
    @Test func filesOneAfterAnotherShareOneLogin() async throws {
        let bodies = (0..<12).map { Resource.randomBytes(count: 20_000 + $0, seed: 40 + UInt64($0)) }
        for (i, body) in bodies.enumerated() { try server.put(body, at: "small/\(i).bin") }
        let manager = try TransferManager(configuration: configuration(maxConcurrent: 1))
        defer { manager.shutdown() }
        let ids = bodies.indices.map { download(server.url("small/\($0).bin"), manager) }
        try await finish(manager, Set(ids))
        for (i, body) in bodies.enumerated() { #expect(dir.contents("\(i).bin") == body, "\(i).bin") }
        let logins = server.logText.components(separatedBy: "Accepted publickey").count - 1
        #expect(logins == 1, "\(logins) logins for \(bodies.count) files")
    }

    /// A server's banner is the server's words, shown before the login: one that says what ssh says of a changed or
    /// unknown host key does not make a refused login a host key failure, nor stop one that logs in.
    @Test func aBannerThatMimicsSSHSaysNothingAboutTheHostKey() async throws {
        let banner = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
            + "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
            + "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\nHost key verification failed.\n"
            + "No ED25519 host key is known for [127.0.0.1]:22 and you have requested strict checking.\n"
            + "ssh: connect to host 127.0.0.1 port 22: Connection refused\n"
        let loud = try TestSSHServer(banner: banner)
        let body = Resource.randomBytes(count: 100_000, seed: 90)
        try loud.put(body, at: "banner.bin")
        var configuration = testConfiguration()
        configuration.transport.ssh = SSHSettings(knownHosts: loud.knownHosts, identityFiles: [loud.userKey], user: loud.user, agent: false)
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let good = download(loud.url("banner.bin"), manager)
        // A key the server does not take: refused, in the login's words.
        var refusedConfiguration = testConfiguration()
        refusedConfiguration.transport.ssh = SSHSettings(knownHosts: loud.knownHosts, identityFiles: [server.userKey], user: loud.user, agent: false)
        let other = try TransferManager(configuration: refusedConfiguration)
        defer { other.shutdown() }
        let refused = other.add(TransferSpec(download: loud.url("banner.bin"), directory: dir.path, fileName: "refused.bin"))
        try await finish(manager, [good])
        try await finish(other, [refused])
        #expect(manager.snapshot(of: good)?.state == .completed, "\(manager.snapshot(of: good)?.lastError ?? "")")
        #expect(dir.contents("banner.bin") == body)
        let failed = try #require(other.snapshot(of: refused))
        #expect(failed.failure?.kind == .loginRefused, "\(failed.failure?.kind as Any): \(failed.lastError ?? "")")
    }

    /// A file whose size the server says is 0 but which has content (Linux's /proc files) is read to its end, as
    /// OpenSSH's sftp reads it; an empty file is still empty.
    @Test func aFileThatSaysItsSizeIsZeroIsReadToItsEnd() async throws {
        try server.put(Data(), at: "empty.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        // The server's own /proc file: the sftp server's status, 0 bytes by its size.
        let proc = URL(string: "sftp://127.0.0.1:\(server.port)/proc/self/status")!
        let ids = [download(proc, manager), download(server.url("empty.bin"), manager)]
        try await finish(manager, Set(ids))
        for id in ids { #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")") }
        let status = String(decoding: dir.contents("status") ?? Data(), as: UTF8.self)
        #expect(status.hasPrefix("Name:") && status.contains("\nPid:"), "\(status)")
        #expect(dir.contents("empty.bin") == Data())
    }

    /// Files at once to one host share one login too: the first connection is a master (OpenSSH's ControlMaster),
    /// the others sessions over it; each item still shows the host key the master checked.
    @Test func filesAtOnceShareOneLogin() async throws {
        let bodies = (0..<8).map { Resource.randomBytes(count: 300_000 + $0, seed: 60 + UInt64($0)) }
        for (i, body) in bodies.enumerated() { try server.put(body, at: "at once/\(i).bin") }
        let manager = try TransferManager(configuration: configuration(maxConcurrent: 8))
        defer { manager.shutdown() }
        let ids = bodies.indices.map { download(server.url("at once/\($0).bin"), manager) }
        try await finish(manager, Set(ids))
        for (i, body) in bodies.enumerated() { #expect(dir.contents("\(i).bin") == body, "\(i).bin") }
        for id in ids {
            let item = try #require(manager.snapshot(of: id))
            #expect(item.state == .completed && item.retries == 0, "\(item.lastError ?? "")")
            #expect(item.attempts.last?.hostKey == "ED25519 key " + server.hostKeyFingerprint, "\(item.attempts)")
        }
        let logins = server.logText.components(separatedBy: "Accepted publickey").count - 1
        #expect(logins == 1, "\(logins) logins for \(bodies.count) files at once")
        #expect(server.sftpTransfers.count == bodies.count, "\(server.sftpTransfers)")
    }

    /// A server that gives one connection fewer sessions than ferry asks for (sshd's MaxSessions) refuses the
    /// rest: they log in themselves, and every file arrives without a failure.
    @Test func aServerThatAllowsFewSessionsStillGetsEveryFile() async throws {
        let strict = try TestSSHServer(maxSessions: 2)
        defer { strict.stop() }
        let bodies = (0..<6).map { Resource.randomBytes(count: 200_000 + $0, seed: 70 + UInt64($0)) }
        for (i, body) in bodies.enumerated() { try strict.put(body, at: "few/\(i).bin") }
        var configuration = testConfiguration(maxConcurrent: 6)
        configuration.transport.ssh = SSHSettings(knownHosts: strict.knownHosts, identityFiles: [strict.userKey], user: strict.user, agent: false)
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let ids = bodies.indices.map { download(strict.url("few/\($0).bin"), manager) }
        try await finish(manager, Set(ids))
        for (i, body) in bodies.enumerated() { #expect(dir.contents("\(i).bin") == body, "\(i).bin") }
        for id in ids {
            let item = try #require(manager.snapshot(of: id))
            #expect(item.state == .completed && item.retries == 0, "\(item.lastError ?? "")")
        }
        let logins = strict.logText.components(separatedBy: "Accepted publickey").count - 1
        #expect(logins >= 2, "the server refused sessions, and \(logins) logins were made")
    }

    /// The ssh processes end with ferry, even with a ferry killed mid-transfer: the sessions on ferry's end of
    /// them closing, the master with the last of its sessions (no ssh left behind in the background).
    @Test func noSSHOutlivesAKilledFerry() async throws {
        for name in ["a", "b"] { try server.put(Resource.randomBytes(count: 2 << 20, seed: 80), at: "kill/\(name).bin") }
        let home = try homeWithHostAlias()
        // A short runtime directory: a control socket's path has room for 107 bytes.
        var template = Array("/tmp/ferry-run-XXXXXX".utf8CString)
        let runtime = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let out = dir.path + "/out"
        let child = ChildProcess()
        child.executableURL = builtExecutable("ferry")
        child.arguments = ["get", "--no-tui", "-j", "2", "--limit-rate", "64K", "-o", out,
                           "sftp://box" + server.url("kill/a.bin").path, "sftp://box" + server.url("kill/b.bin").path]
        child.environment = isolatedEnvironment(stateDir: dir.path + "/state", configHome: dir.path + "/config")
            .merging(["HOME": home, "XDG_RUNTIME_DIR": runtime]) { $1 }
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        // A master and a session over it, each an ssh naming the control socket in `runtime`.
        try await eventually("a master and a session under way: \(sshNaming(runtime))") {
            sshNaming(runtime).count == 2 && (try? FileManager.default.contentsOfDirectory(atPath: out).count) == 2
        }
        kill(child.processIdentifier, SIGKILL)
        await exited(child)
        try await eventually("every ssh ended: \(sshNaming(runtime))") { sshNaming(runtime).isEmpty }
        let control = (try? FileManager.default.contentsOfDirectory(atPath: runtime + "/ferry-ssh")) ?? []
        #expect(control.isEmpty, "the master removed its control socket: \(control)")
    }

    /// The processes whose command line names `path` (ssh's `ControlPath=...`).
    func sshNaming(_ path: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let pid = Int32(entry), let line = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            return String(decoding: line, as: UTF8.self).contains(path) ? pid : nil
        }
    }

    /// A kept connection the server has since ended (a restart, an idle timeout) is replaced: the next file
    /// arrives without a failure or a retry.
    @Test func aKeptConnectionTheServerEndedIsReplacedWithoutARetry() async throws {
        let first = Resource.randomBytes(count: 50_000, seed: 52)
        let second = Resource.randomBytes(count: 60_000, seed: 53)
        try server.put(first, at: "one.bin")
        try server.put(second, at: "two.bin")
        let manager = try TransferManager(configuration: configuration(maxConcurrent: 1))
        defer { manager.shutdown() }
        let one = download(server.url("one.bin"), manager)
        try await finish(manager, [one])
        #expect(server.dropConnections() >= 1, "the kept connection's server side")
        let two = download(server.url("two.bin"), manager)
        try await finish(manager, [two])
        let item = try #require(manager.snapshot(of: two))
        #expect(item.state == .completed && item.retries == 0, "\(item.state) \(item.retries) \(item.lastError ?? "")")
        #expect(dir.contents("two.bin") == second)
    }

    /// An engine started from a session that has since ended has no agent (or a dead one): an item logs in with
    /// the agent of the session that asked for it (its SSH_AUTH_SOCK, kept on the item), while that is there.
    @Test func anItemLogsInWithTheAgentOfTheSessionThatAskedForIt() async throws {
        let body = Resource.randomBytes(count: 200_000, seed: 54)
        try server.put(body, at: "asked.bin")
        let socket = try server.startAgent()
        // The engine's own ways: no agent, a key file that does not exist.
        let manager = try TransferManager(configuration: configuration(identity: dir.path + "/no key here"))
        defer { manager.shutdown() }
        var asked = TransferSpec(download: server.url("asked.bin"), directory: dir.path)
        asked.takeAgent(socket)
        #expect(asked.sshAgent == socket)
        let id = manager.add(asked)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(dir.contents("asked.bin") == body)
        // A session whose agent is gone (its socket with it): the engine's own ways are tried, and refused.
        var gone = TransferSpec(download: server.url("asked.bin"), directory: dir.path, fileName: "gone.bin")
        gone.takeAgent(dir.path + "/ended-session.sock")
        let refused = manager.add(gone)
        try await finish(manager, [refused])
        let failed = try #require(manager.snapshot(of: refused))
        #expect(failed.failure?.kind == .loginRefused, "\(failed.lastError ?? "")")
        #expect(!(failed.lastError ?? "").contains("asking session"), "\(failed.lastError ?? "")")
        // An http item keeps no agent.
        var http = TransferSpec(download: URL(string: "http://127.0.0.1/x")!, directory: dir.path)
        http.takeAgent(socket)
        #expect(http.sshAgent == nil)
    }

    /// A connection cut part way (the server's side of it ended, as a dropped link ends it): the retry goes on
    /// from the `.part` file's end, and the server reads only the rest.
    @Test func aCutSFTPDownloadResumesWithTheRestOnly() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 55)
        try server.put(body, at: "cut.bin")
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = download(server.url("cut.bin"), manager, limit: 128 << 10)
        try await eventually("some on disk") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
        #expect(server.dropConnections() >= 1)
        try await eventually("retried") { (manager.snapshot(of: id)?.retries ?? 0) >= 1 }
        _ = manager.setRateLimit(id, nil)
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(dir.contents("cut.bin") == body)
        let from = try #require(item.attempts.last?.fromOffset)
        #expect(from > 0 && item.attempts.last?.restartedFrom == nil, "resumed, not started over: \(item.attempts)")
        try await eventually("the server closed the file") { server.sftpTransfers.contains { $0.read == Int64(body.count) - from } }
    }

    /// An upload whose connection is cut part way: the retry asks the server what it has, checks its last MiB and
    /// writes only the rest; the server wrote the file once in all.
    @Test func aCutSFTPUploadWritesOnlyTheRest() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 56)
        let local = dir.path + "/cut up.bin"
        try body.write(to: URL(fileURLWithPath: local))
        try server.put(Data(), at: "in/.keep")
        var spec = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: local), contentType: "application/octet-stream")),
                                to: server.url("in/cut up.bin"))
        spec.rateLimit = 128 << 10
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec)
        try await eventually("some sent") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
        #expect(server.dropConnections() >= 1)
        try await eventually("retried") { (manager.snapshot(of: id)?.retries ?? 0) >= 1 }
        _ = manager.setRateLimit(id, nil)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(FileManager.default.contents(atPath: server.path("in/cut up.bin")) == body)
        try await eventually("the server closed the appended file") { server.sftpTransfers.filter { $0.written > 0 }.count >= 2 }
        let log = server.sftpTransfers
        #expect(log.map(\.written).reduce(0, +) == Int64(body.count), "written once in all: \(log)")
        #expect(log.contains { $0.read > 0 && $0.read <= 1 << 20 && $0.written == 0 }, "the last MiB the server had was read back: \(log)")
    }

    /// `put --remote-temp`: the bytes go to NAME.part and become NAME (in place of what was there) only once
    /// whole; a paused upload goes on in NAME.part, appending the rest only.
    @Test func aRemoteTempUploadTakesItsNameOnlyOnceWhole() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 57)
        let before = Resource.randomBytes(count: 1000, seed: 58)
        try server.put(before, at: "in/temp.bin")
        let local = dir.path + "/temp.bin"
        try body.write(to: URL(fileURLWithPath: local))
        var upload = UploadSpec(method: "PUT", body: .raw(.file(path: local), contentType: "application/octet-stream"))
        upload.remoteTemp = true
        var spec = TransferSpec(upload: upload, to: server.url("in/temp.bin"))
        spec.rateLimit = 128 << 10
        let manager = try TransferManager(configuration: configuration())
        defer { manager.shutdown() }
        let id = manager.add(spec)
        try await eventually("some sent") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
        manager.pause(id)
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        try await eventually("the server closed its copy") { server.sftpTransfers.count == 1 }
        // Part way: the bytes so far are NAME.part's; NAME is still what was there.
        let partial = FileManager.default.contents(atPath: server.path("in/temp.bin.part"))
        #expect((partial?.count ?? 0) > 0 && partial.map { body.starts(with: $0) } == true)
        #expect(FileManager.default.contents(atPath: server.path("in/temp.bin")) == before)
        _ = manager.setRateLimit(id, nil)
        manager.resume(id)
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed, "\(manager.snapshot(of: id)?.lastError ?? "")")
        #expect(FileManager.default.contents(atPath: server.path("in/temp.bin")) == body)
        #expect(!FileManager.default.fileExists(atPath: server.path("in/temp.bin.part")))
        try await eventually("the server closed the appended file") { server.sftpTransfers.filter { $0.written > 0 }.count >= 2 }
        #expect(server.sftpTransfers.map(\.written).reduce(0, +) == Int64(body.count), "appended, not written again: \(server.sftpTransfers)")
    }
}
