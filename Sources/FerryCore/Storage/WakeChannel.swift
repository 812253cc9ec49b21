import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a second ferry tells the running engine that the store has new items: a FIFO in the state
/// directory. The engine keeps it open for reading and writing (so it never sees EOF) and watches it.
public final class WakeChannel {
    private let source: DispatchSourceRead

    /// Engine side: calls `handler` on `queue` after each poke.
    public init(_ directory: StateDirectory, queue: DispatchQueue, handler: @escaping @Sendable () -> Void) throws(StateError) {
        let path = directory.wakePath
        if mkfifo(path, 0o600) != 0 && errno != EEXIST {
            throw StateError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw StateError("cannot open \(path): \(String(cString: strerror(errno)))") }
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
