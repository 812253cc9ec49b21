import FerryModel
import Foundation
import Synchronization

/// Where a request's body comes from.
package enum TransportBody {
    /// A stream that never blocks for long (a file read with pread): read on the transport's thread.
    case stream(InputStream)
    /// A pipe or terminal (standard input): read on a thread of its own, since a read may wait for ever.
    case pipe(path: String)
}

/// A body being sent: what libcurl's read callback takes bytes from.
package protocol BodySource: AnyObject {
    /// Copies up to `count` bytes into `buffer`: the number copied (0 at the end), `nil` when nothing is
    /// ready yet (the transfer pauses until `onReady` is called), or throws a message.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) throws(BodyReadError) -> Int?
    /// Called (on any thread) when bytes arrive after `read` returned nil.
    var onReady: (@Sendable () -> Void)? { get set }
    func close()
}

package struct BodyReadError: Error {
    package let message: String
    /// What kind of failure it was: a file that changed while it was sent, else one that could not be read.
    package var kind: FailureKind = .unreadableFile
}

/// A stream body: InputStream.read on the transport's thread.
package final class StreamBodySource: BodySource {
    private let stream: InputStream
    package var onReady: (@Sendable () -> Void)?

    package init(_ stream: InputStream) {
        self.stream = stream
        stream.open()
    }

    package func read(into buffer: UnsafeMutableRawPointer, count: Int) throws(BodyReadError) -> Int? {
        let n = stream.read(buffer.assumingMemoryBound(to: UInt8.self), maxLength: count)
        if n < 0 {
            let error = stream.streamError as NSError?
            throw BodyReadError(message: error.map { "cannot read the body: \($0.localizedDescription)" } ?? "cannot read the body",
                                kind: (error?.userInfo[FailureKind.userInfoKey] as? String).flatMap(FailureKind.init(rawValue:)) ?? .unreadableFile)
        }
        return n
    }

    package func close() {
        stream.close()
    }
}

/// A pipe body: a thread of its own reads the pipe into a bounded buffer, so a pipe that waits for its
/// writer never holds up the transport's thread (and with it every other transfer).
package final class PipeBodySource: BodySource, @unchecked Sendable {
    private struct State {
        var buffer = Data()
        var ended = false
        var failure: String?
        var closed = false
        var waiting = false
        var onReady: (@Sendable () -> Void)?
    }
    /// The reader stops reading while this much is buffered.
    package static let bufferLimit = 1 << 20
    private let state = Mutex(State())
    private let room = NSCondition()

    package init(path: String) {
        let thread = Thread { [self] in pump(path) }
        thread.name = "ferry.pipe-body"
        thread.start()
    }

    package var onReady: (@Sendable () -> Void)? {
        get { state.withLock { $0.onReady } }
        set { state.withLock { $0.onReady = newValue } }
    }

    private func pump(_ path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            finish(failure: "cannot open \(path): \(String(cString: strerror(errno)))")
            return
        }
        defer { Glibc.close(fd) }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            room.lock()
            while state.withLock({ $0.buffer.count >= Self.bufferLimit && !$0.closed }) { room.wait() }
            room.unlock()
            if state.withLock({ $0.closed }) { return }
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                finish(failure: "cannot read \(path): \(String(cString: strerror(errno)))")
                return
            }
            if n == 0 {
                finish(failure: nil)
                return
            }
            let wake = state.withLock { s -> (@Sendable () -> Void)? in
                s.buffer.append(contentsOf: chunk[0..<n])
                defer { s.waiting = false }
                return s.waiting ? s.onReady : nil
            }
            wake?()
        }
    }

    private func finish(failure: String?) {
        let wake = state.withLock { s -> (@Sendable () -> Void)? in
            s.ended = true
            s.failure = failure
            defer { s.waiting = false }
            return s.waiting ? s.onReady : nil
        }
        wake?()
    }

    package func read(into buffer: UnsafeMutableRawPointer, count: Int) throws(BodyReadError) -> Int? {
        let result = state.withLock { s -> Result<Int?, BodyReadError> in
            if s.buffer.isEmpty {
                if let failure = s.failure { return .failure(BodyReadError(message: failure)) }
                if s.ended { return .success(0) }
                s.waiting = true
                return .success(nil)
            }
            let n = min(count, s.buffer.count)
            s.buffer.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), count: n)
            s.buffer.removeSubrange(0..<n)
            return .success(n)
        }
        room.lock()
        room.signal()
        room.unlock()
        return try result.get()
    }

    package func close() {
        state.withLock { $0.closed = true; $0.onReady = nil }
        room.lock()
        room.signal()
        room.unlock()
    }
}
