import Foundation
import Testing
@testable import FerryModel
@testable import FerryStorage

/// SHA-256 (CDigest): the system's libcrypto and the portable implementation give the known answers (FIPS 180-4's
/// examples) and the same digests for any data, however it is split into updates.
@Suite struct DigestTests {
    static func hex(_ digest: [UInt8]) -> String { digest.map { String(format: "%02x", $0) }.joined() }

    static func digest(_ data: [UInt8], portable: Bool, splits: [Int] = []) -> String {
        var hasher = SHA256(portable: portable)
        var at = 0
        for split in splits + [data.count] where split >= at && split <= data.count {
            data[at..<split].withUnsafeBytes { hasher.update(bufferPointer: $0) }
            at = split
        }
        return hex(hasher.finalize())
    }

    @Test(arguments: [false, true])
    func knownAnswers(portable: Bool) {
        #expect(Self.digest([], portable: portable) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.digest(Array("abc".utf8), portable: portable) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8), portable: portable)
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Self.digest([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000), portable: portable, splits: [1, 63, 64, 65, 999_999])
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every length around the block and padding edges, split at random: both implementations agree.
    @Test func theTwoImplementationsAgree() {
        #expect(SHA256.usesLibcrypto, "libcrypto (which libcurl brings) was not found: hashing is the slower portable one")
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...200) + [4_095, 4_096, 65_537, 1 << 20] {
            let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let splits = (0..<3).map { _ in Int.random(in: 0...max(0, length), using: &generator) }.sorted()
            #expect(Self.digest(data, portable: true, splits: splits) == Self.digest(data, portable: false), "length \(length)")
        }
        #expect(Self.hex(SHA256.hash(data: Data("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
