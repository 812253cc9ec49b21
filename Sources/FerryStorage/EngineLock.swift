import FerryModel
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One engine per state directory: an exclusive flock on `engine.lock`, released by the kernel even after
/// kill -9. The file holds the owner's pid for messages.
public final class EngineLock: Sendable {
    public enum Outcome: Sendable {
        case acquired(EngineLock)
        case heldBy(pid: Int32?)
    }

    /// -1 once released: the descriptor is closed once, whoever releases first (a verb's `release()`, then
    /// `deinit`). Closing it twice closed whatever descriptor had taken its number meanwhile: libdispatch's
    /// epoll descriptor, and the process died on its way out with SIGILL.
    private let fd: Mutex<Int32>

    private init(fd: Int32) { self.fd = Mutex(fd) }

    /// The lock's descriptor while held (-1 after release), for tests.
    package var descriptor: Int32 { fd.withLock { $0 } }

    deinit { release() }

    /// The pid the lock file names (the engine that holds it, or the last one that did): read, never locked.
    public static func holderPID(_ directory: StateDirectory) -> Int32? {
        guard let data = FileManager.default.contents(atPath: directory.lockPath) else { return nil }
        return Int32(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    public static func acquire(_ directory: StateDirectory) throws(StateError) -> Outcome {
        let fd = open(directory.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StateError("cannot open \(directory.lockPath): \(String(cString: strerror(errno)))") }
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
        let fd = fd.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        guard fd >= 0 else { return }
        _ = flock(fd, LOCK_UN)
        _ = close(fd)
    }
}
