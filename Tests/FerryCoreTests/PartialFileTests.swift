import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import FerryStorage

/// How a `.part` file takes the pieces of a body: small ones are gathered in its buffer (a slow link hands over
/// a few KiB at a time), larger ones are written as they come, never copied into a buffer first; the piece
/// that completes the file waits for the flush of its finisher.
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

    @Test func thePieceThatCompletesTheFileWaitsForTheFinishersFlush() throws {
        defer { unlink(path) }
        let file = try PartialFile(openingOrCreating: path, bufferSize: 64 << 10)
        file.expectedSize = 96 << 10
        try file.append(Data(repeating: 1, count: 32 << 10))
        #expect(onDisk() == 32 << 10)
        // The last piece is kept as it came: the delegate queue writes nothing for it...
        try file.append(Data(repeating: 2, count: 64 << 10))
        #expect(onDisk() == 32 << 10 && file.size == 96 << 10 && file.written == 32 << 10)
        // ...the finisher's flush does, after what came before it.
        try file.flush()
        let bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes == Data(repeating: 1, count: 32 << 10) + Data(repeating: 2, count: 64 << 10))
        #expect(file.written == 96 << 10)
    }

    @Test func aWholeSmallBodyIsWrittenOnlyOnceItIsFlushedAndATruncateDropsIt() throws {
        defer { unlink(path) }
        let file = try PartialFile(openingOrCreating: path, bufferSize: 64 << 10)
        file.expectedSize = 100
        try file.append(Data(repeating: 7, count: 100))
        #expect(onDisk() == 0 && file.size == 100)
        // The server sends the whole representation again: what was kept goes too.
        try file.truncate()
        #expect(file.size == 0)
        try file.append(Data(repeating: 8, count: 100))
        try file.flush()
        #expect(FileManager.default.contents(atPath: path) == Data(repeating: 8, count: 100))
    }
}
