import CDigest
import Foundation

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
