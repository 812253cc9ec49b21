import CDigest
import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

package enum FileDigest {
    /// SHA-256 of a whole file read with pread in 1 MiB blocks (the file may be much larger than memory).
    package static func sha256Hex(fd: Int32, path: String) throws(TransferFailure) -> String {
        var hasher = SHA256()
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { block.deallocate() }
        var offset: off_t = 0
        while true {
            let n = pread(fd, block.baseAddress, block.count, offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw .local("cannot read \(path)", errno: errno)
            }
            if n == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: block[0..<n]))
            offset += off_t(n)
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// The identity of a file a resumable upload is made from: its size, its modification time and a SHA-256
    /// of its first and last MiB (cheap for any size; an edit in the middle that keeps size and time is not
    /// seen). nil when the file cannot be read.
    package static func fingerprint(path: String) -> (size: Int64, modified: TimeInterval, hash: String)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        let size = Int64(st.st_size)
        let modified = TimeInterval(st.st_mtim.tv_sec) + TimeInterval(st.st_mtim.tv_nsec) / 1e9
        let mib: Int64 = 1 << 20
        var hasher = SHA256()
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(mib), alignment: 4096)
        defer { block.deallocate() }
        for start in Set([0, max(0, size - mib)]).sorted() {
            var done = 0
            let want = Int(min(mib, size - start))
            while done < want {
                let n = pread(fd, block.baseAddress! + done, want - done, off_t(start) + off_t(done))
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return nil }
                done += n
            }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: block[0..<want]))
        }
        return (size, modified, hasher.finalize().map { String(format: "%02x", $0) }.joined())
    }
}
