@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// The engine's control socket: who may connect, what a bad client gets, and that no client can cost the
/// engine its memory or its transfers.
@Suite struct ControlSocketTests {
    let server: TestHTTPServer
    let dir: TempDir
    var directory: StateDirectory { StateDirectory(option: dir.path + "/state") }

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// An engine serving the state directory in this process.
    func serve() throws -> (TransferManager, EngineHost) {
        try directory.prepare()
        let manager = try TransferManager(configuration: testConfiguration(), store: InMemoryQueueStore())
        let host = try EngineHost(manager: manager, directory: directory) {}
        return (manager, host)
    }

    /// A raw connection with a receive timeout, for speaking bytes that ControlClient never would.
    func rawConnection() throws -> Int32 {
        let fd = try #require(UnixSocket.connect(path: directory.socketPath))
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Everything the engine sends until it closes the connection (or the timeout).
    func readToEnd(_ fd: Int32) -> (Data, closed: Bool) {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            // A close with unread data on the engine's side arrives as ECONNRESET after what was sent.
            if n == 0 || (n < 0 && errno == ECONNRESET) { return (data, true) }
            if n < 0 { return (data, false) }
            data.append(contentsOf: buffer[0..<n])
        }
    }

    func send(_ fd: Int32, _ data: Data) {
        _ = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    @Test func theStateDirectoryAndTheSocketAreTheUsersAlone() throws {
        // A directory made with looser modes is made private too.
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let (manager, host) = try serve()
        defer { host.close(); manager.shutdown() }
        var st = stat()
        #expect(stat(directory.path, &st) == 0 && st.st_mode & 0o7777 == 0o700)
        #expect(stat(directory.socketPath, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK && st.st_mode & 0o7777 == 0o600)
    }

    /// The socket's mode keeps other users out; should it not (a state directory on a file system that ignores
    /// modes), the engine still serves only processes of its own user: another user's request is not answered.
    @Test func anotherUsersConnectionIsClosedUnanswered() async throws {
        // Only root can be another user here (a process that switches to nobody before it connects).
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: TestFTPServer.python) else { return }
        let (manager, host) = try serve()
        defer { host.close(); manager.shutdown() }
        #expect(chmod(dir.path, 0o711) == 0 && chmod(directory.path, 0o711) == 0 && chmod(directory.socketPath, 0o666) == 0)
        let request = "{\"v\":\(ControlProtocol.version),\"id\":1,\"verb\":\"list\"}\n"
        let script = """
            import os, socket, sys
            os.setgid(65534); os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            got = b""
            try:
                s.connect(sys.argv[1])
                s.sendall(sys.argv[2].encode())
                while True:
                    piece = s.recv(65536)
                    if not piece: break
                    got += piece
            except (ConnectionResetError, BrokenPipeError):
                pass  # closed by the engine, before or after the request went
            except Exception as e:
                print("failed:", repr(e), got[:200])
                sys.exit(0)
            print("connected as", os.getuid(), "got", len(got), "bytes")
            """
        let said = try await runProgram(TestFTPServer.python, ["-c", script, directory.socketPath, request])
        #expect(said == "connected as 65534 got 0 bytes\n", "\(said)")
        // The engine's own user is served as before.
        let client = try #require(ControlClient.connect(directory))
        #expect(try client.request(ControlRequest(id: 0, verb: .list)).ok)
    }

    @Test(arguments: [
        ("\u{0}\u{FF}garbage\n", "not a JSON object"),
        ("{\"v\":\(ControlProtocol.version),\"id\":7,\"verb\":\"explode\"}\n", "unknown verb 'explode'"),
        ("{\"v\":\(ControlProtocol.version),\"id\":8,\"verb\":\"command\",\"command\":\"all of them\"}\n", "malformed command request"),
        ("{\"v\":99,\"id\":9,\"verb\":\"list\"}\n", "protocol version 99"),
        ("[1,2,3]\n", "not a JSON object"),
    ])
    func aBadRequestGetsAnErrorAndItsConnectionCloses(_ frame: String, _ message: String) throws {
        let (manager, host) = try serve()
        defer { host.close(); manager.shutdown() }
        let fd = try rawConnection()
        defer { close(fd) }
        send(fd, Data(frame.utf8))
        let (data, closed) = readToEnd(fd)
        #expect(closed, "the engine closes the connection")
        let line = try #require(data.split(separator: 0x0A).first)
        let reply = try #require(try JSONDecoder().decode(ControlMessage.self, from: Data(line)).reply)
        #expect(!reply.ok)
        #expect(reply.error?.contains(message) == true, "\(reply.error ?? "")")
        // The engine goes on serving everyone else.
        let client = try #require(ControlClient.connect(directory))
        #expect(try client.request(ControlRequest(id: 0, verb: .list)).ok)
    }

    @Test func anOversizedRequestIsRefused() throws {
        let (manager, host) = try serve()
        defer { host.close(); manager.shutdown() }
        let fd = try rawConnection()
        defer { close(fd) }
        let writer = Thread { [fd] in
            // More than the cap, with no newline: the engine must not keep reading it into memory.
            let chunk = Data(repeating: UInt8(ascii: "a"), count: 1 << 20)
            for _ in 0..<(ControlProtocol.maxRequest >> 20) + 2 {
                if chunk.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) < 0 { break }
            }
        }
        writer.start()
        let (data, closed) = readToEnd(fd)
        #expect(closed)
        let reply = try JSONDecoder().decode(ControlMessage.self, from: Data(data.split(separator: 0x0A).first ?? [])).reply
        #expect(reply?.error?.contains("request longer than") == true)
        #expect(try ControlClient.connect(directory).map { try $0.request(ControlRequest(id: 0, verb: .list)).ok } == true)
    }

    @Test func unknownIdsAreNamedAndNothingIsChanged() throws {
        let (manager, host) = try serve()
        defer { host.close(); manager.shutdown() }
        server.route("/a", .serve(Resource(body: Data("a".utf8))))
        var spec = TransferSpec(download: server.url("/a"), directory: dir.path)
        spec.fileName = "a"
        let client = try #require(ControlClient.connect(directory))
        let add = ControlRequest(id: 0, command: .add(.init(specs: [spec])))
        let id = try #require(try client.request(add).result?.added?.first?.id.rawValue)
        let reply = try client.request(ControlRequest(id: 0, command: .pause(Selection(ids: [id, 41, 42]))))
        #expect(!reply.ok && reply.error == "no item #41, #42")
        #expect(manager.snapshot(of: TransferID(id))?.state != .paused)
    }

    /// A subscriber that never reads while 8 transfers move: updates to it stop while its writes are pending,
    /// the engine keeps serving another client, its RSS stays flat, and every transfer completes.
    @Test func aClientThatNeverReadsCostsTheEngineNeitherMemoryNorTransfers() async throws {
        let files = (0..<8).map { Resource.randomBytes(count: 3 << 20, seed: UInt64(70 + $0)) }
        for (index, body) in files.enumerated() {
            server.route("/f\(index)", .serve(Resource(body: body), ServeOptions(bytesPerSecond: 256 << 10)))
        }
        let downloads = dir.path + "/dl"
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        let engine = ChildProcess()
        engine.executableURL = ferryExecutable()
        engine.arguments = ["get", "--no-tui", "-j", "8", "-o", downloads] + (0..<8).map { server.url("/f\($0)").absoluteString }
        engine.environment = isolatedEnvironment(stateDir: directory.path, configHome: dir.path + "/config")
        engine.standardOutput = FileHandle.nullDevice
        // What the engine says goes to a file, shown when the engine does not come up.
        let log = dir.path + "/engine.err"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        engine.standardError = FileHandle(forWritingAtPath: log)
        try engine.run()
        defer { if engine.isRunning { engine.terminate() } }
        // Watched from a thread of its own: the engine lives about 12 s, and the test pool may be busy with
        // other tests for a while (it has a thread per core).
        let watch = try await offPool { [directory] () throws -> Observation in
            var observation = Observation()
            let deadline = Date().addingTimeInterval(60)
            func wait(_ what: String, _ condition: () -> Bool) throws {
                while !condition() {
                    guard Date() < deadline else { throw WatchFailure(what: what) }
                    usleep(10_000)
                }
            }
            // The socket's file is there from its bind, a moment before the engine listens on it: connect until
            // it takes the connection.
            var connected: ControlClient?
            try wait("a connection") {
                connected = ControlClient.connect(directory)
                return connected != nil
            }
            guard let good = connected else { throw WatchFailure(what: "a connection") }
            try wait("8 transfers move") {
                (try? good.request(ControlRequest(id: 0, verb: .list)).items)?.filter { $0.state == .running && $0.bytesDone > 0 }.count == 8
            }
            observation.baseline = self.residentBytes(engine.processIdentifier)
            // The bad client: a small receive buffer, subscribes, never reads.
            guard let stuck = UnixSocket.connect(path: directory.socketPath) else { throw WatchFailure(what: "the stuck client") }
            defer { close(stuck) }
            var small: Int32 = 4096
            setsockopt(stuck, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            self.send(stuck, Data("{\"v\":\(ControlProtocol.version),\"id\":1,\"verb\":\"subscribe\"}\n".utf8))
            // The good one, served all along.
            let updates = UpdateCount()
            try good.subscribe(onUpdate: { _ in updates.add() }, onClose: { _ in })
            observation.peak = observation.baseline
            while engine.isRunning {
                observation.peak = max(observation.peak, self.residentBytes(engine.processIdentifier))
                do {
                    let reply = try good.request(ControlRequest(id: 0, verb: .list))
                    observation.asked += 1
                    if reply.ok { observation.answered += 1 }
                } catch {
                    // The engine closes the socket as it finishes: that is the end, not a refusal.
                    if String(describing: error).contains("closed the connection") { break }
                    observation.asked += 1
                }
                usleep(200_000)
            }
            observation.updates = updates.value
            return observation
        }
        let baseline = watch.baseline, peak = watch.peak, asked = watch.asked, answered = watch.answered
        let updates = watch.updates
        await exited(engine)
        #expect(engine.terminationStatus == 0)
        for (index, body) in files.enumerated() {
            #expect(FileManager.default.contents(atPath: downloads + "/f\(index)") == body, "f\(index)")
        }
        print("control socket: RSS \(baseline >> 20) MiB -> peak \(peak >> 20) MiB; \(answered) of \(asked) lists answered, \(updates) updates to the good client")
        #expect(peak - baseline < 10 << 20)
        #expect(asked > 0 && answered == asked, "every request of the good client is answered")
        #expect(updates > 0)
    }

    func residentBytes(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else { return 0 }
        return kib << 10
    }

    /// Lines from a raw connection, up to `count` of them (or the connection's timeout).
    func readLines(_ fd: Int32, _ count: Int, into pending: inout Data) -> [Data] {
        var lines: [Data] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while lines.count < count {
            if let newline = pending.firstIndex(of: 0x0A) {
                lines.append(pending[pending.startIndex..<newline])
                pending = Data(pending[(newline + 1)...])
                continue
            }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            pending.append(contentsOf: buffer[0..<n])
        }
        return lines
    }

    /// A subscriber with a window gets that window and the counts, then only what changes inside it: a change
    /// to an item outside it costs that subscriber no bytes, while a subscriber of the whole queue hears it.
    @Test func aWindowedSubscriberGetsItsWindowAndNothingOfChangesOutsideIt() throws {
        try directory.prepare()
        let store = InMemoryQueueStore()
        let stored = try store.add((1...30).map { TransferSpec(download: server.url("/w/\($0).bin"), directory: dir.path) })
        try store.save(stored.map { item in
            var item = item
            item.state = .paused
            return item
        })
        let manager = try TransferManager(configuration: testConfiguration(), store: store)
        let host = try EngineHost(manager: manager, directory: directory) {}
        defer { host.close(); manager.shutdown() }

        // Rows 10 to 14 of the paused items.
        let fd = try rawConnection()
        defer { close(fd) }
        var request = ControlRequest(id: 1, verb: .subscribe)
        request.view = QueueView(states: [.paused], offset: 10, limit: 5)
        var line = try JSONEncoder().encode(request)
        line.append(0x0A)
        send(fd, line)
        var pending = Data()
        let first = readLines(fd, 2, into: &pending)
        try #require(first.count == 2)
        #expect(try JSONDecoder().decode(ControlMessage.self, from: first[0]).reply?.ok == true)
        let whole = try #require(try JSONDecoder().decode(ControlMessage.self, from: first[1]).update)
        #expect(whole.full)
        #expect(whole.items.map(\.id.rawValue) == [11, 12, 13, 14, 15])
        #expect(whole.window == QueueWindow(offset: 10, total: 30, of: QueueView(states: [.paused])))
        #expect(whole.totals.count[.paused] == 30)

        // A subscriber of the whole queue, to know when the engine has sent a change.
        let everything = try #require(ControlClient.connect(directory))
        try everything.subscribe(onUpdate: { _ in }, onClose: { _ in })
        manager.setRateLimit(TransferID(3), 1000)
        manager.move(TransferID(25), .top)
        let deadline = Date().addingTimeInterval(10)
        while everything.snapshot.items.first?.id != TransferID(25) || everything.snapshot.items.first(where: { $0.id == TransferID(3) })?.rateLimit != 1000 {
            guard Date() < deadline else { throw Timeout() }
            usleep(10_000)
        }
        // #25 went to the top: the window (rows 10-14) now holds #10 to #14.
        let next = readLines(fd, 1, into: &pending)
        try #require(next.count == 1)
        let update = try #require(try JSONDecoder().decode(ControlMessage.self, from: next[0]).update)
        // The move reached this subscriber as its window's new rows (it changed what the window shows); the
        // new limit of #3 (outside the window) never did.
        #expect(!update.full)
        #expect(update.order == [10, 11, 12, 13, 14])
        #expect(update.items.map(\.id.rawValue).contains(10))
        #expect(!update.items.contains { $0.id == TransferID(3) })
        #expect(update.window == QueueWindow(offset: 10, total: 30, of: QueueView(states: [.paused])))

        // A change outside the window that does not move it: nothing at all reaches this subscriber. The next
        // line it gets is the change inside the window that follows.
        manager.setRateLimit(TransferID(29), 3000)
        while everything.snapshot.items.first(where: { $0.id == TransferID(29) })?.rateLimit != 3000 {
            guard Date() < deadline else { throw Timeout() }
            usleep(10_000)
        }
        manager.setRateLimit(TransferID(13), 4000)
        let last = readLines(fd, 1, into: &pending)
        try #require(last.count == 1)
        let inside = try #require(try JSONDecoder().decode(ControlMessage.self, from: last[0]).update)
        #expect(inside.items.map(\.id.rawValue) == [13])
        #expect(inside.items.first?.rateLimit == 4000)
        #expect(inside.order == nil)
        #expect(pending.isEmpty)
    }
}

struct Observation: Sendable {
    var baseline = 0
    var peak = 0
    var asked = 0
    var answered = 0
    var updates = 0
}

struct WatchFailure: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs blocking work on a thread of its own and awaits its result.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

final class UpdateCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }

}
