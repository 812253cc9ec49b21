import CDigest
import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// SHA-256 (CDigest: the system's libcrypto when it can be opened, at its speed; a portable implementation
/// otherwise). A value in use: copies share the hash under way, so a hash is updated through one variable.
package struct SHA256 {
    package typealias Digest = [UInt8]

    private final class State {
        let hash: OpaquePointer
        init(portable: Bool) { hash = ferry_sha256_new(portable ? 1 : 0)! }  // nil only when memory runs out
        deinit { ferry_sha256_free(hash) }
    }

    private let state: State

    /// `portable`: the built-in implementation even where libcrypto is (for the tests that compare the two).
    package init(portable: Bool = false) { state = State(portable: portable) }

    package mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        guard let base = bufferPointer.baseAddress, !bufferPointer.isEmpty else { return }
        ferry_sha256_update(state.hash, base, bufferPointer.count)
    }

    package mutating func update(data: some DataProtocol) {
        for region in data.regions { region.withUnsafeBytes { update(bufferPointer: $0) } }
    }

    /// The 32-byte digest; the hash is done with.
    package func finalize() -> Digest {
        var out = [UInt8](repeating: 0, count: 32)
        ferry_sha256_final(state.hash, &out)
        return out
    }

    package static func hash(data: some DataProtocol) -> Digest {
        var hasher = SHA256()
        hasher.update(data: data)
        return hasher.finalize()
    }

    /// Whether the system's libcrypto does the hashing.
    package static var usesLibcrypto: Bool { ferry_sha256_uses_libcrypto() != 0 }
}

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
