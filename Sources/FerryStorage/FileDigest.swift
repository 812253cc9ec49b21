import Crypto
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
                throw .local("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: block[0..<n]))
            offset += off_t(n)
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
