import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the queue lives: `--state-dir`, `$FERRY_STATE_DIR`, `$XDG_STATE_HOME/ferry`, or `~/.local/state/ferry`.
public struct StateDirectory: Sendable {
    public let path: String

    public init(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let option, !option.isEmpty {
            path = URL(fileURLWithPath: option).standardizedFileURL.path
        } else if let dir = environment["FERRY_STATE_DIR"], !dir.isEmpty {
            path = URL(fileURLWithPath: dir).standardizedFileURL.path
        } else {
            let base = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
            path = base + "/ferry"
        }
    }

    public var databasePath: String { path + "/queue.sqlite" }
    var lockPath: String { path + "/engine.lock" }
    var wakePath: String { path + "/wake" }

    /// Creates the directory (private to the user) when missing.
    public func prepare() throws(UsageError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw UsageError("cannot create state directory \(path): \(error.localizedDescription)")
        }
        guard access(path, W_OK | X_OK) == 0 else { throw UsageError("state directory is not writable: \(path)") }
    }

    public func openStore() throws(UsageError) -> SQLiteQueueStore {
        do {
            return try SQLiteQueueStore(path: databasePath)
        } catch {
            throw UsageError("cannot open the queue at \(databasePath): \(error)")
        }
    }
}

/// One engine per state directory: an exclusive flock on `engine.lock`, released by the kernel even after
/// kill -9. The file holds the owner's pid for messages.
public final class EngineLock: Sendable {
    public enum Outcome: Sendable {
        case acquired(EngineLock)
        case heldBy(pid: Int32?)
    }

    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { release() }

    public static func acquire(_ directory: StateDirectory) throws(UsageError) -> Outcome {
        let fd = open(directory.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw UsageError("cannot open \(directory.lockPath): \(String(cString: strerror(errno)))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buffer, buffer.count, 0)
            close(fd)
            let text = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
            return .heldBy(pid: Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        let pid = Data("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return .acquired(EngineLock(fd: fd))
    }

    public func release() {
        _ = flock(fd, LOCK_UN)
        _ = close(fd)
    }
}

/// How a second ferry tells the running engine that the store has new items: a FIFO in the state
/// directory. The engine keeps it open for reading and writing (so it never sees EOF) and watches it.
public final class WakeChannel {
    private let source: DispatchSourceRead

    /// Engine side: calls `handler` on `queue` after each poke.
    public init(_ directory: StateDirectory, queue: DispatchQueue, handler: @escaping @Sendable () -> Void) throws(UsageError) {
        let path = directory.wakePath
        if mkfifo(path, 0o600) != 0 && errno != EEXIST {
            throw UsageError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw UsageError("cannot open \(path): \(String(cString: strerror(errno)))") }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(fd, &buffer, buffer.count) > 0 {}
            handler()
        }
        source.setCancelHandler { close(fd) }
        source.resume()
        self.source = source
    }

    deinit { source.cancel() }

    /// Client side: wakes the engine. False when no engine is listening.
    @discardableResult
    public static func poke(_ directory: StateDirectory) -> Bool {
        let fd = open(directory.wakePath, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 1
        return write(fd, &byte, 1) == 1
    }
}
