@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// ferry's transport (FerryURLProtocol over CurlTransport) as a user meets it: CPU on a slow link, errors.
@Suite struct TransportTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// Four downloads side by side from a server that sends 512 KiB/s per connection (`-j 4` from the
    /// internet, scaled down). corelibs' own transport kept a core busy here: 1.3-1.4 CPU-s per second of
    /// transfer (a dispatch write source on every waiting socket); curl-like tools use ~0.03.
    @Test func slowTransfersSideBySideLeaveTheCPUIdle() async throws {
        var urls: [String] = []
        var bodies: [Data] = []
        for i in 0..<4 {
            let body = Resource.randomBytes(count: 2 << 20, seed: UInt64(40 + i))
            server.route("/slow\(i).bin", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 512 << 10)))
            urls.append(server.url("/slow\(i).bin").absoluteString)
            bodies.append(body)
        }
        let run = try await spawnMeasured(["get", "--no-tui", "-j", "4", "-o", dir.path] + urls)
        #expect(run.status == 0)
        for i in 0..<4 { #expect(dir.contents("slow\(i).bin") == bodies[i]) }
        let perSecond = run.cpuSeconds / run.wallSeconds
        print("TransportTests: 4 x 2 MiB at 512 KiB/s: \(run.cpuSeconds) CPU-s in \(run.wallSeconds) s")
        #expect(run.wallSeconds > 3, "the throttle did not hold: \(run.wallSeconds) s")
        #expect(perSecond < 0.3, "\(run.cpuSeconds) CPU-s over \(run.wallSeconds) s")
    }

    @Test func aRefusedConnectionNamesTheHostAndTheCause() async throws {
        // A port that was just free: nothing listens there.
        let port = try freePort()
        let result = try await runFerry(["get", "--no-tui", "--retries", "0", "-o", dir.path,
                                         "http://127.0.0.1:\(port)/file.bin"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot connect to 127.0.0.1:\(port) (connection refused)"), "\(result.stderr)")
    }

    @Test func aSilentServerEndsTheAttemptAfterTheIdleTimeout() async throws {
        server.route("/silent", .hang)
        var configuration = testConfiguration()
        configuration.idleTimeout = 1
        configuration.retry.maxRetries = 0
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/silent"), directory: dir.path))
        try await finish(manager, [id], within: 20)
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .failed)
        #expect(item.lastError?.contains("timed out: nothing (or under 10 B/s) from 127.0.0.1:\(server.port) for 1 s") == true,
                "\(item.lastError ?? "")")
    }

    /// The item for `path` after one attempt and no retry.
    func failedOnce(_ path: String, idleTimeout: TimeInterval = 60) async throws -> TransferSnapshot {
        var configuration = testConfiguration()
        configuration.idleTimeout = idleTimeout
        configuration.retry.maxRetries = 0
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url(path), directory: dir.path))
        try await finish(manager, [id], within: 30)
        return try #require(manager.snapshot(of: id))
    }

    /// Bug (torture run): a server trickling a byte a second held the slot for ever (curl's low-speed
    /// check was at 1 B/s). Under 10 B/s for the idle timeout now ends the attempt, and the message says so.
    @Test func aTrickleEndsTheAttemptAfterTheIdleTimeout() async throws {
        var options = ServeOptions()
        options.bytesPerSecond = 2
        server.route("/trickle", .serve(Resource(body: Data(repeating: 0x74, count: 1000)), options))
        let item = try await failedOnce("/trickle", idleTimeout: 2)
        #expect(item.state == .failed)
        #expect(item.lastError == "timed out: nothing (or under 10 B/s) from 127.0.0.1:\(server.port) for 2 s (the idle timeout)",
                "curl's words for it are not said again: \(item.lastError ?? "")")
    }

    /// Bug (torture run): a header line past curl's limit was reported as "Out of memory".
    @Test func aHugeHeaderIsNamed() async throws {
        server.route("/bigheader", .status(200, headers: [("X-Big", String(repeating: "b", count: 1 << 20))], body: Data("ok".utf8)))
        let item = try await failedOnce("/bigheader")
        #expect(item.state == .failed)
        #expect(item.lastError?.contains("sent a response header too large to read (over 100 KiB)") == true, "\(item.lastError ?? "")")
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw Timeout() }
    return Int(UInt16(bigEndian: address.sin_port))
}

struct MeasuredRun {
    var status: Int32
    var cpuSeconds: Double
    var wallSeconds: Double
}

/// Runs the `ferry` binary with stdio on /dev/null and reads its own CPU time (wait4's rusage: this child
/// only, whatever else the test process runs meanwhile).
func spawnMeasured(_ arguments: [String], timeout: Double = 60) async throws -> MeasuredRun {
    let scratch = try TempDir()
    let environment = isolatedEnvironment(stateDir: scratch.path + "/state", configHome: scratch.path)
    let path = ferryExecutable().path
    return try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            for fd: Int32 in [0, 1, 2] {
                posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
            }
            let argv = ([path] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { (argv + envp).forEach { free($0) } }
            var pid: pid_t = 0
            let start = Date()
            guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else {
                continuation.resume(throwing: Timeout())
                return
            }
            let killer = DispatchWorkItem { kill(pid, SIGKILL) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
            var status: Int32 = 0
            var usage = rusage()
            while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
            killer.cancel()
            let wall = Date().timeIntervalSince(start)
            func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
            let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            withExtendedLifetime(scratch) {}
            continuation.resume(returning: MeasuredRun(status: exit, cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                                                       wallSeconds: wall))
        }
    }
}
