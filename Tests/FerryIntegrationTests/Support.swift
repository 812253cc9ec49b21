@_spi(Testing) import FerryEngine
import FerryModel
import FerryStorage
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// A temporary directory removed when the value is released.
final class TempDir: Sendable {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func files() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
    func contents(_ name: String) -> Data? { FileManager.default.contents(atPath: path + "/" + name) }
}

func sha256Hex(_ data: Data) -> String { SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined() }

/// Engine settings for tests: short backoff so retries do not slow the suite (Retry-After still wins).
func testConfiguration(maxConcurrent: Int = 4) -> EngineConfiguration {
    var configuration = EngineConfiguration()
    configuration.maxConcurrent = maxConcurrent
    configuration.retry.baseDelay = 0.05
    configuration.retry.maxDelay = 0.2
    // Retried as many times as the test says, however cheap the failure is to wait out (a test of that sets
    // its own patience): 0.2 s apart, a minute of a refused connection is 300 attempts.
    configuration.retry.patience = 0
    // Stalled answers must outlast a test that the busy cooperative pool resumes late.
    configuration.idleTimeout = 60
    return configuration
}

struct Timeout: Error {}

/// An HTTPS test server whose certificate a CA made for the test signs (offering HTTP/2 by ALPN with `http2`),
/// and that CA in a PEM file, in a directory of its own, that an engine can be told to trust.
struct TrustedHTTPS {
    let authority: TestCertificateAuthority
    let server: TestHTTPServer
    let dir: TempDir
    let caFile: String

    init(http2: Bool = false) throws {
        authority = try TestCertificateAuthority()
        server = try TestHTTPServer(tls: authority, http2: http2)
        dir = try TempDir()
        caFile = dir.path + "/ca.pem"
        try authority.writeCAPEM(to: caFile)
    }

    /// Engine settings for tests that trust the CA (`[network] ca_file`).
    func configuration(maxConcurrent: Int = 4) -> EngineConfiguration {
        var configuration = testConfiguration(maxConcurrent: maxConcurrent)
        configuration.transport.caFile = caFile
        return configuration
    }
}

/// Waits for the transfers to finish, failing the test instead of hanging when they do not.
func finish(_ manager: TransferManager, _ ids: Set<TransferID>, within seconds: Double = 60) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask { await manager.waitUntilFinished(ids); return true }
        group.addTask { try await Task.sleep(for: .seconds(seconds)); return false }
        let finished = try await group.next() ?? false
        group.cancelAll()
        if !finished {
            Issue.record("transfers did not finish within \(seconds) s: \(manager.snapshot().items.map { "\($0.id) \($0.state) \($0.lastError ?? "")" })")
            throw Timeout()
        }
    }
}

/// Pauses a download once it has some bytes, then waits until its stopped attempt has written out what it held
/// and the item counts what is on disk (`part`, its `.part` file); those bytes.
@discardableResult
func pausePartWay(_ manager: TransferManager, _ id: TransferID, part: String) async throws -> Int64 {
    try await eventually("some on disk") { (manager.snapshot(of: id)?.bytesDone ?? 0) >= 256 << 10 }
    manager.pause(id)
    try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
    func onDisk() -> Int64? { try? FileManager.default.attributesOfItem(atPath: part)[.size] as? Int64 }
    try await eventually("the attempt's bytes on disk") { onDisk() == manager.snapshot(of: id)?.bytesDone }
    return try #require(onDisk())
}

/// Polls until `condition` holds (or fails the test after `seconds`).
func eventually(within seconds: Double = 60, _ what: @autoclosure () -> String, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline {
            Issue.record("timed out waiting for: \(what())")
            throw Timeout()
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// The result of running the real `ferry` binary.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the `ferry` executable built next to the test bundle.
/// Runs the real binary without blocking a thread of the test pool (Swift Testing runs tests on the
/// cooperative pool, which has only as many threads as cores). `feed`, when given, writes the child's
/// standard input on a thread of its own and must close it.
func runFerry(
    _ arguments: [String], cwd: String? = nil, timeout: Double = 60, stateDir: String? = nil,
    environment extra: [String: String] = [:], feed: (@Sendable (FileHandle) -> Void)? = nil,
    executable: String = "ferry"
) async throws -> CommandResult {
    let process = ChildProcess()
    process.executableURL = builtExecutable(executable)
    process.arguments = arguments
    // Never the user's own queue or config: a private state directory unless the test shares one.
    let scratch = try TempDir()
    process.environment = isolatedEnvironment(stateDir: stateDir ?? scratch.path + "/state", configHome: scratch.path)
        .merging(extra) { $1 }
    if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
    let out = Pipe(), err = Pipe(), input = Pipe()
    // Foundation makes pipes without close-on-exec: every child started meanwhile (by any test) would hold
    // these ends, and the reader below would wait for that child to exit (a background engine lives long).
    for pipe in [out, err, input] {
        for fd in [pipe.fileHandleForReading.fileDescriptor, pipe.fileHandleForWriting.fileDescriptor] {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }
    process.standardOutput = out
    process.standardError = err
    process.standardInput = feed == nil ? FileHandle.nullDevice : input
    let exited = AsyncStream<Void>.makeStream()
    process.terminationHandler = { _ in exited.continuation.finish() }
    try process.run()
    if let feed {
        let writer = input.fileHandleForWriting
        Thread.detachNewThread { feed(writer) }
    }
    let outData = DataReader(out.fileHandleForReading), errData = DataReader(err.fileHandleForReading)
    let watchdog = Task {
        try await Task.sleep(for: .seconds(timeout))
        process.terminate()
    }
    for await _ in exited.stream {}
    watchdog.cancel()
    if (try? await watchdog.value) != nil {
        Issue.record("\(executable) \(arguments) did not exit within \(timeout) s")
    }
    let result = CommandResult(status: process.terminationStatus,
                               stdout: String(decoding: await outData.finish(), as: UTF8.self),
                               stderr: String(decoding: await errData.finish(), as: UTF8.self))
    withExtendedLifetime(scratch) {}
    return result
}

/// The test process's environment with ferry's state and config pointed at private directories.
func isolatedEnvironment(stateDir: String, configHome: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["FERRY_STATE_DIR"] = stateDir
    environment["XDG_CONFIG_HOME"] = configHome
    environment.removeValue(forKey: "FERRY_CONFIG")
    // Nor the user's ~/.netrc: a login from it would reach the test servers.
    environment["HOME"] = configHome
    environment.removeValue(forKey: "NETRC")
    // The machine's proxies and CAs must not steer the tests' requests to 127.0.0.1.
    for name in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
                 "SSL_CERT_FILE", "SSL_CERT_DIR",
                 // Nor the user's ssh-agent: its keys would log in to the tests' sshd.
                 "SSH_AUTH_SOCK"] {
        environment.removeValue(forKey: name)
    }
    return environment
}

/// Drains a pipe on a background thread so a chatty child never blocks on a full pipe.
final class DataReader: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)
    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            // read(2) again after a signal: FileHandle.availableData stops the whole test process on EINTR
            // (a fatal error in corelibs, met once in a full run).
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let n = read(handle.fileDescriptor, &buffer, buffer.count)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                lock.withLock { data.append(contentsOf: buffer[0..<n]) }
            }
            done.signal()
        }
    }

    /// What the child wrote so far.
    var received: Data { lock.withLock { data } }

    /// What the child wrote, once the pipe ends. A process the child started (a background engine) may hold
    /// the pipe longer than the child lives: after `grace` seconds what has arrived is taken. Waits on a
    /// thread of its own, never on the test pool's.
    func finish(grace: Double = 3) async -> Data {
        await withCheckedContinuation { (continuation: CheckedContinuation<Data, Never>) in
            Thread.detachNewThread { [self] in
                _ = done.wait(timeout: .now() + grace)
                continuation.resume(returning: lock.withLock { data })
            }
        }
    }
}

func ferryExecutable() -> URL { builtExecutable("ferry") }

/// Waits for `process` to exit on a thread of its own: Swift Testing runs tests on a pool with a thread
/// per core, and two tests blocked in waitUntilExit (an engine may run for half a minute) stall all others.
func exited(_ process: ChildProcess) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            process.waitUntilExit()
            continuation.resume()
        }
    }
}

/// Runs Tests/DelegateQueueProbe (a URLSession alone in a process) and reads the `name=number` fields it prints.
func runProbe(_ arguments: [String]) async throws -> [String: Int] {
    let result = try await runFerry(arguments, executable: "DelegateQueueProbe")
    #expect(result.status == 0, "\(result.stderr)")
    print("DelegateQueueProbe \(arguments[0]): \(result.stdout)", terminator: "")
    var fields: [String: Int] = [:]
    for field in result.stdout.split(whereSeparator: \.isWhitespace) {
        let pair = field.split(separator: "=")
        if pair.count == 2, let value = Int(pair[1]) { fields[String(pair[0])] = value }
    }
    return fields
}

/// An executable of this package, built next to the test bundle.
func builtExecutable(_ name: String) -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name),
        Bundle.main.bundleURL.appendingPathComponent(name),
        Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
    ]
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
}

/// Runs a program (not ferry) to its end; its standard output. Its exit is awaited off the test pool.
func runProgram(_ path: String, _ arguments: [String]) async throws -> String {
    let scratch = try TempDir()
    let outputPath = scratch.path + "/stdout"
    _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
    let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = output
    process.standardInput = FileHandle.nullDevice
    try process.run()
    await exited(process)
    try output.close()
    return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
}

/// Writes each file under `root` at its relative path, its directories made: a local tree for `put -r`.
func writeFiles(_ files: [String: Data], under root: String) throws {
    for (path, body) in files {
        let url = URL(fileURLWithPath: root + "/" + path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try body.write(to: url)
    }
}
