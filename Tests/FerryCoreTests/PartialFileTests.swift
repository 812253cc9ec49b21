import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import FerryStorage

/// How a `.part` file takes the pieces of a body: small ones are gathered in its buffer (a slow link hands over
/// a few KiB at a time), larger ones are written as they come, never copied into a buffer first.
@Suite struct PartialFileTests {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-part-\(UUID().uuidString).part").path

    func onDisk() -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1 }

    @Test func piecesOfAQuarterOfTheBufferGoStraightToTheFileSmallerOnesWait() throws {
        defer { unlink(path) }
        let file = try PartialFile(openingOrCreating: path, bufferSize: 64 << 10)
        // A small file's body in two pieces (HTTP/2): each is written at once.
        try file.append(Data(repeating: 1, count: 16 << 10))
        #expect(onDisk() == 16 << 10)
        // A trickle waits in the buffer...
        try file.append(Data(repeating: 2, count: 1 << 10))
        #expect(onDisk() == 16 << 10 && file.size == 17 << 10)
        // ...and a larger piece after it joins it there, so the file's bytes stay in order.
        try file.append(Data(repeating: 3, count: 20 << 10))
        #expect(onDisk() == 16 << 10 && file.size == 37 << 10)
        try file.flush()
        let bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes == Data(repeating: 1, count: 16 << 10) + Data(repeating: 2, count: 1 << 10) + Data(repeating: 3, count: 20 << 10))
    }
}
