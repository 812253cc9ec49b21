import Foundation
@testable import FerryTransport
import Testing

/// SFTP version 3 as ferry frames and reads it (SFTPPacket): what the bytes on the wire are, and what a reply
/// that arrives in pieces, or makes no sense, comes to. The conversation itself is tested against OpenSSH's
/// sftp-server (SFTPTests).
@Suite struct SFTPPacketTests {
    /// A reply as a server frames it: length, kind, id, then `payload`.
    func reply(_ kind: SFTPPacket.Kind, id: UInt32, _ payload: [UInt8]) -> Data {
        var body: [UInt8] = [kind.rawValue] + be32(id) + payload
        body = be32(UInt32(body.count)) + body
        return Data(body)
    }

    func be32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    func be64(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    func string(_ text: String) -> [UInt8] { be32(UInt32(text.utf8.count)) + Array(text.utf8) }

    @Test func aRequestIsFramedAsTheDraftSays() {
        let packet = SFTPPacket.request(.read, id: 7) { $0.string(Data([1, 2])); $0.uint64(5); $0.uint32(100) }
        // length 1 + 4 + (4 + 2) + 8 + 4 = 23, kind 5 (READ), id 7
        var read: [UInt8] = be32(23) + [5] + be32(7)
        read += be32(2) + [1, 2]
        read += be64(5) + be32(100)
        #expect(Array(packet) == read)
        #expect(Array(SFTPPacket.hello) == be32(5) + [1] + be32(3))
        // A WRITE's head says the length of the data that follows it.
        let head = SFTPPacket.writeHead(id: 9, handle: Data([4]), offset: 1 << 33, count: 1000)
        var expected: [UInt8] = be32(1 + 4 + 5 + 8 + 4 + 1000) + [6]
        expected += be32(9) + be32(1) + [4]
        expected += be64(1 << 33) + be32(1000)
        #expect(Array(head) == expected)
    }

    @Test func aReplyThatHasNotAllArrivedWaitsAndTwoInOneReadAreBothRead() throws {
        let data = reply(.data, id: 3, string("hello"))
        let status = reply(.status, id: 4, be32(1) + string("End of file") + string(""))
        let both = data + status
        for cut in 0..<data.count {
            #expect(try SFTPPacket.parse(both.prefix(cut), from: 0) == nil, "\(cut) bytes are not a packet yet")
        }
        let first = try #require(try SFTPPacket.parse(both, from: 0))
        #expect(first.id == 3 && first.next == data.count)
        guard case let .data(bytes)? = first.reply else { Issue.record("\(String(describing: first.reply))"); return }
        #expect(bytes == Data("hello".utf8))
        let second = try #require(try SFTPPacket.parse(both, from: first.next))
        guard case let .status(code, raw, message)? = second.reply else { Issue.record("\(String(describing: second.reply))"); return }
        #expect(code == .eof && raw == 1 && message == "End of file" && second.next == both.count)
    }

    @Test func attributesAndADirectorysNamesAreRead() throws {
        // size, permissions (a directory) and times, as OpenSSH's server sends them.
        let attributes = be32(0x1 | 0x4 | 0x8) + be64(4096) + be32(0o040755) + be32(1_700_000_000) + be32(1_700_000_123)
        let name = reply(.name, id: 1, be32(1) + string("sub dir") + string("drwxr-xr-x 2 u g 4096 Nov 14 2023 sub dir") + attributes)
        let parsed = try #require(try SFTPPacket.parse(name, from: 0))
        guard case let .name(entries)? = parsed.reply else { Issue.record("\(String(describing: parsed.reply))"); return }
        #expect(entries.count == 1 && entries[0].filename == "sub dir" && entries[0].longname.hasSuffix(" sub dir"))
        #expect(entries[0].attributes == SFTPPacket.Attributes(size: 4096, permissions: 0o040755, mtime: 1_700_000_123))
        #expect(entries[0].attributes.isDirectory)
        // A file's: size and time only.
        let file = reply(.attrs, id: 2, be32(0x1 | 0x8) + be64(5) + be32(0) + be32(42))
        guard case let .attributes(found)? = try SFTPPacket.parse(file, from: 0)?.reply else { Issue.record("no attributes"); return }
        #expect(found == SFTPPacket.Attributes(size: 5, permissions: nil, mtime: 42) && !found.isDirectory)
    }

    @Test func aPacketThatMakesNoSenseIsRefusedNotTrusted() {
        // Longer than any server sends: not waited for (it would hold a gigabyte).
        #expect(throws: SFTPProtocolError.self) { try SFTPPacket.parse(Data(be32(1 << 30) + [103]), from: 0) }
        // A string that claims more than its packet holds.
        let lying = reply(.data, id: 1, be32(1000) + [1, 2, 3])
        #expect(throws: SFTPProtocolError.self) { try SFTPPacket.parse(lying, from: 0) }
        // An empty packet.
        #expect(throws: SFTPProtocolError.self) { try SFTPPacket.parse(Data(be32(0)), from: 0) }
    }
}

/// Which cipher ferry asks OpenSSH's client to prefer (SFTPConnection.preferredCiphers).
@Suite struct SSHCipherPreferenceTests {
    @Test func aesGCMGoesFirstOnlyWhereTheProcessorHelpsAndTheConfigAllowsIt() {
        let openssh = ["chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
        // OpenSSH's own list (or a config's) keeps its ciphers and no others, the two put first; without a list
        // (no ssh -G), nothing is asked.
        #expect(SFTPConnection.preferredCiphers(nil, aes: true) == nil)
        #expect(SFTPConnection.preferredCiphers(openssh, aes: true)
                == "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr")
        #expect(SFTPConnection.preferredCiphers(["aes256-ctr", "aes256-gcm@openssh.com"], aes: true) == "aes256-gcm@openssh.com,aes256-ctr")
        // A config without them, one that already puts one first, or no AES instructions: ssh's choice stands.
        #expect(SFTPConnection.preferredCiphers(["chacha20-poly1305@openssh.com"], aes: true) == nil)
        #expect(SFTPConnection.preferredCiphers(["aes128-gcm@openssh.com", "aes128-ctr"], aes: true) == nil)
        #expect(SFTPConnection.preferredCiphers(openssh, aes: false) == nil)
        #expect(SFTPConnection.preferredCiphers(nil, aes: false) == nil)
    }
}

/// Where the askpass script for an sftp password goes (SFTPConnection.askpassBase): a hardened host mounts /tmp
/// `noexec`, and a script there does not run (ssh then took the password as refused).
@Suite struct AskpassDirectoryTests {
    @Test func theFirstWritableDirectoryThatRunsProgramsIsTaken() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-askpass-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/b", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let runs: (String) -> Bool = { _ in true }
        #expect(SFTPConnection.askpassBase([dir + "/a", dir + "/b"], runsPrograms: runs) == dir + "/a")
        #expect(SFTPConnection.askpassBase([dir + "/a", dir + "/b"], runsPrograms: { $0 != dir + "/a" }) == dir + "/b")
        #expect(SFTPConnection.askpassBase([dir + "/none", dir + "/b"], runsPrograms: runs) == dir + "/b")
        #expect(SFTPConnection.askpassBase([dir + "/a"], runsPrograms: { _ in false }) == nil)
        // The root file system here runs programs (the tests' own binary runs from it).
        #expect(SFTPConnection.runsPrograms(CommandLine.arguments[0]))
        // A real noexec mount (root only: mount(8)); CI runs as root.
        if getuid() == 0 {
            let mounted = dir + "/noexec"
            try FileManager.default.createDirectory(atPath: mounted, withIntermediateDirectories: true)
            let mount = Process()
            mount.executableURL = URL(fileURLWithPath: "/bin/mount")
            mount.arguments = ["-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", mounted]
            try mount.run()
            mount.waitUntilExit()
            if mount.terminationStatus == 0 {
                defer {
                    let unmount = Process()
                    unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
                    unmount.arguments = [mounted]
                    try? unmount.run()
                    unmount.waitUntilExit()
                }
                #expect(!SFTPConnection.runsPrograms(mounted))
                #expect(SFTPConnection.askpassBase([mounted, dir + "/b"]) == dir + "/b")
            }
        }
        // The candidates: the temporary directory first, then the session's runtime directory and ~/.cache.
        let candidates = SFTPConnection.askpassCandidates(["XDG_RUNTIME_DIR": "/run/user/7", "HOME": dir])
        #expect(candidates == [NSTemporaryDirectory(), "/run/user/7", dir + "/.cache"])
    }
}

/// Where ssh masters' control sockets go (SFTPConnections.controlDirectory): the user's own directory, looked at
/// again for each master.
@Suite struct ControlDirectoryTests {
    @Test func theRuntimeDirectoryFirstElseTmpAndNeverOneOpenToOthers() throws {
        var template = Array("/tmp/ferry-cd-XXXXXX".utf8CString)
        let runtime = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let tmp = "/tmp/ferry-ssh-\(getuid())"
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": runtime]) == runtime + "/ferry-ssh")
        // Gone (the session that made the runtime directory ended, or /tmp was cleaned): made again.
        try FileManager.default.removeItem(atPath: runtime + "/ferry-ssh")
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": runtime]) == runtime + "/ferry-ssh")
        // Open to others: not taken; /tmp's is.
        chmod(runtime + "/ferry-ssh", 0o755)
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": runtime]) == tmp)
        // A symlink to a directory of ours is not one.
        try FileManager.default.removeItem(atPath: runtime + "/ferry-ssh")
        try FileManager.default.createSymbolicLink(atPath: runtime + "/ferry-ssh", withDestinationPath: tmp)
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": runtime]) == tmp)
        // A runtime directory that is not there (su, sudo -E), or none: /tmp's.
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": "/nonexistent-ferry-run/x"]) == tmp)
        #expect(SFTPConnections.controlDirectory([:]) == tmp)
        // A path too long for a socket's name.
        let long = runtime + "/" + String(repeating: "d", count: 80)
        try FileManager.default.createDirectory(atPath: long, withIntermediateDirectories: true)
        #expect(SFTPConnections.controlDirectory(["XDG_RUNTIME_DIR": long]) == tmp)
    }
}

/// OpenSSH's `statvfs@openssh.com` reply, read for the space an upload's refused write may have run out of.
@Suite struct SFTPSpaceTests {
    func reply(_ fields: [UInt64]) -> Data {
        Data(fields.flatMap { value in withUnsafeBytes(of: value.bigEndian) { Array($0) } })
    }

    @Test func theSpaceLeftIsTheAvailableFragmentsTimesTheirSize() {
        // bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax
        #expect(SFTPPacket.spaceAvailable(reply([4096, 4096, 256, 10, 3, 100, 50, 50, 1, 0, 255])) == Int64(3 * 4096))
        // A zero fragment size: the block size counts.
        #expect(SFTPPacket.spaceAvailable(reply([512, 0, 256, 10, 8, 100, 50, 50, 1, 0, 255])) == Int64(8 * 512))
        // A full file system (tmpfs at its size).
        #expect(SFTPPacket.spaceAvailable(reply([4096, 4096, 256, 0, 0, 100, 50, 50, 1, 0, 255])) == 0)
        // Cut short: not a reply to trust.
        #expect(SFTPPacket.spaceAvailable(reply([4096, 4096, 256])) == nil)
        // Past Int64: as much as can be said.
        #expect(SFTPPacket.spaceAvailable(reply([4096, 1 << 40, 1, 1, 1 << 40, 0, 0, 0, 0, 0, 0])) == Int64.max)
        #expect(0 < SFTPTransfer.fullBelow)
    }
}

/// What of a URL goes to ssh: no host or login name that could pass for an option, or that a config's `%h` or
/// `%r` would hand a shell (ProxyCommand, Match exec), as OpenSSH 9.6 refuses them itself.
@Suite struct SSHNameTests {
    @Test func hostsAndLoginsWithShellOrOptionCharactersAreNotGivenToSSH() {
        for host in ["seedbox", "build-1.example.org", "127.0.0.1", "::1", "fe80::1%eth0", "my_host"] {
            #expect(SSHLogin.safeHost(host), "\(host)")
        }
        for host in ["-oProxyCommand=x", "a$(touch x)", "a;b", "a b", "", "a`b`", "ä.example"] {
            #expect(!SSHLogin.safeHost(host), "\(host)")
        }
        for user in ["root", "build.bot", "me@corp", "first-last", "ünïcode"] {
            #expect(SSHLogin.safeUser(user), "\(user)")
        }
        for user in ["-l", "a$(id)", "a;b", "a b", "a|b", "a\\b", "a'b", "a\nb", ""] {
            #expect(!SSHLogin.safeUser(user), "\(user)")
        }
        let login = SSHLogin(url: URL(string: "sftp://a%24%28id%29@host/x")!,
                             settings: SSHSettings(knownHosts: "/dev/null", identityFiles: [], user: "me", agent: false), netrc: nil)
        #expect(login.unsafeName?.contains("login name") == true, "\(login.unsafeName ?? "")")
    }
}
