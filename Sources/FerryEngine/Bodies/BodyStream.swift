import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The InputStream URLSession reads an upload body from: the plan's pieces in order, file bytes read
/// with pread at the session's pace. Linux traps it avoids (see docs/platform.md):
/// `hasBytesAvailable == false` is taken as end of body (a chunked body would be truncated and called a
/// success), so it stays true until real EOF; `close()` is never called, so descriptors close in deinit.
final class BodyStream: InputStream {
    private let pieces: [BodyPlan.Piece]
    private var index = 0
    private var offsetInPiece: Int64 = 0
    private var fd: Int32 = -1
    private var fdPath: String?
    /// The open file as it was when it was opened: its size and when it was last written.
    private var opened: (size: Int64, modified: timespec)?
    private var status: Stream.Status = .notOpen
    private var failure: Error?
    /// The body failed because its file changed while it was sent (its length or its writes): a resumable
    /// upload's copy on the server is of another file then. Set on the reading thread, read once the task ended.
    let fileChanged = Atomic<Bool>(false)

    /// Bytes this body may still give (nil: to the plan's end): a resumable upload's chunk.
    private var allowance: Int64?

    /// `skipping`: bytes of the body not sent again (a resumable upload's append from the server's offset);
    /// `count`: the body ends after that many (one chunk of an append), nil at the plan's end.
    init(plan: BodyPlan, skipping: Int64 = 0, count: Int64? = nil) {
        self.pieces = plan.pieces
        self.allowance = count
        super.init(data: Data())
        var skip = skipping
        while skip > 0, index < pieces.count {
            let length: Int64
            switch pieces[index] {
            case let .bytes(data): length = Int64(data.count)
            case let .file(_, fileLength): length = fileLength
            case .standardInput: length = 0
            }
            if skip < length {
                offsetInPiece = skip
                break
            }
            skip -= length
            index += 1
        }
    }

    deinit {
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var streamError: Error? { failure }
    override var hasBytesAvailable: Bool { status != .atEnd && status != .error && status != .closed }
    override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>) -> Bool { false }
    override func property(forKey key: PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: PropertyKey) -> Bool { false }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard status == .open || status == .reading else { return status == .atEnd ? 0 : -1 }
        guard let allowance else { return readPieces(buffer, maxLength: len) }
        guard allowance > 0 else {
            status = .atEnd
            return 0
        }
        let n = readPieces(buffer, maxLength: Int(min(Int64(len), allowance)))
        if n > 0 { self.allowance = allowance - Int64(n) }
        return n
    }

    private func readPieces(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        while index < pieces.count {
            let n: Int
            switch pieces[index] {
            case let .bytes(data):
                let remaining = data.count - Int(offsetInPiece)
                n = min(len, remaining)
                if n > 0 {
                    data.withUnsafeBytes { raw in
                        buffer.update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + Int(offsetInPiece), count: n)
                    }
                }
            case let .file(path, length):
                let remaining = length - offsetInPiece
                guard remaining > 0 else { n = 0; break }
                if fd < 0 || fdPath != path {
                    if fd >= 0 { _ = Glibc.close(fd) }
                    fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
                    fdPath = path
                    guard fd >= 0 else { return fail("cannot read \(path): \(String(cString: strerror(errno)))") }
                    opened = Self.state(fd)
                    if let opened, opened.size != length { return changed(path, "\(length) bytes when it began, \(opened.size) now") }
                }
                var got = -1
                repeat { got = pread(fd, buffer, min(len, Int(remaining)), off_t(offsetInPiece)) } while got < 0 && errno == EINTR
                if got < 0 { return fail("cannot read \(path): \(String(cString: strerror(errno)))") }
                // A file that shrank while being sent would make the body shorter than its Content-Length.
                if got == 0 { return fail("\(path) shrank while it was being uploaded", kind: .fileChanged) }
                // The last bytes of the file: it must still be the file whose length was sent. One that grew or
                // was written meanwhile would arrive as its first `length` bytes, old and new mixed, and be
                // reported as sent; its last read fails instead, so the server never has a whole body of it.
                if Int64(got) == remaining, let before = opened, let now = Self.state(fd) {
                    if now.size != before.size { return changed(path, "\(length) bytes when it began, \(now.size) now") }
                    if now.modified.tv_sec != before.modified.tv_sec || now.modified.tv_nsec != before.modified.tv_nsec {
                        return changed(path, "written to since it began")
                    }
                }
                n = got
            case .standardInput:
                // Never streamed: a read from a pipe would block, and on Linux a blocking body read stalls
                // every session of the process. Standard input goes through the session's file source.
                return fail("standard input cannot be part of a streamed body")
            }
            if n == 0 {
                index += 1
                offsetInPiece = 0
                continue
            }
            offsetInPiece += Int64(n)
            status = .reading
            return n
        }
        status = .atEnd
        return 0
    }

    private static func state(_ fd: Int32) -> (size: Int64, modified: timespec)? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return (Int64(st.st_size), st.st_mtim)
    }

    private func changed(_ path: String, _ how: String) -> Int {
        fileChanged.store(true, ordering: .releasing)
        return fail("\(path) changed while it was being uploaded (\(how))", kind: .fileChanged)
    }

    private func fail(_ message: String, kind: FailureKind = .unreadableFile) -> Int {
        status = .error
        failure = NSError(domain: "ferry.upload", code: 1,
                          userInfo: [NSLocalizedDescriptionKey: message, FailureKind.userInfoKey: kind.rawValue])
        return -1
    }
}
