import FerryModel
import Foundation
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

    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { release() }

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
        _ = flock(fd, LOCK_UN)
        _ = close(fd)
    }
}
