import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `NAME.part` file being written: small pieces of body (a slow link hands over a few KiB at a time) are
/// coalesced in a buffer and written in large blocks; a piece as large as the buffer is written at once.
/// The buffer is made when the first small piece comes: a fast transfer, whose pieces are large, never
/// holds one (8 ranges held 2 MiB of them). The piece that completes the file is kept as it came (no copy)
/// until the file is flushed, which its finisher does as it checks it: a small file, whose body is one piece,
/// is then written off the delegate queue, where every transfer's callbacks wait in turn (1,000 files of
/// 64 KiB: 33 µs less per file there, docs/performance.md).
/// Not thread-safe: one attempt owns it and touches it from the serial delegate queue, then hands it on.
package final class PartialFile {
    /// Where a download named `name` in `directory` is written until it is complete: the one spelling of it.
    package static func path(directory: String, name: String) -> String { directory + "/" + name + suffix }
    package static let suffix = ".part"
    package let path: String
    package private(set) var fd: Int32
    private let bufferSize: Int
    private var storage: UnsafeMutableRawBufferPointer?
    private var buffer: UnsafeMutableRawBufferPointer {
        if let storage { return storage }
        let made = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 4096)
        storage = made
        return made
    }
    private var buffered = 0
    /// The piece that completes the file (`expectedSize`), kept until the file is flushed.
    private var last: Data?
    /// Bytes already written to the file (the buffer comes after them).
    package private(set) var written: Int64
    /// For a segment: where the next write lands (positioned writes into a preallocated file).
    private var position: Int64?
    /// The size the file will have when complete, when known: a full disk's message says what is missing.
    package var expectedSize: Int64?

    /// Opens (creating when missing) a partial file and positions at its end.
    package convenience init(openingOrCreating path: String, bufferSize: Int) throws(TransferFailure) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .local("cannot open \(path)", errno: errno) }
        self.init(path: path, fd: fd, bufferSize: bufferSize)
    }

    /// Takes over an already open descriptor (e.g. one created with O_EXCL while claiming a name).
    package init(path: String, fd: Int32, bufferSize: Int) {
        self.path = path
        self.fd = fd
        self.bufferSize = max(bufferSize, 64 * 1024)
        var st = stat()
        written = fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
        _ = lseek(fd, off_t(written), SEEK_SET)
    }

    /// One segment of a preallocated file: writes land at `offset` and onwards; `written` counts this segment's bytes.
    package init(segmentOf path: String, at offset: Int64, bufferSize: Int) throws(TransferFailure) {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .local("cannot open \(path)", errno: errno) }
        self.path = path
        self.fd = fd
        self.bufferSize = max(bufferSize, 64 * 1024)
        self.written = 0
        self.position = offset
    }

    deinit {
        if fd >= 0 { _ = Glibc.close(fd) }
        storage?.deallocate()
    }

    /// Everything received so far, flushed or not.
    package var size: Int64 { written + Int64(buffered) + Int64(last?.count ?? 0) }

    package func append(_ data: Data) throws(TransferFailure) {
        let count = data.count
        if last != nil { try flush() }
        if let expectedSize, size + Int64(count) == expectedSize, count > 0 {
            last = data
            return
        }
        if buffered + count > bufferSize { try flush() }
        // Large pieces are written as they come; so is a piece of a quarter of the buffer or more when nothing
        // waits in it (a small file's body in two pieces over HTTP/2: 64 streams at once made 900 buffers, 2 MiB
        // at the peak, each piece copied once more).
        if count >= bufferSize || (buffered == 0 && count >= bufferSize / 4) {
            try writeAll(data)
            return
        }
        data.withUnsafeBytes { raw in
            (buffer.baseAddress! + buffered).copyMemory(from: raw.baseAddress!, byteCount: count)
        }
        buffered += count
    }

    package func flush() throws(TransferFailure) {
        if buffered > 0 {
            let pending = UnsafeRawBufferPointer(start: buffer.baseAddress, count: buffered)
            buffered = 0
            try writeAll(pending)
        }
        guard let piece = last else { return }
        last = nil
        try writeAll(piece)
    }

    private func writeAll(_ data: Data) throws(TransferFailure) {
        let failure = data.withUnsafeBytes { raw -> TransferFailure? in
            do throws(TransferFailure) { try writeAll(raw) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(TransferFailure) {
        var offset = 0
        while offset < bytes.count {
            let n = position.map { pwrite(fd, bytes.baseAddress! + offset, bytes.count - offset, off_t($0)) }
                ?? write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ENOSPC || errno == EDQUOT {
                    throw .local(.diskFull, DiskSpace.fullMessage(writing: path, needed: expectedSize.map { $0 - written }))
                }
                throw .local("cannot write \(path)", errno: errno)
            }
            offset += n
            written += Int64(n)
            if let current = position { position = current + Int64(n) }
        }
    }

    /// Drops everything (the server sent the whole representation again, or a new one).
    package func truncate() throws(TransferFailure) {
        buffered = 0
        last = nil
        guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
            throw .local("cannot truncate \(path)", errno: errno)
        }
        written = 0
    }

    package func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }
}

extension StoredTransfer {
    /// An item whose saved progress could not be read (`unreadable`) starts over: its `.part` file is emptied
    /// (what it holds is unknown: a preallocated file has holes of zeros) and its progress forgotten, so it can
    /// never be published as it is. Call with the engine lock held, before the item runs. Returns the sentence
    /// to tell the user, nil when the item needed nothing.
    public mutating func startOverIfUnreadable() -> String? {
        guard let what = unreadable else { return nil }
        unreadable = nil
        guard state != .completed else { return nil }
        if let path = partPath { _ = truncate(path, 0) }
        segments = nil
        bytesDone = 0
        let sentence = "\(what) could not be read from the queue: it starts over from the first byte"
        lastError = sentence
        failure = FailureCause(.other)
        return sentence
    }
}
