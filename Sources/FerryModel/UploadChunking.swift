/// How many bytes each PATCH of a resumable upload carries (tus, and IETF appends): `[uploads] chunk`, or a
/// host's `upload_chunk`.
///
/// A server that keeps nothing of a cut request (PyPI's `resumable-upload`, tus's Node server) loses a cut
/// request's bytes: chunks bound that loss, and servers that refuse large PATCHes take them (the start, 6 MiB:
/// what Supabase takes; Cloudflare Stream and tusd's S3 store want at least 5 MiB in multiples of 256 KiB).
/// Each chunk also costs the wait for its answer once its last byte went (a round trip and the server's commit),
/// which on a fast link with some latency is a large share (6 MiB chunks through 20 ms: 1.69 x one PATCH).
///
/// The default (`auto`) starts at 6 MiB and grows so that this wait is at most `waitShare` of a chunk's time:
/// the next chunk is what goes, at the pace of the last whole one, in `waitShare`'s inverse times its wait,
/// never more than `target` seconds of sending (a multiple of 256 KiB, at most `ceiling`, Cloudflare's 200 MiB
/// rounded down), and never more than `cutShare` of the upload (a cut or a kill costs under 5 % of the file, or
/// the start size: what the torture script holds every resumable upload to). On loopback, or on a slow link,
/// chunks stay at 6 MiB; through 20 ms at full speed a large file's grow to about 50 round trips of sending. A
/// server that refuses a grown chunk (413; libcurl stops sending at the early answer) is sent the start size
/// from then on. A size (`chunk = "6M"`) is exact and never grows; 0 sends the rest in one request.
public struct UploadChunking: Sendable, Equatable {
    /// The chunk now (0: the rest in one request).
    public private(set) var size: Int64
    public private(set) var grows: Bool
    private let start: Int64
    /// A grown chunk is at most this share of the upload.
    private let cutShare: Double

    /// 6 MiB: what Supabase takes, and a multiple of 256 KiB of at least 5 MiB.
    static let startSize: Int64 = 6 << 20
    /// The default, `auto`: 6 MiB, growing with the wait for each answer.
    public static let standard = UploadChunking(size: startSize, grows: true)

    /// The wait for a chunk's answer is at most this share of the chunk's time (2 %: with the first chunk's wait,
    /// under 5 % of one PATCH's time through 20 ms).
    public static let waitShare: Double = 0.02
    /// A chunk takes at most this many seconds of sending (a cut costs at most that much).
    public static let target: Double = 2
    public static let ceiling: Int64 = 192 << 20
    static let granule: Int64 = 256 << 10
    /// A grown chunk is at most 4 % of the upload (one lost to a cut, with the requests' heads and what was in
    /// flight, stays under 5 %).
    public static let defaultCutShare: Double = 0.04

    /// `cutShare`: a grown chunk's bound as a share of the upload (1: none beyond `ceiling`).
    public init(size: Int64, grows: Bool, cutShare: Double = defaultCutShare) {
        self.size = max(0, size)
        self.start = max(0, size)
        self.grows = grows && size > 0
        self.cutShare = cutShare
    }

    /// Larger than it started (a refusal sends the start size again).
    public var grown: Bool { size > start }

    /// The bytes of an append from `offset` of a `length`-byte upload.
    public func count(from offset: Int64, of length: Int64) -> Int64 {
        let rest = max(0, length - offset)
        return size > 0 ? min(size, rest) : rest
    }

    /// A chunk of `count` bytes of a `length`-byte upload went (request to answer) in `seconds`, of which `waited`
    /// were spent waiting for the answer once its last byte was sent: the next one is what goes at that pace in
    /// `waited / waitShare` seconds (at most `target`, at most `cutShare` of the upload), never less than it is
    /// now. Only a whole chunk counts (the last is often small).
    public mutating func sent(_ count: Int64, in seconds: Double, waited: Double, of length: Int64) {
        guard grows, count >= size, seconds > 0, waited > 0 else { return }
        let time = min(Self.target, waited / Self.waitShare)
        let bound = min(Double(Self.ceiling), Double(length) * cutShare)
        let paced = min(Double(count) / seconds * time, bound)
        guard paced.isFinite, paced > 0 else { return }
        let rounded = Int64(paced) / Self.granule * Self.granule
        size = max(size, min(rounded, Self.ceiling))
    }

    /// The server refused a chunk as too large: the start size from now on, without growing. False when the
    /// chunk was the start size already (the refusal is the server's answer to that).
    public mutating func refused() -> Bool {
        guard size > start else { return false }
        size = start
        grows = false
        return true
    }
}
