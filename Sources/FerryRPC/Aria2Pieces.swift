import FerryCore

/// An item's progress as aria2's pieces: fixed-size pieces (aria2's 1 MiB, doubled while there would be more
/// than `maximumCount`, so a huge file's `bitfield` stays a few KiB), and the hex `bitfield` of those wholly
/// done, the highest bit of the first byte for piece 0, the bits past the last piece zero (aria2's manual,
/// tellStatus). What is done comes from the segments where a download has some (each range's start up to what
/// it has), else from the start up to the bytes done: a web UI's piece bar then shows where each segment stands.
public struct Aria2Pieces: Equatable, Sendable {
    public var length: Int64
    public var count: Int
    /// nil when the length is not known (aria2 gives no bitfield then).
    public var bitfield: String?

    public static let pieceLength: Int64 = 1 << 20
    public static let maximumCount = 1 << 16

    public init(length: Int64, count: Int, bitfield: String?) {
        self.length = length
        self.count = count
        self.bitfield = bitfield
    }

    /// `total`: the file's length (nil: not known); `done`: ranges done, as (start, end) with end exclusive.
    public init(total: Int64?, done: [(start: Int64, end: Int64)]) {
        guard let total, total > 0 else {
            self.init(length: Self.pieceLength, count: 0, bitfield: nil)
            return
        }
        var length = Self.pieceLength
        while (total + length - 1) / length > Int64(Self.maximumCount) { length *= 2 }
        let count = Int((total + length - 1) / length)
        var bytes = [UInt8](repeating: 0, count: (count + 7) / 8)
        for range in done where range.end > range.start {
            // Pieces wholly inside the range (the last piece ends at the file's end).
            var piece = (max(0, range.start) + length - 1) / length
            while piece < Int64(count) {
                let end = min(total, (piece + 1) * length)
                guard end <= range.end else { break }
                bytes[Int(piece / 8)] |= 0x80 >> UInt8(piece % 8)
                piece += 1
            }
        }
        let digits = Array("0123456789abcdef")
        self.init(length: length, count: count, bitfield: String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }))
    }

    /// An item's pieces: a completed item has them all; a segmented one its segments' done parts.
    public init(_ item: TransferSnapshot) {
        let total = item.bytesExpected
        if item.state == .completed, let total {
            self.init(total: total, done: [(0, total)])
        } else if let segments = item.segments, !segments.isEmpty {
            self.init(total: total, done: segments.map { ($0.start, $0.start + $0.done) })
        } else {
            self.init(total: total, done: [(0, item.bytesDone)])
        }
    }
}
