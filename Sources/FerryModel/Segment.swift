/// One range of a segmented download: bytes `start..<end` of the file, of which the first `done` are on disk.
public struct SegmentState: Sendable, Codable, Equatable {
    public var start: Int64
    public var end: Int64
    public var done: Int64

    public init(start: Int64, end: Int64, done: Int64 = 0) {
        self.start = start
        self.end = end
        self.done = done
    }

    public var isComplete: Bool { start + done >= end }
    public var next: Int64 { start + done }

    /// `total` bytes cut into at most `count` ranges of at least `minimum` bytes each, in order.
    public static func plan(total: Int64, count: Int, minimum: Int64) -> [SegmentState] {
        let n = Int(max(1, min(Int64(count), total / max(1, minimum))))
        let size = total / Int64(n)
        return (0..<n).map { i in
            let start = Int64(i) * size
            return SegmentState(start: start, end: i == n - 1 ? total : start + size)
        }
    }
}
